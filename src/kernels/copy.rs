//! A contiguous copy into a new tensor.
//!
//! The idea that makes it fast: a copy is `memcpy`, and the time goes to the
//! destination. Candle's `Tensor::copy` on the CPU builds the new buffer
//! element by element; here each thread `memcpy`s a contiguous share straight
//! into an output allocated uninitialized and, when large, advised onto huge
//! pages (see [`super::cpu`]), so what is left beyond the copy ceiling is the
//! first touch of fresh pages. On a GPU 16 bytes per load and store from each
//! thread (`cuda/copy.cu`).

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor, WithDType};

use super::cpu::{output, split, Elem};
use super::{check_dtype, contiguous, span, unsupported};

/// A copy of `x` with storage of its own.
pub fn copy(x: &Tensor) -> Result<Tensor> {
    check_dtype("copy", x.dtype())?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    contiguous(x)?.apply_op1_no_bwd(&Copy)
}

struct Copy;

impl CustomOp1 for Copy {
    fn name(&self) -> &'static str {
        "lab-copy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("copy", l)?;
        let out = match s {
            CpuStorage::F32(x) => copied(&x[a..b]),
            CpuStorage::F16(x) => copied(&x[a..b]),
            CpuStorage::BF16(x) => copied(&x[a..b]),
            other => return unsupported("copy", other.dtype()),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{elementwise as grid, launch, Scalar, COPY};
        let n = l.shape().elem_count();
        let cfg = grid(n, s.dtype().size_in_bytes());
        let out = launch(&COPY, "copy", &[(s, l)], n, cfg, &[Scalar::U64(n as u64)])?;
        Ok((out, l.shape().clone()))
    }
}

/// Elements worth a task of their own: `memcpy` moves a MiB in tens of
/// microseconds, so only 256 Ki elements pay for a hand-off.
const MIN_TASK: usize = 256 << 10;

fn copied<E: Elem + WithDType>(x: &[E]) -> CpuStorage {
    output(x.len(), |dst| {
        split(dst, 1, MIN_TASK, |first, chunk| {
            chunk.write_copy_of_slice(&x[first..first + chunk.len()]);
        })
    })
}
