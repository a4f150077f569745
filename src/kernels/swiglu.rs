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

#[cfg(target_arch = "x86_64")]
mod x86;

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
    f32: picked::<f32>,
    f32_streaming: None,
    f16: picked::<half::f16>,
    bf16: picked::<half::bf16>,
    #[cfg(feature = "cuda")]
    module: &super::launch::SWIGLU,
};

/// silu(gate) * up: AVX-512's (`swiglu/x86.rs`: a fused exp, conversions
/// in registers) where this CPU has it, else the portable kernel.
#[cfg(target_arch = "x86_64")]
fn picked<E: super::cpu::x86::Lanes16>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F, which x86::swiglu needs.
        unsafe { x86::swiglu(gate, up, y) }
    } else {
        into(gate, up, y)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn picked<E: Elem>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
    into(gate, up, y)
}

simd_kernel! {
    /// silu(gate) * up into `y`, in f32.
    fn into<E: Elem>(gate: &[E], up: &[E], y: &mut [MaybeUninit<E>]) {
        E::map2(gate, up, y, |g, u| g / (1.0 + exp(-g)) * u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[cfg(target_arch = "x86_64")]
    use crate::kernels::cpu::x86::Lanes16 as Picked;
    #[cfg(not(target_arch = "x86_64"))]
    use Elem as Picked;

    /// The kernel this CPU picks (AVX-512's where it has it) and the
    /// portable one agree to within a unit or two of the type's last place
    /// (their exponentials differ by an ulp or two), at lengths around a
    /// register and odd ones, large gates of both signs included: the
    /// integration tests reach only the one picked.
    fn both_agree<E: Picked>(to: fn(f32) -> E, ulp: f64) {
        for n in [1, 15, 16, 17, 33, 255, 1000, 4099] {
            let g: Vec<E> = (0..n)
                .map(|i| to((i as f32 * 0.37).sin() * 120.0))
                .collect();
            let u: Vec<E> = (0..n).map(|i| to((i as f32 * 0.11).cos() * 3.0)).collect();
            let (mut a, mut b) = (
                vec![MaybeUninit::uninit(); n],
                vec![MaybeUninit::uninit(); n],
            );
            picked(&g, &u, &mut a);
            into(&g, &u, &mut b);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                // SAFETY: both kernels write every element.
                let (a, b) = unsafe { (a.assume_init().to_f64(), b.assume_init().to_f64()) };
                let tol = 2.0 * ulp * a.abs().max(b.abs()) + 1e-30;
                assert!((a - b).abs() <= tol, "length {n} at {i}: {a} against {b}");
            }
        }
    }

    #[test]
    fn the_picked_kernel_agrees_with_the_portable_one() {
        both_agree::<f32>(|v| v, 2f64.powi(-21));
        both_agree::<f16>(f16::from_f32, 2f64.powi(-10));
        both_agree::<bf16>(bf16::from_f32, 2f64.powi(-7));
    }
}
