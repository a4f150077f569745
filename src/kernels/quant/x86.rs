//! The quantized dot products in AVX2 and VNNI integer instructions, ggml's
//! way (`ggml-cpu/arch/x86/quants.c`), written for this suite:
//!
//! - A weight block is unpacked once into 32 unsigned bytes in the order of
//!   its values (Q4's nibbles split and masked; Q6_K's low and high bits
//!   joined), then multiplied into every activation row of the tile.
//! - Unsigned weight bytes times signed activation bytes, four products
//!   summed into each 32-bit lane: one `vpdpbusd` with AVX512-VNNI (its
//!   256-bit form) or AVX-VNNI, `vpmaddubsw` + `vpmaddwd` with AVX2. Whatever
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

use super::act::{Q8, Q8K, QK, QK_K};
use super::blocks::{f16_table, q4k_scales, Kind};

/// The integer multiply-adds of one instruction set.
pub(super) trait Int: Copy {
    /// Whether Q8_0's signed weights are offset by 128 (else the sign trick).
    const OFFSET_Q8: bool;
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

/// 16 bytes of nibbles as 32 bytes in value order: the low nibbles (values
/// 0-15), then the high ones (16-31). The 16 bytes are loaded into both
/// halves at once and the upper half shifted by a blend, so nothing goes
/// through the shuffle port (a 128-bit insert would).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    unsafe {
        let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast()));
        let shifted = _mm256_blend_epi32::<0xf0>(both, _mm256_srli_epi16::<4>(both));
        _mm256_and_si256(shifted, _mm256_set1_epi8(15))
    }
}

#[inline(always)]
unsafe fn load(p: *const i8) -> __m256i {
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// A 32-value block type: its size, and its values unpacked for [`row32`].
pub(super) trait Block32 {
    const BYTES: usize;
    /// Whether the values are signed bytes (Q8_0), whose AVX2 products move
    /// the sign onto the activations.
    const SIGNED: bool;
    /// Whether the activations' sum multiplies as Q8_1 stores it (f16):
    /// Q4_1's minimum, as ggml and Candle multiply it.
    const SUM16: bool = false;
    /// The block at `p`: its values as bytes (unsigned, except Q8_0's on
    /// AVX2), its scale, and what multiplies the activation block's sum,
    /// each scalar in all 8 lanes.
    ///
    /// # Safety
    /// `p` points at a whole block.
    unsafe fn unpack<I: Int>(p: *const u8, t: *const f32) -> (__m256i, __m256, __m256);
}

/// Q8_0: d, then 32 signed bytes.
pub(super) struct Q8_0;
/// Q4_0: d, then 16 bytes of nibbles, values q - 8.
pub(super) struct Q4_0;
/// Q4_1: d, m, then 16 bytes of nibbles, values d q + m.
pub(super) struct Q4_1;

impl Block32 for Q8_0 {
    const BYTES: usize = 34;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn unpack<I: Int>(p: *const u8, t: *const f32) -> (__m256i, __m256, __m256) {
        unsafe {
            let d = f16x8(p, t);
            let q = load(p.add(2).cast());
            if I::OFFSET_Q8 {
                // As unsigned q + 128, the 128 taken back from the sum.
                let q = _mm256_xor_si256(q, _mm256_set1_epi8(-128));
                (q, d, _mm256_mul_ps(d, _mm256_set1_ps(-128.0)))
            } else {
                (q, d, _mm256_setzero_ps())
            }
        }
    }
}

impl Block32 for Q4_0 {
    const BYTES: usize = 18;
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn unpack<I: Int>(p: *const u8, t: *const f32) -> (__m256i, __m256, __m256) {
        unsafe {
            let d = f16x8(p, t);
            (nibbles(p.add(2)), d, _mm256_mul_ps(d, _mm256_set1_ps(-8.0)))
        }
    }
}

impl Block32 for Q4_1 {
    const BYTES: usize = 20;
    const SIGNED: bool = false;
    const SUM16: bool = true;
    #[inline(always)]
    unsafe fn unpack<I: Int>(p: *const u8, t: *const f32) -> (__m256i, __m256, __m256) {
        unsafe { (nibbles(p.add(4)), f16x8(p, t), f16x8(p.add(2), t)) }
    }
}

/// The f16 at `p` as f32 in all 8 lanes, converted by F16C (every tier is
/// built with it). Not through `table` ([`f16_table`]): its 256 KiB are
/// five times the L1, so a block's scale was an L1 miss a block.
#[inline(always)]
unsafe fn f16x8(p: *const u8, table: *const f32) -> __m256 {
    let _ = table;
    unsafe {
        let bits = p.cast::<u16>().read_unaligned();
        let one = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits)));
        _mm256_broadcastss_ps(one)
    }
}

