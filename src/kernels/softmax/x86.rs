//! Softmax's rows with AVX-512: three passes over a row that stays in L1
//! (a 4096-value row is 8-16 KiB, its exponentials 16 KiB more): the max
//! (the next row asked of the cache meanwhile), then exp(x - max) with
//! [`exp16`] into a scratch row and summed (the next row's output lines
//! asked for, to be written), then the scratch scaled and rounded out. The portable rows (in `softmax.rs`) go a block of 256 at a
//! time, online: per block a max with NaN-aware selects, two scalar
//! exponentials and the lanes summed across, widened and narrowed through
//! buffers, which held them at 2.0-2.3 G elements/s on the Xeon VM's two
//! cores with their data in L2. Here each value costs its load, a max, the
//! exponential and a multiply.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use crate::kernels::ahead;
use crate::kernels::cpu::x86::{native_bf16, Lanes16};
use crate::kernels::exp::x86::exp16;

const V: usize = 16;

/// The softmax of each row of `x` (rows of `width`) into `y`.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn rows<E: Lanes16>(x: &[E], y: &mut [MaybeUninit<E>], width: usize) {
    assert_eq!(x.len(), y.len());
    let mut e = vec![0f32; width.next_multiple_of(V)];
    let native = native_bf16();
    for (x, y) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
        // SAFETY: AVX-512F (the caller's); a row each, e a row of f32 or more.
        unsafe { row(x, y, &mut e, native) };
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn row<E: Lanes16>(x: &[E], y: &mut [MaybeUninit<E>], e: &mut [f32], native: bool) {
    let n = x.len();
    let whole = n / V * V;
    let p = x.as_ptr();
    // The tail padded with -inf: no effect on the max, exp 0 in the sum.
    // SAFETY: AVX-512F (the caller's).
    let tail = unsafe { E::load_part(&x[whole..], E::from_f64(f64::NEG_INFINITY)) };
    let mut m = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
    let mut i = 0;
    // SAFETY (every load below): i + 16 <= whole <= n values of x.
    while i + 4 * V <= whole {
        for (k, m) in m.iter_mut().enumerate() {
            ahead::line(p.wrapping_add(i + k * V + n));
            *m = _mm512_max_ps(*m, unsafe { E::load16(p.add(i + k * V)) });
        }
        i += 4 * V;
    }
    while i < whole {
        m[0] = _mm512_max_ps(m[0], unsafe { E::load16(p.add(i)) });
        i += V;
    }
    m[1] = _mm512_max_ps(m[1], tail);
    let max = _mm512_reduce_max_ps(_mm512_max_ps(
        _mm512_max_ps(m[0], m[1]),
        _mm512_max_ps(m[2], m[3]),
    ));

    let vm = _mm512_set1_ps(max);
    let mut acc = _mm512_setzero_ps();
    let q = y.as_mut_ptr().cast::<E>();
    // SAFETY (every load and store below): i + 16 <= whole + 16 <= e's
    // length (a multiple of 16 at least n); x's loads as above.
    for i in (0..whole).step_by(V) {
        // The next row's output lines, asked for to be written: its stores
        // then find them in L1 rather than each waiting on a read for
        // ownership (on the Xeon VM, a 1024 x 4096 f16 softmax with its data
        // out of the caches went from 1.43-1.47 ms to 1.12-1.17; a read
        // prefetch, as `kernels::ahead` says why).
        ahead::line(q.wrapping_add(i + n));
        let t = unsafe { exp16(_mm512_sub_ps(E::load16(p.add(i)), vm)) };
        unsafe { _mm512_storeu_ps(e.as_mut_ptr().add(i), t) };
        acc = _mm512_add_ps(acc, t);
    }
    if whole < n {
        let t = unsafe { exp16(_mm512_sub_ps(tail, vm)) };
        unsafe { _mm512_storeu_ps(e.as_mut_ptr().add(whole), t) };
        acc = _mm512_add_ps(acc, t);
    }
    // A row of nothing but -inf has no softmax: exp(-inf - -inf) is NaN,
    // and NaN the row, as Candle's and PyTorch's.
    let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(acc));

    for i in (0..whole).step_by(V) {
        // SAFETY: as above; y holds n values.
        unsafe {
            E::store16_as(
                _mm512_mul_ps(_mm512_loadu_ps(e.as_ptr().add(i)), inv),
                q.add(i),
                native,
            )
        };
    }
    if whole < n {
        // SAFETY: e holds 16 values from `whole`.
        unsafe {
            let o = _mm512_mul_ps(_mm512_loadu_ps(e.as_ptr().add(whole)), inv);
            E::store_part(o, &mut y[whole..]);
        }
    }
}
