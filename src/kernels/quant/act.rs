//! The activations quantized once per row, before any weight is read, as ggml
//! and Candle quantize them (`quantize_row_q8_0`, `_q8_1`, `_q8_K`): so that
//! each weight block meets 8-bit integers and the dot product is integer
//! multiply-adds, with one float multiply per block.
//!
//! - [`Q8`], for the 32-value weight blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1):
//!   per block of 32, `d = max|x| / 127` (kept as the f16 ggml stores, so
//!   the sums equal Candle's), `q = round(x / d)`, and `s = d * sum(q)`
//!   (Q8_1's sum: what a block's offset, Q4_1's minimum or Q4_0's 8,
//!   multiplies), also kept rounded as Q8_1 stores it (f16), for Q4_1 and
//!   Q5_1: ggml and Candle multiply their minimum by that, and with it the
//!   lab's Q4_1 products are theirs (measured on a tiny model: logits equal
//!   to 5e-7, where the exact sum moved them by 1% of their scale, a tenth
//!   of what Q4_1 itself costs).
//! - [`Q8K`], for the 256-value k-quant blocks (Q2_K to Q6_K): one scale per
//!   256, `q = round(-127 x / max)` where `max` is the value of largest
//!   magnitude (Candle's `BlockQ8K::from_float`), and the sums of each 16 `q`
//!   (the k-quants' minima and offsets multiply them).
//!
//! The rows are laid out one after another; block `b` of row `r` is at
//! `r * blocks + b`.

use half::{f16, slice::HalfFloatSliceExt};

/// Values per Q8 block.
pub(super) const QK: usize = 32;
/// Values per Q8_K block.
pub(super) const QK_K: usize = 256;

/// Rows quantized to 32-value blocks.
pub(super) struct Q8 {
    /// The quantized values, row after row.
    pub qs: Vec<i8>,
    /// Each block's scale.
    pub d: Vec<f32>,
    /// Each block's scale times the sum of its values.
    pub s: Vec<f32>,
    /// The same as Q8_1 holds it: `f16(f16(sum) * d)`, Candle's rounding.
    pub s16: Vec<f32>,
    /// Blocks per row.
    pub blocks: usize,
}

/// Rows quantized to 256-value blocks.
pub(super) struct Q8K {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    /// The sums of each 16 values, 16 per block.
    pub bsums: Vec<i16>,
    pub blocks: usize,
}

/// `x` (rows of `k`, a multiple of 32) in Q8 blocks: in AVX-512 or AVX2
/// where the CPU has them ([`x86`]), else in portable code; the same bits
/// either way for finite activations (a test holds them equal). A NaN or an
/// infinity makes a block meaningless on every path, in different ways (the
/// portable maximum skips NaN and the vector ones do not; AVX2's packing
/// saturates what AVX-512's narrowing truncates).
pub(super) fn q8(x: &[f32], k: usize) -> Q8 {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx512() {
        // SAFETY: the CPU has AVX512F and AVX512BW (checked above).
        return unsafe { x86::q8_512(x, k) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { x86::q8(x, k) };
    }
    q8_portable(x, k)
}

fn q8_portable(x: &[f32], k: usize) -> Q8 {
    q8_with(x, k, |x, q, ds| blocks(x, q, ds, block_portable))
}

/// [`q8`] with `part` quantizing the blocks ([`blocks`], each path's loop
/// compiled for its instructions), then the blocks' numbers rounded to f16
/// as ggml stores them ([`finish`]). On the calling thread: shared across
/// Candle's pool, 16 rows of 576 took longer (4.4 us against 3.4 in the same
/// run, best of 3000) and of 1536 hardly less (8.3 against 8.8), on the
/// 2-core Xeon measured.
fn q8_with(
    x: &[f32],
    k: usize,
    part: impl FnOnce(&[f32], &mut [i8], (&mut [f32], &mut [f32])),
) -> Q8 {
    let blocks = k / QK;
    let n = x.len() / QK;
    let mut out = Q8 {
        qs: vec![0; n * QK],
        d: vec![0.0; n],
        s: vec![0.0; n],
        s16: vec![0.0; n],
        blocks,
    };
    part(x, &mut out.qs, (&mut out.d, &mut out.s));
    finish(&mut out.d, &mut out.s, &mut out.s16);
    out
}

/// Quantizes the blocks of `x` into `qs`, each block's scale into `d` and
/// its sum (as f32: |sum| <= 32 x 127, exact) into `s`, with `block`.
#[inline(always)]
fn blocks(
    x: &[f32],
    qs: &mut [i8],
    (d, s): (&mut [f32], &mut [f32]),
    block: impl Fn(&[f32], &mut [i8]) -> (f32, i32),
) {
    let runs = x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK));
    for (((x, q), d), s) in runs.zip(d.iter_mut()).zip(s.iter_mut()) {
        let (scale, sum) = block(x, q);
        (*d, *s) = (scale, sum as f32);
    }
}

