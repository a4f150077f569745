//! The quantized dot products in AVX2 and VNNI integer instructions, ggml's
//! way (`ggml-cpu/arch/x86/quants.c`), written for this suite; what every
//! block type's kernels share is here (the instruction sets' multiply-adds,
//! [`Int`]; loads; the prefetch's import, [`crate::kernels::ahead`]), each
//! type's kernels in the file of its
//! name ([`super`]'s table):
//!
//! - Every type but Q6_K comes repacked eight rows at a time
//!   ([`crate::kernels::quant::packed`]): a register holds four values of
//!   each of eight rows, the four activations they meet are broadcast to
//!   every lane as they load, and the eight lanes end as eight rows' sums,
//!   scaled by the eight rows' scales in one multiply: no sum across lanes
//!   per row. Q6_K, as stored, is unpacked a block at a time (its low and
//!   high bits joined) and multiplied into every activation row of the tile.
//! - Unsigned weight bytes times signed activation bytes, four products
//!   summed into each 32-bit lane: one `vpdpbusd` with AVX512-VNNI (its
//!   512-bit form for two groups of 32-value blocks at once, [`wide`]; the
//!   256-bit form for the rest) or AVX-VNNI, `vpmaddubsw` + `vpmaddwd` with
//!   AVX2. Whatever the weights subtract (Q4_0's 8, Q5_0's 16, Q4_1's and
//!   Q5_1's minimum, the k-quants' minima, Q3_K's 4 and Q6_K's 32) is not
//!   subtracted per value: it multiplies the activation block's sum (or its
//!   sums of 16), computed once when the activations were quantized.
//! - A value's bits past the first four or two (Q5's fifth, Q3_K's third)
//!   come from a high plane, one bit of each of a register's bytes per bit
//!   of the plane's: a shift and a mask join them to the low ones.
//! - Q8_0's weights are signed. With VNNI they are offset by 128 (one xor)
//!   and 128 times the activations' sum taken back, as above; `vpmaddubsw`
//!   would saturate on such bytes, so AVX2 moves the sign onto the
//!   activations instead (`vpsignb`).
//! - The k-quants' per-16 or per-32 scales multiply the 16-bit pair sums
//!   (`vpmaddwd`, or `vpdpwssd` with VNNI) or the rows' 32-bit sums
//!   (`vpmulld`, repacked) before anything is converted to float: one
//!   conversion and one multiply per 256 values.

use std::arch::x86_64::*;

use crate::kernels::ahead::ahead_lines;

mod q2k_q3k;
mod q32;
mod q4k_q5k;
mod q6k;
mod walk;
mod wide;

// No closures in the kernels (`std::array::from_fn(|c| ...)`, `let f = |..|
// ...`): a closure is a function of its own, built without its caller's
// target features, so where the inliner leaves it a call, each intrinsic in
// it is a call too. Seen here: q8_0's matrix-vector product ran 4x slower
// when a kernel beside it grew and the inliner stopped short. Plain loops
// over arrays instead.

