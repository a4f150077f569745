//! The one shape of the suite's two-input element-wise kernels (a + b, and
//! SwiGLU's silu(gate) * up): both inputs of one shape and dtype, made
//! contiguous, each thread taking a contiguous share of the output a block at
//! a time in f32, the output allocated uninitialized ([`super::cpu`]); on a
//! GPU one element-wise PTX kernel per dtype. An op is its per-block function
//! for each dtype and its PTX module ([`Binary`]); this file is the rest.

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::cpu::{output, split, Elem};
use super::{check_same, contiguous, span};

/// The per-block function of one dtype: `out[i] = f(a[i], b[i])`, in f32.
type Block<E> = fn(&[E], &[E], &mut [MaybeUninit<E>]);

/// A two-input element-wise op.
pub(super) struct Binary {
    /// Its name as a Candle custom op ("lab-add").
    pub name: &'static str,
    /// Its name in errors and its PTX function's ("add").
    pub op: &'static str,
    /// Elements worth a thread's task of their own.
    pub min_task: usize,
    pub f32: Block<f32>,
    pub f16: Block<f16>,
    pub bf16: Block<bf16>,
    #[cfg(feature = "cuda")]
    pub module: &'static super::launch::Module,
}

impl Binary {
    /// The op on `a` and `b`, one shape and one dtype (no broadcasting).
    pub fn apply(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        check_same(self.op, a, b)?;
        if a.elem_count() == 0 {
            return a.zeros_like();
        }
        contiguous(a)?.apply_op2_no_bwd(&*contiguous(b)?, self)
    }

    fn run<E: Elem>(&self, f: Block<E>, a: &[E], b: &[E]) -> CpuStorage {
        output(a.len(), |dst| {
            split(dst, 1, self.min_task, |first, chunk| {
                let end = first + chunk.len();
                f(&a[first..end], &b[first..end], chunk);
            })
        })
    }
}

impl CustomOp2 for Binary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span(self.op, l1)?;
        let (c, d) = span(self.op, l2)?;
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(y)) => self.run(self.f32, &x[a..b], &y[c..d]),
            (CpuStorage::F16(x), CpuStorage::F16(y)) => self.run(self.f16, &x[a..b], &y[c..d]),
            (CpuStorage::BF16(x), CpuStorage::BF16(y)) => self.run(self.bf16, &x[a..b], &y[c..d]),
            (x, y) => bail!(
                "lab {}: dtypes {} and {} (f32, f16 or bf16, both the same)",
                self.op,
                x.dtype().as_str(),
                y.dtype().as_str()
            ),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{elementwise as grid, launch, Scalar};
        let n = l1.shape().elem_count();
        let cfg = grid(n, s1.dtype().size_in_bytes());
        let out = launch(
            self.module,
            self.op,
            &[(s1, l1), (s2, l2)],
            n,
            cfg,
            &[Scalar::U64(n as u64)],
        )?;
        Ok((out, l1.shape().clone()))
    }
}
