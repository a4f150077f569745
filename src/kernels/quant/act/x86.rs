//! The activations' quantization in AVX2 and AVX-512 ([`super::q8`],
//! [`super::q8k`]): the portable loops' operations, a block in a few
//! registers, the same bits.

use std::arch::x86_64::*;

/// # Safety
/// The CPU has AVX2.
pub(super) unsafe fn q8(x: &[f32], k: usize) -> super::Q8 {
    // SAFETY: the caller's features.
    super::q8_with(x, k, |x, q, ds| unsafe { part(x, q, ds) })
}

/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn part(x: &[f32], qs: &mut [i8], ds: (&mut [f32], &mut [f32])) {
    // SAFETY: this function's features.
    super::blocks(x, qs, ds, |x, q| unsafe { block(x, q) })
}

/// Whether [`q8_512`] runs here.
pub(super) fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// [`q8`] a block in two 512-bit registers, the roundings' corrections
/// as masked adds: 16 rows of 576 in 3.3 us against 3.7 in 256 bits
/// (the 2-core Xeon measured, best of 3000). The same bits.
///
/// # Safety
/// The CPU has AVX512F and AVX512BW.
pub(super) unsafe fn q8_512(x: &[f32], k: usize) -> super::Q8 {
    // SAFETY: the caller's features.
    super::q8_with(x, k, |x, q, ds| unsafe { part512(x, q, ds) })
}

/// # Safety
/// The CPU has AVX512F and AVX512BW.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn part512(x: &[f32], qs: &mut [i8], ds: (&mut [f32], &mut [f32])) {
    // SAFETY: this function's features.
    super::blocks(x, qs, ds, |x, q| unsafe { block512(x, q) })
}

#[inline(always)]
unsafe fn block512(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    assert!(x.len() == super::QK && q.len() == super::QK);
    // SAFETY: 32 values in and out (asserted); the CPU's features are
    // the caller's.
    unsafe {
        let (v0, v1) = (
            _mm512_loadu_ps(x.as_ptr()),
            _mm512_loadu_ps(x.as_ptr().add(16)),
        );
        // The maximum of magnitudes is the same in any order: the same bits.
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        let scale = amax / 127.0;
        let inv = _mm512_set1_ps(if scale != 0.0 { 1.0 / scale } else { 0.0 });
        let (r0, r1) = (round_away512(v0, inv), round_away512(v1, inv));
        let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(r0, r1));
        // |q| <= 127: narrowing by truncation is exact.
        _mm_storeu_si128(q.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(r0));
        _mm_storeu_si128(q.as_mut_ptr().add(16).cast(), _mm512_cvtepi32_epi8(r1));
        (scale, sum)
    }
}

/// `round_away(v * inv)` in sixteen lanes: truncate, then one up (or
/// down) where the fraction is a half or more.
#[inline(always)]
unsafe fn round_away512(v: __m512, inv: __m512) -> __m512i {
    // SAFETY: the caller's features (AVX512F).
    unsafe {
        let y = _mm512_mul_ps(v, inv);
        let t = _mm512_cvttps_epi32(y);
        let frac = _mm512_sub_ps(y, _mm512_cvtepi32_ps(t));
        let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, _mm512_set1_ps(0.5));
        let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(frac, _mm512_set1_ps(-0.5));
        let one = _mm512_set1_epi32(1);
        let t = _mm512_mask_add_epi32(t, up, t, one);
        _mm512_mask_sub_epi32(t, down, t, one)
    }
}

/// [`super::q8k`] in AVX-512: a block's magnitude a 512-bit maximum,
/// its values rounded sixteen at a time as [`round_away512`] does, each
/// 16's sum one reduction. The same bits as the portable loop.
///
/// # Safety
/// The CPU has AVX512F and AVX512BW.
pub(super) unsafe fn q8k_512(x: &[f32], k: usize) -> super::Q8K {
    // SAFETY: the caller's features.
    super::q8k_with(x, k, |x, out| unsafe { part_k512(x, out) })
}

/// # Safety
/// The CPU has AVX512F and AVX512BW.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn part_k512(x: &[f32], out: &mut super::Q8K) {
    // SAFETY: this function's features.
    super::blocks_k(x, out, |x, q, bs| unsafe { block_k512(x, q, bs) })
}

#[inline(always)]
unsafe fn block_k512(x: &[f32], q: &mut [i8], bs: &mut [i16]) -> f32 {
    assert!(x.len() == super::QK_K && q.len() == super::QK_K && bs.len() == 16);
    // SAFETY: 256 values in and out, 16 sums (asserted); the CPU's
    // features are the caller's.
    unsafe {
        let p = x.as_ptr();
        let mut m = _mm512_setzero_ps();
        for i in 0..16 {
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(p.add(16 * i))));
        }
        // The maximum of magnitudes is the same in any order; then the
        // first value of it, as the portable loop finds.
        let amax = _mm512_set1_ps(_mm512_reduce_max_ps(m));
        let mut max = 0.0;
        for i in 0..16 {
            let v = _mm512_abs_ps(_mm512_loadu_ps(p.add(16 * i)));
            let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(v, amax);
            if eq != 0 {
                max = x[16 * i + eq.trailing_zeros() as usize];
                break;
            }
        }
        if max == 0.0 {
            return 0.0;
        }
        let inv = -127.0 / max;
        let (lo, hi) = (_mm512_set1_epi32(-128), _mm512_set1_epi32(127));
        for (i, b) in bs.iter_mut().enumerate() {
            let r = round_away512(_mm512_loadu_ps(p.add(16 * i)), _mm512_set1_ps(inv));
            let r = _mm512_max_epi32(_mm512_min_epi32(r, hi), lo);
            // In -128..127: narrowing by truncation is exact.
            _mm_storeu_si128(q.as_mut_ptr().add(16 * i).cast(), _mm512_cvtepi32_epi8(r));
            *b = _mm512_reduce_add_epi32(r) as i16;
        }
        1.0 / inv
    }
}

