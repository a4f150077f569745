//! The suite's own kernels, written the way Candle means custom kernels to be
//! written: each is a `candle_core::CustomOp1`/`CustomOp2` with a `cpu_fwd` and,
//! with the `cuda` feature, a `cuda_fwd`, applied with `apply_op*_no_bwd`, so
//! they take and return ordinary Candle tensors. One file per kernel (a
//! variant beside its kernel: `rms_norm_mul` with `rms_norm`, `round_to`
//! with `copy`), each opening with the idea that makes it fast:
//!
//! - [`rms_norm`] and [`rms_norm_mul`] (the norm fused with its weight, what
//!   `candle_nn::ops::rms_norm` computes),
//! - [`softmax_last_dim`] (online max and sum),
//! - [`swiglu`] (`silu(gate) * up` in one pass),
//! - [`rope`] (the rotary embedding, with no thread hand-off at a decode step)
//!   and [`heads`] (a projection's output cut into heads, rotated or not, in
//!   one pass from where it lies),
//! - [`copy`] and [`add`] (element-wise, at the copy ceiling on the CPU), and
//!   [`round_to`] (f32 rounded to f16 or bf16: a 16-bit KV cache's writes;
//!   another pair of dtypes, or a GPU, is Candle's `to_dtype`),
//! - [`argmax_last_dim`] (each row's largest value's index: greedy
//!   sampling's pick, Candle's answer to the index),
//! - [`cached_attention`] (attention over a cache, causal by position, for a
//!   decode step or a prompt chunk: a head's row a task, no tiny GEMMs),
//! - [`linear`] (`x W^T` on float weights, a decode row or a prompt chunk:
//!   matrix-vector products on every thread),
//! - [`QLinear`] (the same on GGUF blocks as stored: Q8_0, Q4_0, Q4_1, Q5_0,
//!   Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, the activations quantized to 8 bits
//!   once per row and dotted with integer instructions).
//!
//! fp32, fp16 and bf16, always accumulated and computed in f32 (16-bit values
//! are widened on load and rounded once on store). Another dtype, a rank the
//! op has no last dimension for, or shapes that disagree are one
//! `candle_core::Error` from the op, never a panic. A non-contiguous input is
//! made contiguous first (one copy, the same as Candle's own ops need), so the
//! result is right for any layout; the kernels that read a view's rows where
//! they lie (the element-wise pairs, rope and heads, attention's cache) copy
//! only the layouts they cannot read, and say so.
//!
//! The CPU code is plain Rust written so that the compiler vectorizes it (f32
//! lanes, no branches in the inner loops), split by rows across Candle's own
//! CPU pool ([`cpu`]). The CUDA code is in `cuda/*.cu`, compiled to PTX by `nvcc`
//! in `build.rs` when the `cuda` feature is on (the build that compiles
//! Candle's own kernels already needs nvcc), and loaded by the driver at the
//! first call: nothing is compiled at run time, so no NVRTC library is needed
//! on the GPU machine ([`launch`]). This module imports nothing of the suite's.

mod add;
pub(crate) mod ahead;
mod argmax;
mod attend;
mod binary;
mod copy;
mod cpu;
mod exp;
#[cfg(feature = "cuda")]
pub mod ladder;
#[cfg(feature = "cuda")]
mod launch;
mod matvec;
mod quant;
mod rms_norm;
mod rope;
mod rows;
mod softmax;
mod swiglu;
pub mod work;

use candle_core::{bail, DType, Layout, Result, Tensor};

pub use add::{add, add_streams};
pub use argmax::argmax_last_dim;
pub use attend::cached_attention;
pub use copy::{copy, round_to};
pub(crate) use cpu::advise_huge_pages;
pub use matvec::tiles::Tier as FloatTier;
pub use matvec::{linear, linear_on, linear_with};
pub use quant::{QLinear, QuantTier};
pub use rms_norm::{rms_norm, rms_norm_mul};
pub use rope::{heads, rope};
pub use rows::Threads;
pub use softmax::softmax_last_dim;
pub use swiglu::swiglu;

/// Refuses a dtype the kernels have no code for, naming the op.
fn check_dtype(op: &str, dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => Ok(()),
        other => unsupported(op, other),
    }
}

/// The error for a dtype the kernels have no code for.
fn unsupported<T>(op: &str, dtype: DType) -> Result<T> {
    bail!(
        "lab {op}: dtype {} is not supported (f32, f16 and bf16 are)",
        dtype.as_str()
    )
}

/// `x` itself when it is contiguous, else a contiguous copy of it (borrowed
/// or owned: no reference count is touched for the common case).
fn contiguous(x: &Tensor) -> Result<std::borrow::Cow<'_, Tensor>> {
    as_is_or_copied(x, x.is_contiguous())
}

