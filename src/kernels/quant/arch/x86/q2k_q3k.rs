//! The k-quants of 16-value sub-blocks (Q2_K and Q3_K), repacked eight rows
//! at a time, in AVX2 and VNNI. A sub-block of eight rows is one 32-byte
//! 2-bit plane: four registers of four values a row, a shift and a mask
//! each (and for Q3_K a third bit from the pair's high plane, as Q5_0's
//! fifth). The four multiply-adds of a sub-block sum at most 16 x 7 x 128
//! in a lane, so two sub-blocks' sums share a register as 16-bit halves and
//! meet the pair of per-16 scales in one `vpdpwssd` (`vpmaddwd` on AVX2):
//! a scale costs half an instruction, not a 32-bit multiply. What the
//! weights subtract (Q2_K's minima, Q3_K's 4) meets the activations'
//! sums of 16 the same way, a pair at a time.

use std::arch::x86_64::*;

use super::{ahead_lines, bcast4, bytes16, f16x8, load, Int};
use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::packed::{block_bytes, Q2K_SCALES, Q2K_VALUES, Q3K_SCALES, Q3K_VALUES};

// SAFETY (every `unsafe` block of this file without its own note): the
// kernels run inside functions built with the instruction set's features,
// which the dispatcher checked this CPU has; pointer reads stay inside the
// packed group and the activation rows the callers pass (their contracts).

/// The four registers of the 2-bit plane at `p`: register `q` holds values
/// `4 q .. 4 q + 4` of each row's sub-block (bits `2 q..` of each byte).
///
/// # Safety
/// `p` points at 32 readable bytes.
#[inline(always)]
unsafe fn crumbs(p: *const u8) -> [__m256i; 4] {
    unsafe {
        let (raw, m) = (load(p), _mm256_set1_epi8(3));
        [
            _mm256_and_si256(raw, m),
            _mm256_and_si256(_mm256_srli_epi16::<2>(raw), m),
            _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m),
            _mm256_and_si256(_mm256_srli_epi16::<6>(raw), m),
        ]
    }
}

/// Q3_K's pair of sub-blocks at `p` (two 2-bit planes, then the high
/// plane): eight registers of values 0-7, register `c`'s third bit from bit
/// `c` of the high plane, moved to bit 2 (16-bit shifts: what crosses a
/// byte's edge lands on bits the mask clears).
///
/// # Safety
/// `p` points at a packed Q3_K pair's 96 bytes.
#[inline(always)]
unsafe fn three_bits(p: *const u8) -> [[__m256i; 4]; 2] {
    unsafe {
        let mut v = [crumbs(p), crumbs(p.add(32))];
        let (hp, bit) = (load(p.add(64)), _mm256_set1_epi8(4));
        let high = [
            _mm256_slli_epi16::<2>(hp),
            _mm256_slli_epi16::<1>(hp),
            hp,
            _mm256_srli_epi16::<1>(hp),
            _mm256_srli_epi16::<2>(hp),
            _mm256_srli_epi16::<3>(hp),
            _mm256_srli_epi16::<4>(hp),
            _mm256_srli_epi16::<5>(hp),
        ];
        for (c, h) in high.iter().enumerate() {
            let v = &mut v[c / 4][c % 4];
            *v = _mm256_or_si256(*v, _mm256_and_si256(*h, bit));
        }
        v
    }
}

/// Sixteen activations at `x` as four registers, each four of them
/// broadcast to every lane.
///
/// # Safety
/// `x` points at 16 readable bytes.
#[inline(always)]
unsafe fn acts16(x: *const i8) -> [__m256i; 4] {
    let x = x.cast::<i32>();
    // SAFETY: four 4-byte reads inside the 16 bytes.
    unsafe {
        [
            bcast4(x),
            bcast4(x.add(1)),
            bcast4(x.add(2)),
            bcast4(x.add(3)),
        ]
    }
}

/// A pair of sub-blocks' sums `v` against the activations at `x` (32 of
/// them), as 16-bit halves of each lane: the first sub-block's in the low
/// half, ready for the pair of scales.
///
/// # Safety
/// `x` points at 32 readable bytes.
#[inline(always)]
unsafe fn pair_sums<I: Int>(v: &[[__m256i; 4]; 2], x: *const i8) -> __m256i {
    unsafe {
        let t0 = I::dot4(&v[0], &acts16(x));
        let t1 = I::dot4(&v[1], &acts16(x.add(16)));
        // Each sum fits 16 bits: its low half is the value.
        _mm256_blend_epi16::<0xAA>(t0, _mm256_slli_epi32::<16>(t1))
    }
}

