//! Softmax over the last dimension: y_i = exp(x_i - max) / sum_j exp(x_j - max).
//!
//! The idea that makes it fast: the max and the sum found in one pass
//! ("online": when the max grows, the sum so far is rescaled by
//! exp(old max - new max); Milakov and Gimelshein, "Online normalizer
//! calculation for softmax", 2018), then one pass that writes. Two reads of
//! the row and one write, where the textbook three passes (max, exponentials
//! stored, divide) read it three times and write it twice; and exp is
//! [`super::exp`], which vectorizes, where libm's is a call per element.
//! On the CPU the running max is kept per block of [`BLOCK`] elements (one
//! rescale per block, not per element); on a GPU per thread, and the threads'
//! (max, sum) pairs merge in a warp shuffle and shared memory
//! (`cuda/softmax.cu`).

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::cpu::{output, simd_kernel, split, Elem, BLOCK};
use super::exp::exp;
use super::{check_dtype, contiguous, rows_of, span, unsupported};

const LANES: usize = 16;
/// Elements worth a task of their own: two exponentials per element make even
/// 16 Ki elements tens of microseconds.
const MIN_TASK: usize = 16 << 10;

/// Softmax over the last dimension, computed in f32.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    check_dtype("softmax", x.dtype())?;
    rows_of("softmax", x)?;
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    contiguous(x)?.apply_op1_no_bwd(&Softmax)
}

struct Softmax;

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        "lab-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (a, b) = span("softmax", l)?;
        let width = l.dims().last().copied().unwrap_or(1);
        let out = match s {
            CpuStorage::F32(x) => rows::<f32>(&x[a..b], width),
            CpuStorage::F16(x) => rows::<f16>(&x[a..b], width),
            CpuStorage::BF16(x) => rows::<bf16>(&x[a..b], width),
            other => return unsupported("softmax", other.dtype()),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        use super::launch::{launch, per_row, Scalar, SOFTMAX};
        let width = l.dims().last().copied().unwrap_or(1);
        let rows = l.shape().elem_count() / width;
        let scalars = [Scalar::I32(width as i32)];
        let out = launch(
            &SOFTMAX,
            "softmax",
            &[(s, l)],
            rows * width,
            per_row(rows, width),
            &scalars,
        )?;
        Ok((out, l.shape().clone()))
    }
}

fn rows<E: Elem>(x: &[E], width: usize) -> CpuStorage {
    output(x.len(), |dst| {
        split(dst, width, MIN_TASK, |first, chunk| {
            rows_into(&x[first..first + chunk.len()], chunk, width);
        })
    })
}

simd_kernel! {
    /// The softmax of each row of `x` into `y`.
    fn rows_into<E: Elem>(x: &[E], y: &mut [MaybeUninit<E>], width: usize) {
        for (x, y) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
            row(x, y);
        }
    }
}

/// One row: the online (max, sum) pass, a block at a time, then
/// exp(x - max) / sum written.
#[inline(always)]
fn row<E: Elem>(x: &[E], y: &mut [MaybeUninit<E>]) {
    let mut buf = [0f32; BLOCK];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    for block in x.chunks(BLOCK) {
        let v = E::widen(block, &mut buf);
        let new_max = max.max(lanes_max(v));
        if new_max == f32::NEG_INFINITY {
            // Nothing but -inf so far (a masked prefix): the sum stays 0.
            continue;
        }
        sum = sum * exp(max - new_max) + lanes_exp_sum(v, new_max);
        max = new_max;
    }
    let inv = 1.0 / sum;
    let mut out = [0f32; BLOCK];
    for (block, dst) in x.chunks(BLOCK).zip(y.chunks_mut(BLOCK)) {
        let v = E::widen(block, &mut buf);
        let o = &mut out[..v.len()];
        for (o, &v) in o.iter_mut().zip(v) {
            *o = exp(v - max) * inv;
        }
        E::narrow(o, dst);
    }
}

/// The largest element, in [`LANES`] lanes.
#[inline(always)]
fn lanes_max(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut lanes = v.chunks_exact(LANES);
    for c in &mut lanes {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = a.max(v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(lanes.remainder()) {
        *a = a.max(v);
    }
    acc.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// Sum of exp(v - max), in [`LANES`] lanes.
#[inline(always)]
fn lanes_exp_sum(v: &[f32], max: f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut lanes = v.chunks_exact(LANES);
    for c in &mut lanes {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += exp(v - max);
        }
    }
    for (a, &v) in acc.iter_mut().zip(lanes.remainder()) {
        *a += exp(v - max);
    }
    acc.iter().sum()
}
