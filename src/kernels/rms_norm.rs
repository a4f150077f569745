//! RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps), and the
//! same fused with its weight, y = x / sqrt(mean(x^2) + eps) * w (what
//! `candle_nn::ops::rms_norm` computes, the norm every Llama layer opens its
//! attention and its MLP with).
//!
//! The idea that makes it fast: two passes over a row that stays in cache,
//! the first summing squares in f32 into independent accumulators (16 in
//! the portable rows; four registers of 16 in the AVX-512 ones, `x86.rs`,
//! every dtype's where the CPU has it), the second scaling (and multiplying
//! by the weight in the same pass), the next row asked of the cache
//! meanwhile. One
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

#[cfg(target_arch = "x86_64")]
mod x86;
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
            CpuStorage::F32(x) => rows(&x[a..b], None, width, self.eps, picked::<f32>()),
            CpuStorage::F16(x) => rows(&x[a..b], None, width, self.eps, picked::<f16>()),
            CpuStorage::BF16(x) => rows(&x[a..b], None, width, self.eps, picked::<bf16>()),
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
                rows(&x[a..b], Some(&w[c..d]), width, self.eps, picked::<f32>())
            }
            (CpuStorage::F16(x), CpuStorage::F16(w)) => {
                rows(&x[a..b], Some(&w[c..d]), width, self.eps, picked::<f16>())
            }
            (CpuStorage::BF16(x), CpuStorage::BF16(w)) => {
                rows(&x[a..b], Some(&w[c..d]), width, self.eps, picked::<bf16>())
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

/// A kernel over whole rows: `x`'s rows (of `width`) normalized into `y`,
/// scaled by the weight if given.
type Rows<E> = fn(x: &[E], w: Option<&[E]>, y: &mut [MaybeUninit<E>], width: usize, eps: f32);

/// Every row of `x` (rows of `width`) normalized by `kernel`, and scaled by
/// `w` if given.
fn rows<E: Elem>(x: &[E], w: Option<&[E]>, width: usize, eps: f32, kernel: Rows<E>) -> CpuStorage {
    output(x.len(), |dst| {
        split(dst, width, MIN_TASK, |first, chunk| {
            kernel(&x[first..first + chunk.len()], w, chunk, width, eps);
        })
    })
}

/// The rows kernel for a type: AVX-512's (`rms_norm/x86.rs`: conversions in
/// registers, the next row and its output lines asked of the cache) where
/// this CPU has it, else the portable one. f32 too: its portable rows asked
/// nothing ahead, and read 64-73% of the copy's bound at the large and dram
/// footprints where these read 69-80% (rms_norm and rms_norm_mul, two
/// interleaved pairs of runs, the f6m207 Xeon VM).
#[cfg(target_arch = "x86_64")]
fn picked<E: crate::kernels::cpu::x86::Lanes16>() -> Rows<E> {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F, which x86::rows needs.
        |x, w, y, width, eps| unsafe { x86::rows(x, w, y, width, eps) }
    } else {
        rows_into::<E>
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn picked<E: Elem>() -> Rows<E> {
    rows_into::<E>
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows normalized by `kernel` (the weight, if any, of `width` values).
    fn run<E: Elem>(kernel: Rows<E>, x: &[E], w: Option<&[E]>, width: usize) -> Vec<f64> {
        let mut y = vec![MaybeUninit::uninit(); x.len()];
        kernel(x, w, &mut y, width, 1e-5);
        // SAFETY: a rows kernel writes every element of its rows.
        y.iter()
            .map(|v| unsafe { v.assume_init() }.to_f64())
            .collect()
    }

    /// The rows kernel this CPU picks for a type (AVX-512's where it has it)
    /// and the portable one agree to within a unit or two of the type's last
    /// place (their f32 sums add in different orders), at odd
    /// widths, with and without a weight: the integration tests reach only
    /// the one picked.
    fn both_agree<E: Elem>(to: fn(f32) -> E, ulp: f64, picked: Rows<E>) {
        for width in [1, 15, 16, 17, 63, 64, 65, 576, 1000, 4099] {
            let rows = 3;
            let mut s = 0x2545_f491u32;
            let mut draw = || {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * 6.0
            };
            let x: Vec<E> = (0..rows * width).map(|_| to(draw())).collect();
            let w: Vec<E> = (0..width).map(|_| to(draw())).collect();
            for w in [None, Some(&w[..])] {
                let (a, b) = (run(picked, &x, w, width), run(rows_into::<E>, &x, w, width));
                for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                    let tol = 2.0 * ulp * a.abs().max(b.abs()) + 1e-6;
                    assert!(
                        (a - b).abs() <= tol,
                        "width {width} at {i}: {a} against {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_picked_rows_agree_with_the_portable_ones() {
        both_agree::<f32>(|v| v, 2f64.powi(-23), picked::<f32>());
        both_agree::<f16>(f16::from_f32, 2f64.powi(-10), picked::<f16>());
        both_agree::<bf16>(bf16::from_f32, 2f64.powi(-7), picked::<bf16>());
    }
}
