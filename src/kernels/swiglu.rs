//! SwiGLU's gate: y = silu(gate) * up = gate / (1 + exp(-gate)) * up, the
//! product at the heart of a Llama MLP (down(silu(gate(x)) * up(x))).
//!
//! The idea that makes it fast: one pass. Candle computes `silu(gate)` into a
//! new tensor and multiplies it by `up` in a second kernel: the intermediate
//! is written and read back, 5 tensor-sized transfers for the 3 the math
//! needs. Here each element is read from both inputs, computed in f32 (exp
//! from [`super::exp`], which vectorizes) and written once. On a GPU the same
//! in one element-wise kernel, 16 bytes per load (`cuda/swiglu.cu`).

use std::mem::MaybeUninit;

use candle_core::{Result, Tensor};

use super::binary::Binary;
use super::cpu::{simd_kernel, Elem};
use super::exp::exp;

/// silu(gate) * up element-wise, computed in f32; `gate` and `up` have one
/// shape and one dtype.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    OP.apply(gate, up)
}

static OP: Binary = Binary {
    name: "lab-swiglu",
    op: "swiglu",
    // An exponential each makes 16 Ki elements tens of microseconds.
    min_task: 16 << 10,
    f32: into::<f32>,
    f16: into::<half::f16>,
    bf16: into::<half::bf16>,
    #[cfg(feature = "cuda")]
    module: &super::launch::SWIGLU,
};

simd_kernel! {
    /// silu(gate) * up into `y`, in f32.
    fn into<E: Elem>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
        E::map2(gate, up, y, |g, u| g / (1.0 + exp(-g)) * u);
    }
}
