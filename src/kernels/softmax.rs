//! Softmax over the last dimension: y_i = exp(x_i - max) / sum_j exp(x_j - max).
//!
//! The idea that makes it fast: the max and the sum found in one pass
//! ("online": when the max grows, the sum so far is rescaled by
//! exp(old max - new max); Milakov and Gimelshein, "Online normalizer
//! calculation for softmax", 2018), so the row is read once to normalize it
//! and written once. On the CPU the pass goes a block of [`BLOCK`] elements at
//! a time and keeps each block's exponentials (taken against the block's own
//! max) in a scratch row that stays in cache, so the writing pass only scales
//! them: one exponential per element, from [`super::exp`], which vectorizes,
//! where libm's is a call per element and Candle's kernel makes three passes
//! (max, exponentials stored, divide). On a GPU each thread keeps its own
//! (max, sum), and the threads' pairs merge in a warp shuffle and shared
//! memory (`cuda/softmax.cu`).

use std::mem::MaybeUninit;

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::cpu::{output, simd_kernel, split, Elem, BLOCK};
use super::exp::exp;
use super::{check_dtype, contiguous, rows_of, span, unsupported};

#[cfg(target_arch = "x86_64")]
mod x86;

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
            CpuStorage::F32(x) => rows(&x[a..b], width, picked::<f32>()),
            CpuStorage::F16(x) => rows(&x[a..b], width, picked::<f16>()),
            CpuStorage::BF16(x) => rows(&x[a..b], width, picked::<bf16>()),
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

/// A kernel over whole rows: the softmax of each of `x`'s rows (of `width`)
/// into `y`.
type Rows<E> = fn(x: &[E], y: &mut [MaybeUninit<E>], width: usize);

fn rows<E: Elem>(x: &[E], width: usize, kernel: Rows<E>) -> CpuStorage {
    output(x.len(), |dst| {
        split(dst, width, MIN_TASK, |first, chunk| {
            kernel(&x[first..first + chunk.len()], chunk, width);
        })
    })
}

/// The rows kernel: AVX-512's (`softmax/x86.rs`: three passes in registers,
/// a fused exp) where this CPU has it, else the portable one.
#[cfg(target_arch = "x86_64")]
fn picked<E: super::cpu::x86::Lanes16>() -> Rows<E> {
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: this CPU has AVX-512F, which x86::rows needs.
        |x, y, width| unsafe { x86::rows(x, y, width) }
    } else {
        rows_into::<E>
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn picked<E: Elem>() -> Rows<E> {
    rows_into::<E>
}

simd_kernel! {
    /// The softmax of each row of `x` into `y`, with one scratch row of
    /// exponentials for all of them.
    fn rows_into<E: Elem>(x: &[E], y: &mut [MaybeUninit<E>], width: usize) {
        let mut e = vec![0f32; width];
        let mut block_max = Vec::with_capacity(width.div_ceil(BLOCK));
        for (x, y) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
            row(x, y, &mut e, &mut block_max);
        }
    }
}

/// One row. The online pass, a block at a time: the block's max, its
/// exponentials exp(x - block max) kept in `e` and summed, and the row's
/// (max, sum) updated (the sum so far rescaled when the max grows). Then each
/// block's exponentials scaled by exp(block max - max) / sum and written: one
/// exponential per element, one read of `x`.
#[inline(always)]
fn row<E: Elem>(x: &[E], y: &mut [MaybeUninit<E>], e: &mut [f32], block_max: &mut Vec<f32>) {
    let mut buf = [0f32; BLOCK];
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    block_max.clear();
    for (block, e) in x.chunks(BLOCK).zip(e.chunks_mut(BLOCK)) {
        let v = E::widen(block, &mut buf);
        let bm = lanes_max(v);
        block_max.push(bm);
        if bm == f32::NEG_INFINITY {
            // A block of nothing but -inf (masked): it adds nothing.
            continue;
        }
        let bs = exp_sum_into(v, bm, e);
        let new_max = max.max(bm);
        sum = sum * exp(max - new_max) + bs * exp(bm - new_max);
        max = new_max;
    }
    let inv = 1.0 / sum;
    let mut out = [0f32; BLOCK];
    for ((e, dst), &bm) in e
        .chunks(BLOCK)
        .zip(y.chunks_mut(BLOCK))
        .zip(block_max.iter())
    {
        // A row of nothing but -inf has no softmax: NaN, as Candle's and
        // PyTorch's; a masked block of a row that has values is 0.
        let scale = if max == f32::NEG_INFINITY {
            f32::NAN
        } else if bm == f32::NEG_INFINITY {
            0.0
        } else {
            exp(bm - max) * inv
        };
        let o = &mut out[..e.len()];
        for (o, &e) in o.iter_mut().zip(e.iter()) {
            *o = e * scale;
        }
        E::narrow(o, dst);
    }
}