/// [`super::q8k`] in AVX2, eight values a register. The same bits.
///
/// # Safety
/// The CPU has AVX2.
pub(super) unsafe fn q8k(x: &[f32], k: usize) -> super::Q8K {
    // SAFETY: the caller's features.
    super::q8k_with(x, k, |x, out| unsafe { part_k(x, out) })
}

/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn part_k(x: &[f32], out: &mut super::Q8K) {
    // SAFETY: this function's features.
    super::blocks_k(x, out, |x, q, bs| unsafe { block_k(x, q, bs) })
}

#[inline(always)]
unsafe fn block_k(x: &[f32], q: &mut [i8], bs: &mut [i16]) -> f32 {
    assert!(x.len() == super::QK_K && q.len() == super::QK_K && bs.len() == 16);
    // SAFETY: 256 values in and out, 16 sums (asserted); the CPU's
    // features are the caller's.
    unsafe {
        let (p, sign) = (x.as_ptr(), _mm256_set1_ps(-0.0));
        let mut m = _mm256_setzero_ps();
        for i in 0..32 {
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(8 * i))));
        }
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm256_set1_ps(_mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m))));
        let mut max = 0.0;
        for i in 0..32 {
            let v = _mm256_andnot_ps(sign, _mm256_loadu_ps(p.add(8 * i)));
            let eq = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, amax));
            if eq != 0 {
                max = x[8 * i + eq.trailing_zeros() as usize];
                break;
            }
        }
        if max == 0.0 {
            return 0.0;
        }
        let inv = _mm256_set1_ps(-127.0 / max);
        let (half, minus_half) = (_mm256_set1_ps(0.5), _mm256_set1_ps(-0.5));
        let (lo, hi) = (_mm256_set1_epi32(-128), _mm256_set1_epi32(127));
        for (g, b) in bs.iter_mut().enumerate() {
            let mut r = [_mm256_setzero_si256(); 2];
            for (h, r) in r.iter_mut().enumerate() {
                // round_away, as in `block`, then the clamp.
                let y = _mm256_mul_ps(_mm256_loadu_ps(p.add(16 * g + 8 * h)), inv);
                let t = _mm256_cvttps_epi32(y);
                let frac = _mm256_sub_ps(y, _mm256_cvtepi32_ps(t));
                let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half));
                let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(frac, minus_half));
                let t = _mm256_add_epi32(_mm256_sub_epi32(t, up), down);
                *r = _mm256_max_epi32(_mm256_min_epi32(t, hi), lo);
            }
            // Packing works within 128-bit halves: the quarters put back
            // in order, then the 16 words to bytes.
            let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(r[0], r[1]));
            let bytes =
                _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
            _mm_storeu_si128(q.as_mut_ptr().add(16 * g).cast(), bytes);
            let s = _mm256_add_epi32(r[0], r[1]);
            let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            *b = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s))) as i16;
        }
        1.0 / (-127.0 / max)
    }
}

#[inline(always)]
unsafe fn block(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    assert!(x.len() == super::QK && q.len() == super::QK);
    // SAFETY: 32 values in and out (asserted); the CPU's features are
    // the caller's.
    unsafe {
        // Loops, not `std::array::from_fn`: see `super::x86` on closures.
        let (mut v, mut a) = ([_mm256_setzero_ps(); 4], [_mm256_setzero_ps(); 4]);
        let sign = _mm256_set1_ps(-0.0);
        for i in 0..4 {
            v[i] = _mm256_loadu_ps(x.as_ptr().add(8 * i));
            a[i] = _mm256_andnot_ps(sign, v[i]);
        }
        let m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        let scale = amax / 127.0;
        let inv = _mm256_set1_ps(if scale != 0.0 { 1.0 / scale } else { 0.0 });
        let (half, minus_half) = (_mm256_set1_ps(0.5), _mm256_set1_ps(-0.5));
        // round_away: truncate, then one up (or down) where the
        // fraction is a half or more (a compare's mask is -1).
        let mut r = [_mm256_setzero_si256(); 4];
        for (i, r) in r.iter_mut().enumerate() {
            let y = _mm256_mul_ps(v[i], inv);
            let t = _mm256_cvttps_epi32(y);
            let frac = _mm256_sub_ps(y, _mm256_cvtepi32_ps(t));
            let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half));
            let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(frac, minus_half));
            *r = _mm256_add_epi32(_mm256_sub_epi32(t, up), down);
        }
        let s = _mm256_add_epi32(_mm256_add_epi32(r[0], r[1]), _mm256_add_epi32(r[2], r[3]));
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let sum = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)));
        // Packing works within 128-bit halves: put the dwords back in order.
        let b = _mm256_packs_epi16(
            _mm256_packs_epi32(r[0], r[1]),
            _mm256_packs_epi32(r[2], r[3]),
        );
        let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(q.as_mut_ptr().cast(), b);
        (scale, sum)
    }
}