/// `R` activation rows from `r0` against weight row `w` (`a.blocks` blocks
/// of `B`). Two sets of accumulators, for even and odd blocks, so that a
/// row's sums are two chains of dependent adds, not one.
///
/// # Safety
/// `w` points at the row's blocks; rows `r0..r0 + R` of `a` exist.
#[inline(always)]
pub(super) unsafe fn row32<I: Int, B: Block32, const R: usize>(
    w: *const u8,
    a: &Q8,
    r0: usize,
) -> [f32; R] {
    let nb = a.blocks;
    let t = f16_table().as_ptr();
    let zero = unsafe { _mm256_setzero_ps() };
    let (mut even, mut odd) = ([(zero, zero); R], [(zero, zero); R]);
    let mut b = 0;
    while b + 2 <= nb {
        unsafe {
            block32::<I, B, R>(w, t, a, r0, b, &mut even);
            block32::<I, B, R>(w, t, a, r0, b + 1, &mut odd);
        }
        b += 2;
    }
    if b < nb {
        unsafe { block32::<I, B, R>(w, t, a, r0, b, &mut even) };
    }
    // The corrections are the same in all 8 lanes: one lane of them.
    std::array::from_fn(|r| unsafe {
        let (acc, corr) = (
            _mm256_add_ps(even[r].0, odd[r].0),
            _mm256_add_ps(even[r].1, odd[r].1),
        );
        hsum(acc) + _mm256_cvtss_f32(corr)
    })
}

/// Blocks ahead of the current one that the decode path asks the cache for.
const PREFETCH_BLOCKS: usize = 8;

/// Four weight rows `w` against activation row `r`: each activation block
/// loaded once for the four, and four weight streams read at once (one
/// stream a core is held to what one prefetcher fetches ahead; Candle's
/// `vec_dot_4` reads four too). The decode path (one activation row).
///
/// # Safety
/// Each of `w` points at a whole row of blocks of `B`; row `r` of `a` exists.
#[inline(always)]
pub(super) unsafe fn rows4_32<I: Int, B: Block32>(w: [*const u8; 4], a: &Q8, r: usize) -> [f32; 4] {
    let nb = a.blocks;
    let t = f16_table().as_ptr();
    let zero = unsafe { _mm256_setzero_ps() };
    let (mut sum, mut corr) = ([zero; 4], [zero; 4]);
    let signed = B::SIGNED && !I::OFFSET_Q8;
    let sums = if B::SUM16 { &a.s16 } else { &a.s };
    for b in 0..nb {
        let i = r * nb + b;
        // SAFETY: block i of the activations exists (row r's), block b of
        // every weight row too.
        unsafe {
            for wj in w {
                let ahead = wj.wrapping_add((b + PREFETCH_BLOCKS) * B::BYTES);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            }
            let x = load(a.qs.as_ptr().add(i * QK));
            let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
            let sx = _mm256_broadcast_ss(&*sums.as_ptr().add(i));
            for j in 0..4 {
                let (q, d, c) = B::unpack::<I>(w[j].add(b * B::BYTES), t);
                let (u, s) = if signed {
                    (_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q))
                } else {
                    (q, x)
                };
                let p = I::dot(_mm256_setzero_si256(), u, s);
                sum[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d, dx), sum[j]);
                corr[j] = _mm256_fmadd_ps(c, sx, corr[j]);
            }
        }
    }
    // The corrections are the same in all 8 lanes: one lane of them.
    std::array::from_fn(|j| hsum(sum[j]) + unsafe { _mm256_cvtss_f32(corr[j]) })
}

/// Block `b` of weight row `w` into the (sum, correction) accumulators of
/// `R` activation rows from `r0`.
///
/// # Safety
/// As [`row32`]; `b` is one of the row's blocks.
#[inline(always)]
unsafe fn block32<I: Int, B: Block32, const R: usize>(
    w: *const u8,
    t: *const f32,
    a: &Q8,
    r0: usize,
    b: usize,
    acc: &mut [(__m256, __m256); R],
) {
    let nb = a.blocks;
    let (q, d, c) = unsafe { B::unpack::<I>(w.add(b * B::BYTES), t) };
    let signed = B::SIGNED && !I::OFFSET_Q8;
    // |w| times x with w's sign: the same products, unsigned first.
    let aq = if signed {
        unsafe { _mm256_sign_epi8(q, q) }
    } else {
        q
    };
    for (r, (sum, corr)) in acc.iter_mut().enumerate() {
        let i = (r0 + r) * nb + b;
        // SAFETY: block i of the activations exists (the caller's rows).
        unsafe {
            let mut x = load(a.qs.as_ptr().add(i * QK));
            if signed {
                x = _mm256_sign_epi8(x, q);
            }
            let p = I::dot(_mm256_setzero_si256(), aq, x);
            let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
            let sums = if B::SUM16 { &a.s16 } else { &a.s };
            let sx = _mm256_broadcast_ss(&*sums.as_ptr().add(i));
            *sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d, dx), *sum);
            *corr = _mm256_fmadd_ps(c, sx, *corr);
        }
    }
}

