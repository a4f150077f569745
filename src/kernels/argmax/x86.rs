//! A row's argmax in AVX-512 ([`super::row`]'s): per lane the largest value
//! and its index, a strict ordered greater-than (a NaN never replaces, as in
//! Candle's scan), the tail's lanes past the row masked off the load and the
//! compare.

use std::arch::x86_64::*;

/// The index of `x`'s largest value: the first where it repeats, NaN passed
/// over (the caller answers a NaN first value itself), 0 where nothing is
/// above -inf.
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn row(x: &[f32]) -> u32 {
    let (n, p) = (x.len(), x.as_ptr());
    let whole = n - n % 16;
    let mut best = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut at = _mm512_setzero_si512();
    let mut idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let step = _mm512_set1_epi32(16);
    for i in (0..whole).step_by(16) {
        // SAFETY: i + 16 <= whole <= n.
        let v = unsafe { _mm512_loadu_ps(p.add(i)) };
        let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, best);
        best = _mm512_mask_mov_ps(best, gt, v);
        at = _mm512_mask_mov_epi32(at, gt, idx);
        idx = _mm512_add_epi32(idx, step);
    }
    if whole < n {
        let tail = ((1u32 << (n - whole)) - 1) as __mmask16;
        // SAFETY: the lanes past n are masked off the load.
        let v = unsafe { _mm512_mask_loadu_ps(best, tail, p.add(whole)) };
        let gt = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(tail, v, best);
        best = _mm512_mask_mov_ps(best, gt, v);
        at = _mm512_mask_mov_epi32(at, gt, idx);
    }
    let max = _mm512_reduce_max_ps(best);
    if max == f32::NEG_INFINITY {
        // Nothing above -inf (every value -inf or NaN): Candle's scan keeps
        // its first value's index.
        return 0;
    }
    // The first index among the lanes that hold the largest value.
    let top = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(best, _mm512_set1_ps(max));
    _mm512_mask_reduce_min_epu32(top, at)
}
