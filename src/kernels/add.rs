//! Element-wise a + b.
//!
//! The idea that makes it fast: nothing but the three transfers the math
//! needs, at full width. Each thread adds a contiguous share of the elements a
//! block at a time in f32 (16-bit inputs widened by F16C or a shift, the sum
//! rounded once), writing straight into the output, which is allocated
//! uninitialized (see [`super::cpu`]): no zeroing pass; above 64 MiB on huge
//! pages, 512 times fewer page faults. On a GPU 16 bytes per load and
//! store from each thread (`cuda/add.cu`).

use std::mem::MaybeUninit;

use candle_core::{Result, Tensor};

use super::binary::Binary;
use super::cpu::{simd_kernel, Elem};

/// a + b element-wise, computed in f32; `a` and `b` have one shape and one
/// dtype (no broadcasting).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    OP.apply(a, b)
}

static OP: Binary = Binary {
    name: "lab-add",
    op: "add",
    // 32 Ki, so that from 64 Ki elements on (where Candle's own element-wise
    // ops share their work too) both threads add.
    min_task: 32 << 10,
    f32: into::<f32>,
    f16: into::<half::f16>,
    bf16: into::<half::bf16>,
    #[cfg(feature = "cuda")]
    module: &super::launch::ADD,
};

simd_kernel! {
    /// a + b into `z`, in f32.
    fn into<E: Elem>(a: &[E], b: &[E], z: &mut [MaybeUninit<E>]) {
        E::map2(a, b, z, |x, y| x + y);
    }
}