/// From each block's scale (in `d`) and sum (in `s`): `d` = f16(scale),
/// `s` = d x sum, `s16` = f16(f16(sum) x d), the blocks' numbers as Candle
/// rounds them. The f16 roundings go over every block's numbers in slices
/// of 64 (`half`'s, F16C's conversions where the CPU has them): one block
/// at a time, they were three dependent round trips through an f16 register
/// a block, most of the quantization's time (16 rows of 576 in 5.1 us, on
/// the Xeon measured).
fn finish(d: &mut [f32], s: &mut [f32], s16: &mut [f32]) {
    let mut tmp = [f16::ZERO; 64];
    let mut round16 = |v: &mut [f32]| {
        for v in v.chunks_mut(64) {
            let t = &mut tmp[..v.len()];
            t.convert_from_f32_slice(v);
            t.convert_to_f32_slice(v);
        }
    };
    round16(d);
    s16.copy_from_slice(s);
    round16(s16);
    for ((s, s16), &d) in s.iter_mut().zip(s16.iter_mut()).zip(d.iter()) {
        *s *= d;
        *s16 *= d;
    }
    round16(s16);
}

/// One block: `scale = max|x| / 127`, `q = round(x / scale)` (halves away
/// from zero), and the sum of `q`.
fn block_portable(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let scale = amax / 127.0;
    let inv = if scale != 0.0 { 1.0 / scale } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in q.iter_mut().zip(x) {
        // |v * inv| <= 127: the cast cannot saturate.
        *q = round_away(v * inv) as i8;
        sum += i32::from(*q);
    }
    (scale, sum)
}

/// [`block_portable`]'s and [`block_k_portable`]'s operations on a block at
/// once. Compiled for the baseline, the portable loop ran about 2.7 ns a
/// value here (a maximum that does not vectorize, a rounding per lane): 20
/// us of a 16-token chunk's 576-wide activations, a third of its 576 x 576
/// product, on the calling thread while the pool's other threads waited.
#[cfg(target_arch = "x86_64")]
mod x86;

/// `x` rounded to the nearest integer, halves away from zero: `f32::round`,
/// exactly, for |x| < 2^23 (the activations' steps are at most 128), in
/// operations the baseline build vectorizes (truncate, subtract, compare).
/// `f32::round` is a call to libm's `roundf` per value where the build has
/// no SSE4.1: a few microseconds of a decode step's small products.
#[inline(always)]
fn round_away(x: f32) -> i32 {
    let t = x as i32;
    let frac = x - t as f32;
    t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)
}

