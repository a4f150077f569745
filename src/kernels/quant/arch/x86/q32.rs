//! The 32-value blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) in AVX2 and VNNI, eight
//! repacked rows at a time ([`group`]; sixteen in AVX-512, [`super::wide`]):
//! each type says how its packed block's values and scales load
//! ([`Packed32`]), and one kernel multiplies them into the activations.

use std::arch::x86_64::*;

use super::{ahead_lines, f16x8, load, Int};
use crate::kernels::quant::act::{Q8, QK};
use crate::kernels::quant::blocks::Kind;
use crate::kernels::quant::packed::q5_high;

// SAFETY (every `unsafe` block of this file without its own note): the
// kernels run inside functions built with the instruction set's features,
// which the dispatcher checked this CPU has; pointer reads stay inside the
// weights and the activation rows the callers pass (their contracts).

/// A 32-value block type as [`crate::kernels::quant::packed`] lays out eight rows of it.
pub(in crate::kernels::quant) trait Packed32 {
    const KIND: Kind;
    /// Whether the values are signed bytes (Q8_0), whose AVX2 products move
    /// the sign onto the activations.
    const SIGNED: bool;
    /// Whether the activations' sum multiplies as Q8_1 stores it (f16):
    /// Q4_1's and Q5_1's minimum, as ggml and Candle multiply it.
    const SUM16: bool = false;
    /// The eight rows' values of the packed block at `p`: register `c` holds
    /// values `4 c .. 4 c + 4` of row `j` in lane `j`, as bytes (unsigned,
    /// except Q8_0's on AVX2).
    ///
    /// # Safety
    /// `p` points at a whole packed block.
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8];
    /// The eight rows' scales, and what multiplies the activation block's sum.
    ///
    /// # Safety
    /// As [`Packed32::values`].
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256);
}

/// Q8_0: eight d, eight chunks of signed bytes.
pub(in crate::kernels::quant) struct Q8_0;
/// Q4_0: eight d, four chunks of nibbles, values q - 8.
pub(in crate::kernels::quant) struct Q4_0;
/// Q4_1: eight d, eight m, four chunks of nibbles, values d q + m.
pub(in crate::kernels::quant) struct Q4_1;
/// Q5_0: eight d, Q4_0's chunks and a high plane, values q - 16.
pub(in crate::kernels::quant) struct Q5_0;
/// Q5_1: eight d, eight m, the chunks and the high plane, values d q + m.
pub(in crate::kernels::quant) struct Q5_1;

/// Four chunks of nibbles at `p` as eight registers: the low nibbles
/// (values 0-15 of each row), then the high ones (16-31).
#[inline(always)]
pub(super) unsafe fn nibbles(p: *const u8) -> [__m256i; 8] {
    unsafe {
        let mask = _mm256_set1_epi8(15);
        let mut v = [_mm256_setzero_si256(); 8];
        for g in 0..4 {
            let raw = load(p.add(32 * g));
            v[g] = _mm256_and_si256(raw, mask);
            v[g + 4] = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), mask);
        }
        v
    }
}

/// The eight registers of [`nibbles`] with each value's fifth bit from the
/// high plane at `h` (register `c`'s at bit `c` of each byte, moved to bit
/// 4: a shift and a mask, no table). The shifts are 16-bit ones: what they
/// move across a byte's edge lands on bits the mask clears.
///
/// # Safety
/// `p` points at four chunks of nibbles, `h` at their 32-byte high plane.
#[inline(always)]
pub(super) unsafe fn five_bits(p: *const u8, h: *const u8) -> [__m256i; 8] {
    unsafe {
        let mut v = nibbles(p);
        let (hp, bit) = (load(h), _mm256_set1_epi8(0x10));
        let high = [
            _mm256_slli_epi16::<4>(hp),
            _mm256_slli_epi16::<3>(hp),
            _mm256_slli_epi16::<2>(hp),
            _mm256_slli_epi16::<1>(hp),
            hp,
            _mm256_srli_epi16::<1>(hp),
            _mm256_srli_epi16::<2>(hp),
            _mm256_srli_epi16::<3>(hp),
        ];
        for (v, h) in v.iter_mut().zip(high) {
            *v = _mm256_or_si256(*v, _mm256_and_si256(h, bit));
        }
        v
    }
}

