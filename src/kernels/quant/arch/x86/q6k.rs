//! Q6_K in AVX2 and VNNI, read as stored: a row's block unpacked once (its
//! low and high bits joined) and multiplied into every activation row of
//! the tile, its per-16 scales on the 16-bit pair sums.

use std::arch::x86_64::*;

use super::{ahead_lines, f16x1, hsum, load, Int};
use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::Kind;

// SAFETY (every `unsafe` block of this file without its own note): the
// kernels run inside functions built with the instruction set's features,
// which the dispatcher checked this CPU has; pointer reads stay inside the
// weights and the activation rows the callers pass (their contracts).

/// Q6_K: `R` activation rows from `r0` against weight row `w`.
///
/// # Safety
/// `w` points at a whole row of `a.blocks` Q6_K blocks as stored; rows
/// `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn row_q6k<I: Int, const R: usize>(
    w: *const u8,
    a: &Q8K,
    r0: usize,
) -> [f32; R] {
    let nb = a.blocks;
    let mut acc = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        // SAFETY: block b of the row exists (b < nb), and so does block b
        // of the activation rows (the caller's rows); the instructions are
        // the caller's (built with the tier's features).
        unsafe {
            let blk = w.add(b * Kind::Q6K.bytes());
            ahead_lines(blk, Kind::Q6K.bytes());
            let d = f16x1(blk.add(208));
            let sc = blk.add(192).cast::<i8>();
            let m4 = _mm256_set1_epi8(15);
            let m30 = _mm256_set1_epi8(0x30);
            // Values 32t.. of each half h: low 4 bits and high 2 bits joined.
            let mut q = [_mm256_setzero_si256(); 8];
            for (g, q) in q.iter_mut().enumerate() {
                let (h, t) = (g / 4, g % 4);
                let ql = _mm256_loadu_si256(blk.add(64 * h + 32 * (t % 2)).cast());
                let qh = _mm256_loadu_si256(blk.add(128 + 32 * h).cast());
                let lo = if t < 2 {
                    ql
                } else {
                    _mm256_srli_epi16::<4>(ql)
                };
                let hi = match t {
                    0 => _mm256_slli_epi16::<4>(qh),
                    1 => _mm256_slli_epi16::<2>(qh),
                    2 => qh,
                    _ => _mm256_srli_epi16::<2>(qh),
                };
                *q = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(hi, m30));
            }
            // Two scales per 32 values: one per 16, eight 16-bit lanes each,
            // picked from the sixteen by a shuffle (ggml's `get_scale_shuffle`).
            let sc = _mm_loadu_si128(sc.cast());
            let mut s = [_mm256_setzero_si256(); 8];
            for (g, s) in s.iter_mut().enumerate() {
                let (lo, hi) = (2 * g as i64, 2 * g as i64 + 1);
                let pick = _mm_set_epi64x(hi * 0x0101_0101_0101_0101, lo * 0x0101_0101_0101_0101);
                *s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, pick));
            }
            let s16 = _mm256_cvtepi8_epi16(sc);
            for (r, acc) in acc.iter_mut().enumerate() {
                let i = (r0 + r) * nb + b;
                let x = a.qs.as_ptr().add(i * QK_K);
                let mut isum = [_mm256_setzero_si256(); 2];
                for (g, (&q, &s)) in q.iter().zip(&s).enumerate() {
                    let pairs = _mm256_maddubs_epi16(q, load(x.add(32 * g).cast()));
                    isum[g % 2] = I::dot16(isum[g % 2], pairs, s);
                }
                let isum = _mm256_add_epi32(isum[0], isum[1]);
                // The values were stored + 32: take back 32 x scale x sum per 16.
                let bs = _mm256_loadu_si256(a.bsums.as_ptr().add(i * 16).cast());
                let off = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bs, s16));
                let isum = _mm256_sub_epi32(isum, off);
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dx), *acc);
            }
        }
    }
    let mut out = [0f32; R];
    for (o, &acc) in out.iter_mut().zip(&acc) {
        *o = hsum(acc);
    }
    out
}
