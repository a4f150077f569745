//! RMSNorm's rows with AVX-512 (f32, and 16 bits converted in a register
//! on the way in and out: [`Lanes16`]), the sum of squares in four
//! registers of fused multiply-adds, the next row (and the lines its output
//! will be written to) asked of the cache while this one is summed. The portable rows (in `rms_norm.rs`) widen through
//! f32 buffers, whose extra stores and loads held them compute-bound in L2
//! (rms_norm fp16 6.9 G elements/s on the Xeon VM's two cores; 23 here, so
//! the large rows are now memory-bound: docs/kernels.md).

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::ahead;
use crate::kernels::cpu::x86::{native_bf16, Lanes16};

/// Values a register holds.
const V: usize = 16;
/// Bytes of a cache line.
const LINE: usize = 64;

/// The rows of `x` (rows of `width`) normalized into `y`, scaled by `w` if
/// given.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn rows<E: Lanes16>(
    x: &[E],
    w: Option<&[E]>,
    y: &mut [MaybeUninit<E>],
    width: usize,
    eps: f32,
) {
    assert!(x.len() == y.len() && w.is_none_or(|w| w.len() == width));
    let native = native_bf16();
    for (x, y) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
        // SAFETY: AVX-512F (the caller's); x and y a row each, w a row or none.
        unsafe { row(x, w, y, eps, native) };
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn row<E: Lanes16>(
    x: &[E],
    w: Option<&[E]>,
    y: &mut [MaybeUninit<E>],
    eps: f32,
    native: bool,
) {
    let n = x.len();
    let whole = n / V * V;
    let p = x.as_ptr();
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (every load below): i + 16 <= whole <= n values of x.
    while i + 4 * V <= whole {
        // The next row, a 64-byte line a prefetch (this step's 64 values
        // are two lines at 16 bits, four at f32; past the end a hint reads
        // nothing), and its output lines, so that its stores find them in
        // L1 rather than each waiting on a read for ownership (a 1024 x
        // 4096 f16 norm from memory, Xeon VM: 0.73-0.93 ms without,
        // 0.53-0.60 with; a read prefetch, as `kernels::ahead` says why).
        let q = y.as_ptr().cast::<E>();
        for line in (0..4 * V).step_by(LINE / std::mem::size_of::<E>()) {
            ahead::line(p.wrapping_add(i + n + line));
            ahead::line(q.wrapping_add(i + n + line));
        }
        for (k, a) in acc.iter_mut().enumerate() {
            let v = unsafe { E::load16(p.add(i + k * V)) };
            *a = _mm512_fmadd_ps(v, v, *a);
        }
        i += 4 * V;
    }
    while i < whole {
        let v = unsafe { E::load16(p.add(i)) };
        acc[0] = _mm512_fmadd_ps(v, v, acc[0]);
        i += V;
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    let tail: f32 = x[whole..]
        .iter()
        .map(|v| v.to_f64() as f32)
        .map(|v| v * v)
        .sum();
    let inv = 1.0 / ((_mm512_reduce_add_ps(sum) + tail) / n as f32 + eps).sqrt();

    let scale = _mm512_set1_ps(inv);
    let q = y.as_mut_ptr().cast::<E>();
    // SAFETY (every load and store below): i + 16 <= whole values of x, y
    // and w (a row's width, checked by the op).
    match w {
        None => {
            for i in (0..whole).step_by(V) {
                unsafe {
                    E::store16_as(_mm512_mul_ps(E::load16(p.add(i)), scale), q.add(i), native)
                };
            }
        }
        Some(w) => {
            let wp = w.as_ptr();
            for i in (0..whole).step_by(V) {
                let (v, wv) = unsafe { (E::load16(p.add(i)), E::load16(wp.add(i))) };
                let o = _mm512_mul_ps(_mm512_mul_ps(v, scale), wv);
                unsafe { E::store16_as(o, q.add(i), native) };
            }
        }
    }
    if whole < n {
        // The tail through a register too, so that it rounds as the rest
        // (half's f64 conversion to bf16 rounds on the top 32 bits only).
        let zero = E::from_f64(0.0);
        // SAFETY: AVX-512F (the caller's).
        unsafe {
            let mut o = _mm512_mul_ps(E::load_part(&x[whole..], zero), scale);
            if let Some(w) = w {
                o = _mm512_mul_ps(o, E::load_part(&w[whole..], zero));
            }
            E::store_part(o, &mut y[whole..]);
        }
    }
}
