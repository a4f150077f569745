//! The quantized dot products in AVX2 and VNNI integer instructions, ggml's
//! way (`ggml-cpu/arch/x86/quants.c`), written for this suite:
//!
//! - The 32-value blocks come repacked eight rows at a time
//!   ([`super::packed`]): a register holds four values of each of eight
//!   rows, the four activations they meet are broadcast to every lane as
//!   they load, and the eight lanes end as eight rows' sums, scaled by the
//!   eight rows' scales in one multiply: no sum across lanes per row. The
//!   k-quants, as stored, are unpacked a block at a time (Q6_K's low and
//!   high bits joined) and multiplied into every activation row of the tile.
//! - Unsigned weight bytes times signed activation bytes, four products
//!   summed into each 32-bit lane: one `vpdpbusd` with AVX512-VNNI (its
//!   512-bit form for two groups of 32-value blocks at once, [`wide`]; the
//!   256-bit form for the rest) or AVX-VNNI, `vpmaddubsw` + `vpmaddwd` with
//!   AVX2. Whatever
//!   the weights subtract (Q4_0's 8, Q4_1's minimum, the k-quants' minima and
//!   Q6_K's 32) is not subtracted per value: it multiplies the activation
//!   block's sum, computed once when the activations were quantized.
//! - Q8_0's weights are signed. With VNNI they are offset by 128 (one xor)
//!   and 128 times the activations' sum taken back, as above; `vpmaddubsw`
//!   would saturate on such bytes, so AVX2 moves the sign onto the
//!   activations instead (`vpsignb`).
//! - The k-quants' per-16 or per-32 scales multiply the 16-bit pair sums
//!   (`vpmaddwd`, or `vpdpwssd` with VNNI) before anything is converted to
//!   float: one conversion and one multiply per 256 values.

use std::arch::x86_64::*;

mod wide;
pub(super) use wide::{group_pair, WIDE as WIDE_TILE};

use super::act::{Q8, Q8K, QK, QK_K};
use super::blocks::Kind;
use super::packed::{block_bytes, Q4K_MINIMA, Q4K_SCALES, Q4K_VALUES};

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

/// A 32-value block type as [`super::packed`] lays out eight rows of it.
pub(super) trait Packed32 {
    const KIND: Kind;
    /// Whether the values are signed bytes (Q8_0), whose AVX2 products move
    /// the sign onto the activations.
    const SIGNED: bool;
    /// Whether the activations' sum multiplies as Q8_1 stores it (f16):
    /// Q4_1's minimum, as ggml and Candle multiply it.
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
pub(super) struct Q8_0;
/// Q4_0: eight d, four chunks of nibbles, values q - 8.
pub(super) struct Q4_0;
/// Q4_1: eight d, eight m, four chunks of nibbles, values d q + m.
pub(super) struct Q4_1;

/// Four chunks of nibbles at `p` as eight registers: the low nibbles
/// (values 0-15 of each row), then the high ones (16-31).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> [__m256i; 8] {
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

/// Packed bytes ahead of the current block that the loop asks the cache
/// for, past what the hardware's streamer has in flight: a memory latency
/// (~100 ns) of the stream at a thread's pace (a line every 15-20 cycles)
/// is 1.5-2 KiB. Measured (AMD EPYC 2-core VM, Llama-3-8B's shapes from
/// memory, three A B runs): 4 KiB took q4_1's q_o from 0.32-0.39 ms to
/// 0.25-0.26 and SmolLM2's q4_1 decode from 163-174 tok/s to 194-211;
/// q8_0 moved within its noise.
const PREFETCH_BYTES: usize = 4096;

/// Asks the cache for the `len` bytes [`PREFETCH_BYTES`] past `blk`, a line
/// at a time (a prefetch past the weight's end reads nothing).
#[inline(always)]
fn prefetch_ahead(blk: *const u8, len: usize) {
    for line in (0..len).step_by(64) {
        // SAFETY: a prefetch is a hint: it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(blk.wrapping_add(PREFETCH_BYTES + line).cast()) };
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
pub(super) unsafe fn group<I: Int, B: Packed32, const R: usize>(
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
            prefetch_ahead(blk, gb);
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

/// Q4_K, repacked ([`super::packed`]): eight weight rows against `R`
/// activation rows from `r0`, as [`group`]. A sub-block's 32 values meet
/// their activations as a Q4_0 block's do; each row's sum is then scaled by
/// its own 6-bit scale in its 32-bit lane (exact: at most 8 x 32 x 15 x 127
/// x 63 < 2^31 a block), and the minima meet the activations' sums of 32.
///
/// # Safety
/// `w` points at a whole packed Q4_K group of `a.blocks` blocks; rows
/// `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(super) unsafe fn group_q4k<I: Int, const R: usize>(
    w: *const u8,
    a: &Q8K,
    r0: usize,
) -> [[f32; 8]; R] {
    let (nb, gb) = (a.blocks, block_bytes(Kind::Q4K));
    let zero = unsafe { _mm256_setzero_ps() };
    let mut sum = [zero; R];
    for b in 0..nb {
        // SAFETY: block b of the group exists (b < nb), and so does block b
        // of the activation rows (the caller's rows).
        unsafe {
            let blk = w.add(b * gb);
            prefetch_ahead(blk, gb);
            let mut isum = [_mm256_setzero_si256(); R];
            for s in 0..8 {
                let v = nibbles(blk.add(Q4K_VALUES + 128 * s));
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

/// Q6_K: `R` activation rows from `r0` against weight row `w`.
///
/// # Safety
/// As [`row_q4k`].
#[inline(always)]
pub(super) unsafe fn row_q6k<I: Int, const R: usize>(w: *const u8, a: &Q8K, r0: usize) -> [f32; R] {
    let nb = a.blocks;
    let mut acc = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        unsafe {
            let blk = w.add(b * Kind::Q6K.bytes());
            prefetch_ahead(blk, Kind::Q6K.bytes());
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
