//! The k-quants of 32-value sub-blocks with 6-bit scales and minima (Q4_K
//! and Q5_K), repacked eight rows at a time, in AVX2 and VNNI: one kernel,
//! Q5_K's fifth bits joined to the nibbles as Q5_0's are.

use std::arch::x86_64::*;

use super::q32::{five_bits, nibbles};
use super::{ahead_lines, bytes8, f16x8, Int};
use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::packed::{block_bytes, sub_bytes, Q4K_MINIMA, Q4K_SCALES, Q4K_VALUES};

// SAFETY (every `unsafe` block of this file without its own note): the
// kernels run inside functions built with the instruction set's features,
// which the dispatcher checked this CPU has; pointer reads stay inside the
// packed group and the activation rows the callers pass (their contracts).

/// Q4_K, or Q5_K where `FIVE`, repacked ([`crate::kernels::quant::packed`]):
/// eight weight rows against `R` activation rows from `r0`, as
/// [`super::q32::group`]. A sub-block's 32 values meet their activations as
/// a Q4_0 (Q5_0) block's do; each row's sum is then scaled by its own 6-bit
/// scale in its 32-bit lane (exact: at most 8 x 32 x 31 x 128 x 63 < 2^31 a
/// block), and the minima meet the activations' sums of 32.
///
/// # Safety
/// `w` points at a whole packed Q4_K (Q5_K) group of `a.blocks` blocks;
/// rows `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn group_q4k_q5k<I: Int, const FIVE: bool, const R: usize>(
    w: *const u8,
    a: &Q8K,
    r0: usize,
) -> [[f32; 8]; R] {
    let kind = if FIVE { Kind::Q5K } else { Kind::Q4K };
    let (nb, gb, sb) = (a.blocks, block_bytes(kind), sub_bytes(kind));
    let zero = unsafe { _mm256_setzero_ps() };
    let mut sum = [zero; R];
    for b in 0..nb {
        // SAFETY: block b of the group exists (b < nb), and so does block b
        // of the activation rows (the caller's rows).
        unsafe {
            let blk = w.add(b * gb);
            ahead_lines(blk, gb);
            let mut isum = [_mm256_setzero_si256(); R];
            for s in 0..8 {
                let sub = blk.add(Q4K_VALUES + sb * s);
                let v = if FIVE {
                    five_bits(sub, sub.add(128))
                } else {
                    nibbles(sub)
                };
                let sc = bytes8(blk.add(Q4K_SCALES + 8 * s));
                for (r, isum) in isum.iter_mut().enumerate() {
                    let i = (r0 + r) * nb + b;
                    let x = a.qs.as_ptr().add(i * QK_K + 32 * s).cast::<i32>();
                    let mut acc = [_mm256_setzero_si256(); 2];
                    for (k, &v) in v.iter().enumerate() {
                        let xb = _mm256_set1_epi32(x.add(k).read_unaligned());
                        acc[k / 4] = I::dot(acc[k / 4], v, xb);
                    }
                    let p = _mm256_add_epi32(acc[0], acc[1]);
                    *isum = _mm256_add_epi32(*isum, _mm256_mullo_epi32(p, sc));
                }
            }
            let (d, dmin) = (f16x8(blk), f16x8(blk.add(16)));
            for (r, sum) in sum.iter_mut().enumerate() {
                let i = (r0 + r) * nb + b;
                let bs = a.bsums.as_ptr().add(i * 16);
                let mut mins = _mm256_setzero_si256();
                for s in 0..8 {
                    let s32 = i32::from(*bs.add(2 * s)) + i32::from(*bs.add(2 * s + 1));
                    let m = _mm256_mullo_epi32(
                        bytes8(blk.add(Q4K_MINIMA + 8 * s)),
                        _mm256_set1_epi32(s32),
                    );
                    mins = _mm256_add_epi32(mins, m);
                }
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
                let (ds, ms) = (_mm256_mul_ps(d, dx), _mm256_mul_ps(dmin, dx));
                *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), ds, *sum);
                *sum = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), ms, *sum);
            }
        }
    }
    let mut out = [[0f32; 8]; R];
    for (r, o) in out.iter_mut().enumerate() {
        // SAFETY: `o` holds eight f32.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), sum[r]) };
    }
    out
}