/// `x` itself when `as_is` (its layout is one the kernel reads in place),
/// else a contiguous copy: what every kernel's wrapper hands its op.
fn as_is_or_copied(x: &Tensor, as_is: bool) -> Result<std::borrow::Cow<'_, Tensor>> {
    if as_is {
        Ok(std::borrow::Cow::Borrowed(x))
    } else {
        Ok(std::borrow::Cow::Owned(x.contiguous()?))
    }
}

/// Where the rows of a layout (its last dimension) start, when each row is
/// contiguous and they lie one fixed stride apart, as a view of a stacked
/// projection's output does: (the first row's offset, the stride); `None`
/// for any other layout. Contiguous rows are `width` apart; a scalar is one
/// row of one.
fn row_stride(l: &Layout) -> Option<(usize, usize)> {
    let (dims, strides) = (l.dims(), l.stride());
    let Some((&width, lead)) = dims.split_last() else {
        return Some((l.start_offset(), 1));
    };
    if width > 1 && strides[lead.len()] != 1 {
        return None;
    }
    let (mut stride, mut inside) = (None, 1);
    for (&n, &s) in lead.iter().zip(strides).rev().filter(|(&n, _)| n > 1) {
        let want = *stride.get_or_insert(s) * inside;
        if s != want {
            return None;
        }
        inside *= n;
    }
    Some((l.start_offset(), stride.unwrap_or(width)))
}

/// `x` itself when it is on the CPU and its rows are contiguous and a fixed
/// stride apart ([`row_stride`]), else a contiguous copy: what the kernels
/// that read rows in place take. Rows under [`IN_PLACE_WIDTH`] apart that
/// are not contiguous are copied: a call a row would cost more than the copy.
fn rows_in_place(x: &Tensor) -> Result<std::borrow::Cow<'_, Tensor>> {
    let wide = x.dims().last().is_some_and(|&w| w >= IN_PLACE_WIDTH);
    let rows = (wide || x.is_contiguous()) && row_stride(x.layout()).is_some();
    as_is_or_copied(x, x.device().is_cpu() && rows)
}

/// The narrowest rows read in place where they are not contiguous.
const IN_PLACE_WIDTH: usize = 16;

/// The rows of a tensor and their width: everything before the last
/// dimension, and the last dimension. A scalar has no last dimension.
fn rows_of(op: &str, x: &Tensor) -> Result<(usize, usize)> {
    let dims = x.dims();
    let Some(&width) = dims.last() else {
        bail!("lab {op}: needs a tensor of rank 1 or more, got a scalar");
    };
    Ok((dims[..dims.len() - 1].iter().product(), width))
}

/// The element range a layout that the wrapper made contiguous covers; an
/// error rather than a panic if it is not (the ops are private, so it never
/// is, but a wrong layout must not read the wrong memory).
fn span(op: &str, l: &Layout) -> Result<(usize, usize)> {
    match l.contiguous_offsets() {
        Some(span) => Ok(span),
        None => bail!("lab {op}: input is not contiguous (call .contiguous() first)"),
    }
}

/// Refuses two tensors of different shapes or dtypes, for the binary
/// element-wise ops.
fn check_same(op: &str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.dims() != b.dims() {
        bail!(
            "lab {op}: shapes {:?} and {:?} differ (no broadcasting)",
            a.dims(),
            b.dims()
        );
    }
    if a.dtype() != b.dtype() {
        bail!(
            "lab {op}: dtypes {} and {} differ",
            a.dtype().as_str(),
            b.dtype().as_str()
        );
    }
    check_dtype(op, a.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn row_stride_finds_rows_a_fixed_stride_apart_and_nothing_else() {
        let x = Tensor::zeros((2, 5, 12), DType::F32, &Device::Cpu).unwrap();
        let at = |t: &Tensor| row_stride(t.layout());
        assert_eq!(at(&x), Some((0, 12)));
        // Columns of a stacked output: rows 12 apart from offset 4.
        assert_eq!(at(&x.narrow(2, 4, 3).unwrap()), Some((4, 12)));
        // Whole rows from an offset are still contiguous rows.
        assert_eq!(at(&x.narrow(0, 1, 1).unwrap()), Some((60, 12)));
        // A row block of each batch: the gap between batches breaks the stride.
        assert_eq!(at(&x.narrow(1, 1, 3).unwrap()), None);
        // A transpose's last dimension is not contiguous.
        assert_eq!(at(&x.transpose(1, 2).unwrap()), None);
        // Sizes of one are no constraint: one row, any stride.
        let one = x.narrow(0, 1, 1).unwrap().narrow(1, 2, 1).unwrap();
        assert_eq!(
            at(&one.narrow(2, 3, 5).unwrap()),
            Some((12 * 5 + 2 * 12 + 3, 5))
        );
        let scalar = Tensor::new(1f32, &Device::Cpu).unwrap();
        assert_eq!(at(&scalar), Some((0, 1)));
    }
}