/// Activation block `i`'s pair `p` of sums of 16, broadcast as 16-bit
/// halves of every lane.
///
/// # Safety
/// Block `i` of `a` exists; `p < 8`.
#[inline(always)]
unsafe fn bsums_pair(a: &Q8K, i: usize, p: usize) -> __m256i {
    unsafe { bcast4(a.bsums.as_ptr().add(16 * i + 2 * p).cast()) }
}

/// Q2_K, repacked: eight weight rows against `R` activation rows from
/// `r0`, as [`super::q32::group`]. Exact in 32 bits: at most 16 x 15 x 6144
/// a block for the values, 16 x 15 x 2048 for the minima.
///
/// # Safety
/// `w` points at a whole packed Q2_K group of `a.blocks` blocks; rows
/// `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn group_q2k<I: Int, const R: usize>(
    w: *const u8,
    a: &Q8K,
    r0: usize,
) -> [[f32; 8]; R] {
    let (nb, gb) = (a.blocks, block_bytes(Kind::Q2K));
    let mut sum = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        // SAFETY: block b of the group exists (b < nb), and so does block b
        // of the activation rows (the caller's rows).
        unsafe {
            let blk = w.add(b * gb);
            ahead_lines(blk, gb);
            let (mut isum, mut mins) = ([_mm256_setzero_si256(); R], [_mm256_setzero_si256(); R]);
            for p in 0..8 {
                // Row j's two scale bytes in lane j: scales low, minima high.
                let sm = bytes16(blk.add(Q2K_SCALES + 16 * p));
                let (sc, mn) = (
                    _mm256_and_si256(sm, _mm256_set1_epi16(15)),
                    _mm256_srli_epi16::<4>(sm),
                );
                let planes = blk.add(Q2K_VALUES + 64 * p);
                let v = [crumbs(planes), crumbs(planes.add(32))];
                for r in 0..R {
                    let i = (r0 + r) * nb + b;
                    let x = a.qs.as_ptr().add(i * QK_K + 32 * p);
                    isum[r] = I::dot16(isum[r], pair_sums::<I>(&v, x), sc);
                    mins[r] = I::dot16(mins[r], mn, bsums_pair(a, i, p));
                }
            }
            let (d, dmin) = (f16x8(blk), f16x8(blk.add(16)));
            for (r, sum) in sum.iter_mut().enumerate() {
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add((r0 + r) * nb + b));
                let (ds, ms) = (_mm256_mul_ps(d, dx), _mm256_mul_ps(dmin, dx));
                *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), ds, *sum);
                *sum = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins[r]), ms, *sum);
            }
        }
    }
    stored(sum)
}

/// Q3_K, repacked: as [`group_q2k`], its values 0-7 standing for -4..3
/// (the 4 taken back as 4 x scale x the activations' sum of 16), its scales
/// signed (-32..31). Exact in 32 bits: at most 16 x 32 x 14336 a block.
///
/// # Safety
/// `w` points at a whole packed Q3_K group of `a.blocks` blocks; rows
/// `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn group_q3k<I: Int, const R: usize>(
    w: *const u8,
    a: &Q8K,
    r0: usize,
) -> [[f32; 8]; R] {
    let (nb, gb) = (a.blocks, block_bytes(Kind::Q3K));
    let mut sum = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        // SAFETY: as in `group_q2k`.
        unsafe {
            let blk = w.add(b * gb);
            ahead_lines(blk, gb);
            let (mut isum, mut offs) = ([_mm256_setzero_si256(); R], [_mm256_setzero_si256(); R]);
            for p in 0..8 {
                let sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(blk.add(Q3K_SCALES + 16 * p).cast()));
                let v = three_bits(blk.add(Q3K_VALUES + 96 * p));
                for r in 0..R {
                    let i = (r0 + r) * nb + b;
                    let x = a.qs.as_ptr().add(i * QK_K + 32 * p);
                    isum[r] = I::dot16(isum[r], pair_sums::<I>(&v, x), sc);
                    offs[r] = I::dot16(offs[r], sc, bsums_pair(a, i, p));
                }
            }
            let d = f16x8(blk);
            for (r, sum) in sum.iter_mut().enumerate() {
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add((r0 + r) * nb + b));
                let total = _mm256_sub_epi32(isum[r], _mm256_slli_epi32::<2>(offs[r]));
                *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, dx), *sum);
            }
        }
    }
    stored(sum)
}

/// The eight rows' sums of each activation row, as arrays.
#[inline(always)]
fn stored<const R: usize>(sum: [__m256; R]) -> [[f32; 8]; R] {
    let mut out = [[0f32; 8]; R];
    for (o, s) in out.iter_mut().zip(sum) {
        // SAFETY: `o` holds eight f32.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), s) };
    }
    out
}
