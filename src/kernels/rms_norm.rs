//! RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps), and the
//! same fused with its weight, y = x / sqrt(mean(x^2) + eps) * w (what
//! `candle_nn::ops::rms_norm` computes, the norm every Llama layer opens its
//! attention and its MLP with).
//!
//! The idea that makes it fast: two passes over a row that stays in cache,
//! the first summing squares in f32 into 16 independent accumulators, the
//! second scaling (and multiplying by the weight in the same pass). One
//! running sum, as Candle's CPU kernel keeps (`.sum::<f32>()`), is a chain of
//! dependent adds the compiler may not reorder, so it runs one element per add
//! latency; 16 sums are 16 lanes of SIMD. Rows are split across threads. On a
//! GPU one block per row: its threads stride the row, their sums meet in a
//! warp shuffle and shared memory, and the second pass reads the row again
//! from cache (`cuda/rms_norm.cu`).

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::cpu::{output, simd_kernel, split, Elem, BLOCK};
use super::{check_dtype, contiguous, rows_of, span, unsupported};

/// Independent partial sums per row: 16 f32 lanes (two AVX registers).
const LANES: usize = 16;
/// Elements worth a task of their own: two passes at a few elements per
/// nanosecond make 64 Ki elements tens of microseconds, far above a hand-off.
const MIN_TASK: usize = 64 << 10;

/// x / sqrt(mean(x^2) + eps) over the last dimension, in f32.
pub fn rms_norm(x: &Tensor, eps: f32) -> Result<Tensor> {
    check_dtype("rms_norm", x.dtype())?;
    rows_of("rms_norm", x)?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    contiguous(x)?.apply_op1_no_bwd(&RmsNorm { eps })
}

/// x / sqrt(mean(x^2) + eps) * w over the last dimension, in f32, in one
/// kernel: `candle_nn::ops::rms_norm`'s result. `w` holds one scale per
/// element of a row.
pub fn rms_norm_mul(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    check_dtype("rms_norm_mul", x.dtype())?;
    let (_, width) = rows_of("rms_norm_mul", x)?;
    if w.dims() != [width] {
        bail!(
            "lab rms_norm_mul: weight of shape {:?} for rows of {width} (it must be [{width}])",
            w.dims()
        );
    }
    if w.dtype() != x.dtype() {
        bail!(
            "lab rms_norm_mul: weight in {}, input in {} (they must match)",
            w.dtype().as_str(),
            x.dtype().as_str()
        );
    }
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    contiguous(x)?.apply_op2_no_bwd(&*contiguous(w)?, &RmsNormMul { eps })
}

struct RmsNorm {
    eps: f32,
}

struct RmsNormMul {
    eps: f32,
}

impl CustomOp1 for RmsNorm {
    fn name(&self) -> &'static str {
        "lab-rms-norm"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("rms_norm", l)?;
        let width = l.dims().last().copied().unwrap_or(1);
        let out = match s {
            CpuStorage::F32(x) => rows::<f32>(&x[a..b], None, width, self.eps),
            CpuStorage::F16(x) => rows::<f16>(&x[a..b], None, width, self.eps),
            CpuStorage::BF16(x) => rows::<bf16>(&x[a..b], None, width, self.eps),
            other => return unsupported("rms_norm", other.dtype()),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{launch, per_row, Scalar, RMS_NORM};
        let width = l.dims().last().copied().unwrap_or(1);
        let rows = l.shape().elem_count() / width;
        let scalars = [Scalar::I32(width as i32), Scalar::F32(self.eps)];
        let cfg = per_row(rows, width);
        let out = launch(
            &RMS_NORM,
            "rms_norm",
            &[(s, l)],
            rows * width,
            cfg,
            &scalars,
        )?;
        Ok((out, l.shape().clone()))
    }
}

impl CustomOp2 for RmsNormMul {
    fn name(&self) -> &'static str {
        "lab-rms-norm-mul"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("rms_norm_mul", l1)?;
        let (c, d) = span("rms_norm_mul", l2)?;
        let width = l1.dims().last().copied().unwrap_or(1);
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(w)) => {
                rows::<f32>(&x[a..b], Some(&w[c..d]), width, self.eps)
            }
            (CpuStorage::F16(x), CpuStorage::F16(w)) => {
                rows::<f16>(&x[a..b], Some(&w[c..d]), width, self.eps)
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(w)) => {
                rows::<bf16>(&x[a..b], Some(&w[c..d]), width, self.eps)
            }
            (x, w) => bail!(
                "lab rms_norm_mul: input in {} and weight in {} (f32, f16 or bf16, both the same)",
                x.dtype().as_str(),
                w.dtype().as_str()
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
        use super::launch::{launch, per_row, Scalar, RMS_NORM};
        let width = l1.dims().last().copied().unwrap_or(1);
        let rows = l1.shape().elem_count() / width;
        let scalars = [Scalar::I32(width as i32), Scalar::F32(self.eps)];
        let cfg = per_row(rows, width);
        let ins = [(s1, l1), (s2, l2)];
        let out = launch(&RMS_NORM, "rms_norm_mul", &ins, rows * width, cfg, &scalars)?;
        Ok((out, l1.shape().clone()))
    }
}

/// Every row of `x` (rows of `width`) normalized, and scaled by `w` if given.
fn rows<E: Elem>(x: &[E], w: Option<&[E]>, width: usize, eps: f32) -> CpuStorage {
    output(x.len(), |dst| {
        split(dst, width, MIN_TASK, |first, chunk| {
            rows_into(&x[first..first + chunk.len()], w, chunk, width, eps);
        })
    })
}

simd_kernel! {
    /// The rows of `x` normalized into `y`.
    fn rows_into<E: Elem>(
        x: &[E],
        w: Option<&[E]>,
        y: &mut [MaybeUninit<E>],
        width: usize,
        eps: f32,
    ) {
        for (x, y) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
            row(x, w, y, eps);
        }
    }
}

/// One row: the sum of squares in [`LANES`] f32 accumulators, then the scale
/// (the weight widened a block at a time beside the row: from L1, cheaper
/// than a widened copy made once, which costs an allocation per call).
#[inline(always)]
fn row<E: Elem>(x: &[E], w: Option<&[E]>, y: &mut [MaybeUninit<E>], eps: f32) {
    let mut buf = [0f32; BLOCK];
    let mut acc = [0f32; LANES];
    for block in x.chunks(BLOCK) {
        let v = E::widen(block, &mut buf);
        let mut lanes = v.chunks_exact(LANES);
        for c in &mut lanes {
            for (a, &v) in acc.iter_mut().zip(c) {
                *a += v * v;
            }
        }
        for (a, &v) in acc.iter_mut().zip(lanes.remainder()) {
            *a += v * v;
        }
    }
    let sum: f32 = acc.iter().sum();
    let inv = 1.0 / (sum / x.len() as f32 + eps).sqrt();

    let (mut wbuf, mut out) = ([0f32; BLOCK], [0f32; BLOCK]);
    for (i, (block, dst)) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)).enumerate() {
        let v = E::widen(block, &mut buf);
        let o = &mut out[..v.len()];
        match w {
            None => {
                for (o, &v) in o.iter_mut().zip(v) {
                    *o = v * inv;
                }
            }
            Some(w) => {
                let w = E::widen(&w[i * BLOCK..i * BLOCK + v.len()], &mut wbuf);
                for ((o, &v), &w) in o.iter_mut().zip(v).zip(w) {
                    *o = v * inv * w;
                }
            }
        }
        E::narrow(o, dst);
    }
}