/// The largest element, in [`LANES`] lanes.
#[inline(always)]
pub(super) fn lanes_max(v: &[f32]) -> f32 {
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

/// exp(v - max) into `e`, and its sum in [`LANES`] lanes.
#[inline(always)]
fn exp_sum_into(v: &[f32], max: f32, e: &mut [f32]) -> f32 {
    for (e, &v) in e.iter_mut().zip(v) {
        *e = exp(v - max);
    }
    let mut acc = [0f32; LANES];
    let mut lanes = e[..v.len()].chunks_exact(LANES);
    for c in &mut lanes {
        for (a, &e) in acc.iter_mut().zip(c) {
            *a += e;
        }
    }
    for (a, &e) in acc.iter_mut().zip(lanes.remainder()) {
        *a += e;
    }
    acc.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    use crate::kernels::cpu::x86::Lanes16 as Picked;
    #[cfg(not(target_arch = "x86_64"))]
    use Elem as Picked;

    fn run<E: Elem>(kernel: Rows<E>, x: &[E], width: usize) -> Vec<f64> {
        let mut y = vec![MaybeUninit::uninit(); x.len()];
        kernel(x, &mut y, width);
        // SAFETY: a rows kernel writes every element of its rows.
        y.iter()
            .map(|v| unsafe { v.assume_init() }.to_f64())
            .collect()
    }

    /// The rows kernel this CPU picks (AVX-512's where it has it) and the
    /// portable one agree to within a unit or two of the type's last place,
    /// at odd widths, with a masked (-inf) stretch, a row of nothing but
    /// -inf (NaN, both) and a row with a NaN: the integration tests reach
    /// only the one picked.
    fn both_agree<E: Picked>(to: fn(f32) -> E, ulp: f64) {
        for width in [1, 15, 16, 17, 63, 64, 65, 300, 1000, 4099] {
            let mut s = 0x9e37_79b9u32;
            let mut x: Vec<E> = (0..4 * width)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 17;
                    s ^= s << 5;
                    to((s as f32 / u32::MAX as f32 - 0.5) * 20.0)
                })
                .collect();
            for v in &mut x[width..width + width / 2] {
                *v = to(f32::NEG_INFINITY);
            }
            for v in &mut x[2 * width..3 * width] {
                *v = to(f32::NEG_INFINITY);
            }
            x[3 * width + width / 3] = to(f32::NAN);
            let (a, b) = (
                run(picked::<E>(), &x, width),
                run(rows_into::<E>, &x, width),
            );
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                let same = (a.is_nan() && b.is_nan())
                    || (a - b).abs() <= 2.0 * ulp * a.abs().max(b.abs()) + 1e-7;
                assert!(same, "width {width} at {i}: {a} against {b}");
            }
            assert!(
                a[2 * width..3 * width].iter().all(|v| v.is_nan()),
                "width {width}"
            );
        }
    }

    #[test]
    fn the_picked_rows_agree_with_the_portable_ones() {
        both_agree::<f32>(|v| v, 2f64.powi(-21));
        both_agree::<f16>(f16::from_f32, 2f64.powi(-10));
        both_agree::<bf16>(bf16::from_f32, 2f64.powi(-7));
    }
}