impl Packed32 for Q8_0 {
    const KIND: Kind = Kind::Q8_0;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8] {
        let mut v = [unsafe { _mm256_setzero_si256() }; 8];
        for (c, v) in v.iter_mut().enumerate() {
            // SAFETY: chunk c of the packed block at p (the caller's contract).
            unsafe {
                let q = load(p.add(16 + 32 * c));
                // As unsigned q + 128, the 128 taken back from the sum.
                *v = if I::OFFSET_Q8 {
                    _mm256_xor_si256(q, _mm256_set1_epi8(-128))
                } else {
                    q
                };
            }
        }
        v
    }
    #[inline(always)]
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256) {
        unsafe {
            let d = f16x8(p);
            let c = if I::OFFSET_Q8 {
                _mm256_mul_ps(d, _mm256_set1_ps(-128.0))
            } else {
                _mm256_setzero_ps()
            };
            (d, c)
        }
    }
}

impl Packed32 for Q4_0 {
    const KIND: Kind = Kind::Q4_0;
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8] {
        unsafe { nibbles(p.add(16)) }
    }
    #[inline(always)]
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256) {
        unsafe {
            let d = f16x8(p);
            (d, _mm256_mul_ps(d, _mm256_set1_ps(-8.0)))
        }
    }
}

impl Packed32 for Q4_1 {
    const KIND: Kind = Kind::Q4_1;
    const SIGNED: bool = false;
    const SUM16: bool = true;
    #[inline(always)]
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8] {
        unsafe { nibbles(p.add(32)) }
    }
    #[inline(always)]
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256) {
        unsafe { (f16x8(p), f16x8(p.add(16))) }
    }
}

impl Packed32 for Q5_0 {
    const KIND: Kind = Kind::Q5_0;
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8] {
        unsafe { five_bits(p.add(16), p.add(q5_high(Kind::Q5_0))) }
    }
    #[inline(always)]
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256) {
        unsafe {
            let d = f16x8(p);
            (d, _mm256_mul_ps(d, _mm256_set1_ps(-16.0)))
        }
    }
}

impl Packed32 for Q5_1 {
    const KIND: Kind = Kind::Q5_1;
    const SIGNED: bool = false;
    const SUM16: bool = true;
    #[inline(always)]
    unsafe fn values<I: Int>(p: *const u8) -> [__m256i; 8] {
        unsafe { five_bits(p.add(32), p.add(q5_high(Kind::Q5_1))) }
    }
    #[inline(always)]
    unsafe fn scales<I: Int>(p: *const u8) -> (__m256, __m256) {
        unsafe { (f16x8(p), f16x8(p.add(16))) }
    }
}

/// Eight weight rows (a packed group at `w`) against `R` activation rows
/// from `r0`: lane `j` of result `r` is row `j`'s dot with activation row
/// `r0 + r`. Each block's values are unpacked once for the `R` rows; each
/// 4-byte group of activations is broadcast to the eight lanes as it loads
/// (a load, not a shuffle).
///
/// # Safety
/// `w` points at a whole packed group of `a.blocks` blocks of `B`; rows
/// `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(in crate::kernels::quant) unsafe fn group<I: Int, B: Packed32, const R: usize>(
    w: *const u8,
    a: &Q8,
    r0: usize,
) -> [[f32; 8]; R] {
    let (nb, gb) = (a.blocks, 8 * B::KIND.bytes());
    let zero = unsafe { _mm256_setzero_ps() };
    let (mut sum, mut corr) = ([zero; R], [zero; R]);
    let signed = B::SIGNED && !I::OFFSET_Q8;
    let sums = if B::SUM16 { &a.s16 } else { &a.s };
    for b in 0..nb {
        // SAFETY: block b of the group exists (b < nb), and so do block b
        // of the activation rows (the caller's rows); a prefetch past the
        // group's end reads nothing.
        unsafe {
            let blk = w.add(b * gb);
            ahead_lines(blk, gb);
            let v = B::values::<I>(blk);
            let (d, c) = B::scales::<I>(blk);
            for r in 0..R {
                let i = (r0 + r) * nb + b;
                let x = a.qs.as_ptr().add(i * QK).cast::<i32>();
                // Two chains of four multiply-adds, not one of eight.
                let mut acc = [_mm256_setzero_si256(); 2];
                for (k, &v) in v.iter().enumerate() {
                    let xb = _mm256_set1_epi32(x.add(k).read_unaligned());
                    let (u, s) = if signed {
                        (_mm256_sign_epi8(v, v), _mm256_sign_epi8(xb, v))
                    } else {
                        (v, xb)
                    };
                    acc[k / 4] = I::dot(acc[k / 4], u, s);
                }
                let p = _mm256_add_epi32(acc[0], acc[1]);
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
                let sx = _mm256_broadcast_ss(&*sums.as_ptr().add(i));
                sum[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d, dx), sum[r]);
                corr[r] = _mm256_fmadd_ps(c, sx, corr[r]);
            }
        }
    }
    let mut out = [[0f32; 8]; R];
    for (r, o) in out.iter_mut().enumerate() {
        // SAFETY: `o` holds eight f32.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(sum[r], corr[r])) };
    }
    out
}