/// The integer multiply-adds of one instruction set.
pub(super) trait Int: Copy {
    /// Whether Q8_0's signed weights are offset by 128 (else the sign trick).
    const OFFSET_Q8: bool;
    /// Whether the CPU has AVX-512's full 512-bit registers for the 32-value
    /// blocks ([`group_pair`]).
    const WIDE: bool = false;
    /// `acc` plus, in each 32-bit lane, the four products of `u` (unsigned
    /// bytes) and `s` (signed bytes) in it.
    fn dot(acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `acc` plus, in each 32-bit lane, the two products of 16-bit `a` and `b`.
    fn dot16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
    /// In each 32-bit lane, the sixteen products of `u`'s four registers
    /// (unsigned bytes) and `s`'s (signed), for weights small enough that
    /// every 32-bit lane's sum fits 16 bits (Q2_K's and Q3_K's 2 and 3
    /// bits: at most 16 x 7 x 128). VNNI: one chain of `vpdpbusd`.
    #[inline(always)]
    fn dot4(u: &[__m256i; 4], s: &[__m256i; 4]) -> __m256i {
        // SAFETY: as every intrinsic here (below).
        let mut acc = unsafe { _mm256_setzero_si256() };
        for (&u, &s) in u.iter().zip(s) {
            acc = Self::dot(acc, u, s);
        }
        acc
    }
}

/// AVX2: `vpmaddubsw` (pairs to 16 bits; the Q4 and Q6 values are small
/// enough not to saturate it) and `vpmaddwd`.
#[derive(Clone, Copy)]
pub(super) struct Avx2;

/// AVX512-VNNI's 256-bit `vpdpbusd` and `vpdpwssd` (with AVX512-VL).
#[derive(Clone, Copy)]
pub(super) struct Vnni512;

/// AVX-VNNI's `vpdpbusd` and `vpdpwssd` (the VEX forms).
#[derive(Clone, Copy)]
pub(super) struct AvxVnni;

// SAFETY (every `unsafe` block of this file's intrinsics): the kernels run
// inside functions built with the instruction set's features, which the
// dispatcher checked this CPU has; pointer reads stay inside the weight row
// and the activation rows the callers pass (their contracts).
impl Int for Avx2 {
    const OFFSET_Q8: bool = false;
    #[inline(always)]
    fn dot(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        unsafe {
            let pairs = _mm256_maddubs_epi16(u, s);
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
        }
    }
    #[inline(always)]
    fn dot16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)) }
    }
    /// The four registers' pair sums added in 16 bits (they fit: see the
    /// trait), then one `vpmaddwd` to 32: eight instructions, not twelve.
    #[inline(always)]
    fn dot4(u: &[__m256i; 4], s: &[__m256i; 4]) -> __m256i {
        unsafe {
            let mut pairs = _mm256_maddubs_epi16(u[0], s[0]);
            for k in 1..4 {
                pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(u[k], s[k]));
            }
            _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
        }
    }
}

impl Int for Vnni512 {
    const OFFSET_Q8: bool = true;
    const WIDE: bool = true;
    #[inline(always)]
    fn dot(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        unsafe { _mm256_dpbusd_epi32(acc, u, s) }
    }
    #[inline(always)]
    fn dot16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_dpwssd_epi32(acc, a, b) }
    }
}

impl Int for AvxVnni {
    const OFFSET_Q8: bool = true;
    #[inline(always)]
    fn dot(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        unsafe { _mm256_dpbusd_avx_epi32(acc, u, s) }
    }
    #[inline(always)]
    fn dot16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_dpwssd_avx_epi32(acc, a, b) }
    }
}

#[inline(always)]
fn hsum(v: __m256) -> f32 {
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }
}

#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Eight bytes at `p` as eight unsigned 32-bit lanes.
#[inline(always)]
unsafe fn bytes8(p: *const u8) -> __m256i {
    unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast())) }
}

/// Sixteen bytes at `p` as sixteen unsigned 16-bit lanes: eight rows'
/// pairs of scale bytes (lane `2 j`, `2 j + 1`: row `j`'s two).
#[inline(always)]
unsafe fn bytes16(p: *const u8) -> __m256i {
    unsafe { _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast())) }
}

/// Four consecutive activation bytes at `x` (an i8 pointer as i32) broadcast
/// to every 32-bit lane, for a register of four values of eight rows.
#[inline(always)]
unsafe fn bcast4(x: *const i32) -> __m256i {
    unsafe { _mm256_set1_epi32(x.read_unaligned()) }
}

/// Eight f16 at `p` as eight f32 lanes (F16C: every tier is built with it).
#[inline(always)]
unsafe fn f16x8(p: *const u8) -> __m256 {
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
}

/// The f16 at `p` as f32 in all 8 lanes.
#[inline(always)]
unsafe fn f16x1(p: *const u8) -> __m256 {
    unsafe {
        let bits = p.cast::<u16>().read_unaligned();
        _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }
}

// Each block's loop asks the cache for the packed bytes 4 KiB ahead
// (`kernels::ahead::ahead_lines`), past what the hardware's streamer has in flight.
// Measured (AMD EPYC 2-core VM, Llama-3-8B's shapes from memory, three A B
// runs): it took q4_1's q_o from 0.32-0.39 ms to 0.25-0.26 and SmolLM2's
// q4_1 decode from 163-174 tok/s to 194-211; q8_0 moved within its noise.