/// `x` (rows of `k`, a multiple of 256) in Q8_K blocks: in AVX-512 or AVX2
/// where the CPU has them ([`x86`]), else in portable code; the same bits
/// either way for finite activations (a test holds them equal). Built for
/// the baseline, the portable loop took 1.5 ns a value on the Xeon
/// measured (2.4 us of a 1536-wide row, a sixth of SmolLM2's Q2_K down
/// product on one thread).
pub(super) fn q8k(x: &[f32], k: usize) -> Q8K {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx512() {
        // SAFETY: the CPU has AVX512F and AVX512BW (checked above).
        return unsafe { x86::q8k_512(x, k) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { x86::q8k(x, k) };
    }
    q8k_portable(x, k)
}

fn q8k_portable(x: &[f32], k: usize) -> Q8K {
    q8k_with(x, k, |x, out| blocks_k(x, out, block_k_portable))
}

/// [`q8k`] with `part` quantizing the blocks ([`blocks_k`], each path's
/// loop compiled for its instructions).
fn q8k_with(x: &[f32], k: usize, part: impl FnOnce(&[f32], &mut Q8K)) -> Q8K {
    let n = x.len() / QK_K;
    let mut out = Q8K {
        qs: vec![0; n * QK_K],
        d: vec![0.0; n],
        bsums: vec![0; n * 16],
        blocks: k / QK_K,
    };
    part(x, &mut out);
    out
}

/// Quantizes the 256-value blocks of `x` into `out` with `block` (which
/// writes a block's values and sums of 16 and gives back its scale).
#[inline(always)]
fn blocks_k(x: &[f32], out: &mut Q8K, block: impl Fn(&[f32], &mut [i8], &mut [i16]) -> f32) {
    let qs = out.qs.chunks_exact_mut(QK_K);
    let bsums = out.bsums.chunks_exact_mut(16);
    for (((x, q), d), bs) in x.chunks_exact(QK_K).zip(qs).zip(&mut out.d).zip(bsums) {
        *d = block(x, q, bs);
    }
}

/// One Q8_K block as Candle's `BlockQ8K::from_float`: `max` the value of
/// largest magnitude (the first of equals), `q = round(-127 x / max)`, the
/// sums of each 16 `q`, and the scale `1 / (-127 / max)`; an all-zero block
/// leaves `q` and the sums as they are (zero) and its scale 0.
fn block_k_portable(x: &[f32], q: &mut [i8], bs: &mut [i16]) -> f32 {
    // The magnitude in a pass that vectorizes, then its value.
    let amax = x.iter().fold(0f32, |m, &v| m.max(v.abs()));
    let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0);
    if max == 0.0 {
        return 0.0;
    }
    let inv = -127.0 / max;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = round_away(inv * v).clamp(-128, 127) as i8;
    }
    for (b, q) in bs.iter_mut().zip(q.chunks_exact(16)) {
        *b = q.iter().map(|&v| i16::from(v)).sum();
    }
    1.0 / inv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_away_is_f32_round() {
        let mut cases: Vec<f32> = (-2600..=2600).map(|i| i as f32 * 0.05).collect();
        cases.extend([
            0.5,
            -0.5,
            1.5,
            -1.5,
            126.5,
            -127.5,
            0.49999997,
            -0.49999997,
            127.0,
        ]);
        cases.extend([
            f32::MIN_POSITIVE,
            -0.0,
            2.5000002,
            8_388_607.5,
            -8_388_607.5,
        ]);
        for x in cases {
            assert_eq!(round_away(x), x.round() as i32, "{x}");
        }
    }

    #[test]
    fn q8_blocks_round_trip_within_half_a_step() {
        let x: Vec<f32> = (0..96)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        let a = q8(&x, 96);
        assert_eq!((a.blocks, a.d.len()), (3, 3));
        for (b, xb) in x.chunks(QK).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let mut sum = 0i32;
            for (i, &v) in xb.iter().enumerate() {
                let q = a.qs[b * QK + i];
                sum += i32::from(q);
                // Within half a step of the f32 scale, plus f16's rounding of it.
                let err = (f32::from(q) * a.d[b] - v).abs();
                assert!(
                    err <= amax / 254.0 * 1.01 + 127.0 * amax / 127.0 / 1024.0,
                    "{err}"
                );
            }
            assert!((a.s[b] - a.d[b] * sum as f32).abs() <= 1e-6);
        }
        let zeros = q8(&[0.0; 32], 32);
        assert!(zeros.qs.iter().all(|&q| q == 0) && zeros.d == [0.0] && zeros.s == [0.0]);
    }

    #[test]
    fn q8_is_the_same_bits_on_every_path() {
        // Halves, near-halves, zeros, a zero block, signs, magnitudes.
        let mut x: Vec<f32> = (0..32 * 40)
            .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) * 0.0173)
            .collect();
        x[32..64].fill(0.0);
        for (i, v) in x[64..96].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) * 0.5;
        }
        let b = q8_portable(&x, 160);
        let mut paths = vec![("dispatched", q8(&x, 160))];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if x86::has_avx512() {
                // SAFETY: checked above.
                paths.push(("avx512", unsafe { x86::q8_512(&x, 160) }));
            }
            if has!("avx2") {
                // SAFETY: checked above.
                paths.push(("avx2", unsafe { x86::q8(&x, 160) }));
            }
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (path, a) in paths {
            assert_eq!(a.qs, b.qs, "{path}");
            assert_eq!(bits(&a.d), bits(&b.d), "{path}");
            assert_eq!(bits(&a.s), bits(&b.s), "{path}");
            assert_eq!(bits(&a.s16), bits(&b.s16), "{path}");
        }
    }

    #[test]
    fn q8k_is_the_same_bits_on_every_path() {
        // Halves, near-halves, a zero block, equal magnitudes of both signs
        // (the first is the one kept), signs, magnitudes.
        let mut x: Vec<f32> = (0..256 * 6)
            .map(|i| (((i * 7919) % 2003) as f32 - 1001.0) * 0.0173)
            .collect();
        x[256..512].fill(0.0);
        for (i, v) in x[512..768].iter_mut().enumerate() {
            *v = (i as f32 - 128.0) * 0.5;
        }
        x[768 + 40] = -30.0;
        x[768 + 90] = 30.0;
        x[1024 + 7] = 0.25;
        x[1024 + 200] = -0.25;
        let b = q8k_portable(&x, 512);
        let mut paths = vec![("dispatched", q8k(&x, 512))];
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_avx512() {
                // SAFETY: checked above.
                paths.push(("avx512", unsafe { x86::q8k_512(&x, 512) }));
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: checked above.
                paths.push(("avx2", unsafe { x86::q8k(&x, 512) }));
            }
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (path, a) in paths {
            assert_eq!(a.qs, b.qs, "{path}");
            assert_eq!(bits(&a.d), bits(&b.d), "{path}");
            assert_eq!(a.bsums, b.bsums, "{path}");
            assert_eq!(a.blocks, 2, "{path}");
        }
    }

    #[test]
    fn q8k_blocks_and_their_sums() {
        let x: Vec<f32> = (0..512)
            .map(|i| ((i * 53 % 97) as f32 - 40.0) * 0.1)
            .collect();
        let a = q8k(&x, 512);
        assert_eq!((a.blocks, a.d.len(), a.bsums.len()), (2, 2, 32));
        for (b, xb) in x.chunks(QK_K).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (i, &v) in xb.iter().enumerate() {
                let err = (f32::from(a.qs[b * QK_K + i]) * a.d[b] - v).abs();
                assert!(err <= amax / 254.0 * 1.0001, "{err}");
            }
            for g in 0..16 {
                let s: i32 = a.qs[b * QK_K + g * 16..][..16]
                    .iter()
                    .map(|&q| i32::from(q))
                    .sum();
                assert_eq!(i32::from(a.bsums[b * 16 + g]), s);
            }
        }
    }
}