/// Q4_K: `R` activation rows from `r0` against weight row `w`.
///
/// # Safety
/// As [`row32`], with Q8_K activations.
#[inline(always)]
pub(super) unsafe fn row_q4k<I: Int, const R: usize>(w: *const u8, a: &Q8K, r0: usize) -> [f32; R] {
    let nb = a.blocks;
    let t = f16_table().as_ptr();
    let mut acc = [unsafe { _mm256_setzero_ps() }; R];
    let mut mins = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        unsafe {
            let blk = w.add(b * Kind::Q4K.bytes());
            let (d, dmin) = (f16x8(blk, t), f16x8(blk.add(2), t));
            let (sc, mn) = q4k_scales(&*blk.add(4).cast::<[u8; 12]>());
            // Each min twice: the pair sums of the 16 bsums meet their 32's min.
            let m16: [i16; 16] = std::array::from_fn(|i| i16::from(mn[i / 2]));
            let m16 = _mm256_loadu_si256(m16.as_ptr().cast());
            let mask = _mm256_set1_epi8(15);
            let q: [__m256i; 8] = std::array::from_fn(|h| {
                let raw = _mm256_loadu_si256(blk.add(16 + 32 * (h / 2)).cast());
                let raw = if h % 2 == 0 {
                    raw
                } else {
                    _mm256_srli_epi16::<4>(raw)
                };
                _mm256_and_si256(raw, mask)
            });
            for r in 0..R {
                let i = (r0 + r) * nb + b;
                let x = a.qs.as_ptr().add(i * QK_K);
                let mut isum = _mm256_setzero_si256();
                for (h, &q) in q.iter().enumerate() {
                    let pairs = _mm256_maddubs_epi16(q, load(x.add(32 * h)));
                    isum = I::dot16(isum, pairs, _mm256_set1_epi16(i16::from(sc[h])));
                }
                let bs = _mm256_loadu_si256(a.bsums.as_ptr().add(i * 16).cast());
                let m = _mm256_madd_epi16(bs, m16);
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dx), acc[r]);
                mins[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dx), mins[r]);
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) - hsum(mins[r]))
}

/// Q6_K: `R` activation rows from `r0` against weight row `w`.
///
/// # Safety
/// As [`row_q4k`].
#[inline(always)]
pub(super) unsafe fn row_q6k<I: Int, const R: usize>(w: *const u8, a: &Q8K, r0: usize) -> [f32; R] {
    let nb = a.blocks;
    let t = f16_table().as_ptr();
    let mut acc = [unsafe { _mm256_setzero_ps() }; R];
    for b in 0..nb {
        unsafe {
            let blk = w.add(b * Kind::Q6K.bytes());
            let d = f16x8(blk.add(208), t);
            let sc = blk.add(192).cast::<i8>();
            let m4 = _mm256_set1_epi8(15);
            let m30 = _mm256_set1_epi8(0x30);
            // Values 32t.. of each half h: low 4 bits and high 2 bits joined.
            let q: [__m256i; 8] = std::array::from_fn(|g| {
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
                _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(hi, m30))
            });
            // Two scales per 32 values: one per 16, eight 16-bit lanes each.
            let s: [__m256i; 8] = std::array::from_fn(|g| {
                let (lo, hi) = (i16::from(*sc.add(2 * g)), i16::from(*sc.add(2 * g + 1)));
                _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
            });
            let s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(sc.cast()));
            for (r, acc) in acc.iter_mut().enumerate() {
                let i = (r0 + r) * nb + b;
                let x = a.qs.as_ptr().add(i * QK_K);
                let mut isum = _mm256_setzero_si256();
                for (g, (&q, &s)) in q.iter().zip(&s).enumerate() {
                    let pairs = _mm256_maddubs_epi16(q, load(x.add(32 * g)));
                    isum = I::dot16(isum, pairs, s);
                }
                // The values were stored + 32: take back 32 x scale x sum per 16.
                let bs = _mm256_loadu_si256(a.bsums.as_ptr().add(i * 16).cast());
                let off = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bs, s16));
                let isum = _mm256_sub_epi32(isum, off);
                let dx = _mm256_broadcast_ss(&*a.d.as_ptr().add(i));
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, dx), *acc);
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}
