//! A decode chunk's group of heads in AVX-512 ([`super::decode`]'s inner
//! kernel) for f32 and head_dims of 32 to 256: the query held in
//! registers, sixteen keys' dot products summed across their lanes together
//! in one shuffle tree ([`lane_sums`]: 45 shuffles and adds for sixteen
//! keys, where one `reduce_add` a key is about nine), the weighted value
//! rows summed in registers, up to four keys in flight ([`in_flight`]), a
//! 16-bit cache's value rows widened once for up to four of the group's
//! heads ([`weigh_heads`]), and each head's exponentials sixteen at a time
//! ([`softmax_parts`]).
//! Software prefetch of the next blocks (to L1, or non-temporal) was tried:
//! within noise, and non-temporal 2-3x slower.

use std::arch::x86_64::*;

use super::super::cpu::x86::Lanes16;
use super::super::cpu::Elem;
use super::super::exp::x86::exp16;
use candle_core::DType;

/// A group's scores over a chunk, (qs, keys, scale, scores); a head's
/// scores turned into their exponentials, (scores) -> (max, sum); and its
/// weighted values, (values, probabilities, parts); see [`dots_avx512`],
/// [`softmax_parts`] and [`weigh_avx512`].
pub(super) type Group<K> = (
    unsafe fn(&[f32], &[K], f32, &mut [f32]),
    unsafe fn(&mut [f32]) -> (f32, f32),
    unsafe fn(&[K], &[f32], &mut [f32]),
);

/// The AVX-512 kernels for head_dim `d` where this CPU has AVX-512F and the
/// queries E are f32, over keys and values of K (f32, or a 16-bit cache's
/// f16 or bf16, widened in registers as they load); else none (the generic
/// path).
pub(super) fn group<E: Elem, K: Lanes16>(d: usize) -> Option<Group<K>> {
    if E::DTYPE != candle_core::DType::F32 || !std::arch::is_x86_feature_detected!("avx512f") {
        return None;
    }
    // The head widths of the models the suite runs and their kin (32:
    // tiny test shapes; 64: SmolLM2, Llama 3.2 1B; 80, 96: Phi; 128: Llama
    // 3 8B, Qwen; 256: Gemma 3); another width takes the generic path.
    match d {
        32 => Some((dots_avx512::<2, K>, softmax_parts, weigh_avx512::<2, K>)),
        64 => Some((dots_avx512::<4, K>, softmax_parts, weigh_avx512::<4, K>)),
        80 => Some((dots_avx512::<5, K>, softmax_parts, weigh_avx512::<5, K>)),
        96 => Some((dots_avx512::<6, K>, softmax_parts, weigh_avx512::<6, K>)),
        128 => Some((dots_avx512::<8, K>, softmax_parts, weigh_avx512::<8, K>)),
        256 => Some((dots_avx512::<16, K>, softmax_parts, weigh_avx512::<16, K>)),
        _ => None,
    }
}

/// Keys a block: the group's heads take each block's rows in turn while
/// they are in L1 (16 rows of 256 f32s are 16 KiB of its 48).
const KEYS: usize = 16;

/// Every query head of a group (`qs`, heads of d = 16 x NV) over a chunk
/// of m key rows: q . k_j x scale into `scores` (m a head). The keys are
/// taken [`KEYS`] rows at a time by every head in turn: each row comes from
/// past the core's caches once, and the group's other heads read it from
/// L1 (a head at a time over the whole chunk read it from L2 for each,
/// which set the pace: ~100 GB/s a core there, 256 bytes a key and head).
///
/// # Safety
/// This CPU has AVX-512F; qs holds whole heads, keys m rows of 16 x NV.
#[target_feature(enable = "avx512f")]
unsafe fn dots_avx512<const NV: usize, K: Lanes16>(
    qs: &[f32],
    keys: &[K],
    scale: f32,
    scores: &mut [f32],
) {
    let d = 16 * NV;
    let heads = qs.len() / d;
    let m = scores.len() / heads;
    assert!(qs.len() == heads * d && keys.len() >= m * d);
    for b in (0..m).step_by(KEYS) {
        let rows = KEYS.min(m - b);
        for (q, s) in qs.chunks_exact(d).zip(scores.chunks_exact_mut(m)) {
            // SAFETY: rows b..b + rows < m of `keys`, d each (asserted).
            unsafe { dots::<NV, K>(q, &keys[b * d..(b + rows) * d], scale, &mut s[b..b + rows]) };
        }
    }
}

/// Every head's weighted value rows: `parts` (a head's 2 + 16 x NV, its
/// sums from 2 on) += the m value rows weighted by the head's `p` (m a
/// head), [`KEYS`] rows at a time: a 16-bit cache's for [`together`] of
/// the group's heads at once ([`weigh_heads`]), an f32 cache's (and d =
/// 256's, and a group's last lone head) one head at a time ([`weigh`]).
///
/// # Safety
/// This CPU has AVX-512F; values holds m rows of 16 x NV, parts a head's.
#[target_feature(enable = "avx512f")]
unsafe fn weigh_avx512<const NV: usize, K: Lanes16>(values: &[K], p: &[f32], parts: &mut [f32]) {
    let (d, stride) = (16 * NV, 2 + 16 * NV);
    let heads = parts.len() / stride;
    let m = p.len() / heads;
    assert!(parts.len() == heads * stride && p.len() == heads * m && values.len() >= m * d);
    let most = match K::DTYPE {
        DType::F32 => 1,
        _ => together(NV),
    };
    for b in (0..m).step_by(KEYS) {
        let rows = KEYS.min(m - b);
        let block = &values[b * d..(b + rows) * d];
        let mut h = 0;
        while h < heads {
            let t = most.min(heads - h);
            let (p, part) = (
                &p[h * m..(h + t) * m],
                &mut parts[h * stride..(h + t) * stride],
            );
            // SAFETY: `block` holds `rows` rows of d; `p` t heads of m
            // scores, rows b..b + rows among them; `part` t heads' parts.
            unsafe {
                match t {
                    1 => weigh::<NV, K>(block, &p[b..b + rows], &mut part[2..]),
                    2 => weigh_heads::<NV, 2, K>(block, (p, m, b), part),
                    3 => weigh_heads::<NV, 3, K>(block, (p, m, b), part),
                    _ => weigh_heads::<NV, 4, K>(block, (p, m, b), part),
                }
            }
            h += t;
        }
    }
}

/// Query heads whose weighted value rows [`weigh_heads`] sums in one pass:
/// their accumulators (NV registers a head) within sixteen of the 32
/// registers, four heads at most: four at d = 32 and 64 (SmolLM2's and
/// Llama 3.2's groups of 3 and 4), three at 80, two at 96 and 128, one at
/// 256.
const fn together(nv: usize) -> usize {
    let fit = 16 / nv;
    if fit > 4 {
        4
    } else if fit == 0 {
        1
    } else {
        fit
    }
}

/// H heads' weighted value rows in one pass over the rows: each row
/// widened once and multiplied into every head's NV accumulators (H x NV
/// independent chains), where one head at a time widened each row once per
/// head (`vcvtph2ps` to 512 bits is two micro-ops on the ports the
/// multiply-adds use, uops.info's tables for Intel's cores since Ice Lake):
/// SmolLM2's f16 cache at 2,048 keys spent as long weighing the values as
/// scoring the keys (`perf`). The op alone, SmolLM2's 30 layers, pairs of
/// runs of both builds interleaved on the f6m207 Xeon VM, medians lower in
/// every pair: f16 at 2,048 keys by 4-18% (7 pairs), 16 sequences at 80
/// keys by 5-15% (4); bf16 there by 8-26% (3), at 2,048 keys within noise.
/// An f32 cache keeps one head at a time ([`weigh`], the rows from L1 for
/// the group's other heads): there this pass measured as fast or up to a
/// tenth slower. `p` holds H heads' scores of m each, this block's rows
/// from `b`; `parts` H heads' parts.
///
/// # Safety
/// This CPU has AVX-512F; `values` holds whole rows of 16 x NV, no more
/// than `m - b`; `p` is H x m; `parts` H x (2 + 16 x NV).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn weigh_heads<const NV: usize, const H: usize, K: Lanes16>(
    values: &[K],
    (p, m, b): (&[f32], usize, usize),
    parts: &mut [f32],
) {
    let (d, stride) = (16 * NV, 2 + 16 * NV);
    let n = values.len() / d;
    assert!(p.len() == H * m && b + n <= m && parts.len() == H * stride);
    let (vp, pp, ap) = (values.as_ptr(), p.as_ptr(), parts.as_mut_ptr());
    let mut a = [[_mm512_setzero_ps(); NV]; H];
    // SAFETY (every load and store): h < H, c < NV: inside parts (a head's
    // sums from 2 on) and p (head h's row b + j < m); j < n: a row of
    // `values` (asserted).
    for (h, a) in a.iter_mut().enumerate() {
        for (c, v) in a.iter_mut().enumerate() {
            *v = unsafe { _mm512_loadu_ps(ap.add(h * stride + 2 + 16 * c)) };
        }
    }
    for j in 0..n {
        let row = unsafe { vp.add(j * d) };
        let mut v = [_mm512_setzero_ps(); NV];
        for (c, v) in v.iter_mut().enumerate() {
            *v = unsafe { K::load16(row.add(16 * c)) };
        }
        for (h, a) in a.iter_mut().enumerate() {
            let pj = _mm512_set1_ps(unsafe { *pp.add(h * m + b + j) });
            for (a, &v) in a.iter_mut().zip(&v) {
                *a = _mm512_fmadd_ps(pj, v, *a);
            }
        }
    }
    for (h, a) in a.iter().enumerate() {
        for (c, &v) in a.iter().enumerate() {
            unsafe { _mm512_storeu_ps(ap.add(h * stride + 2 + 16 * c), v) };
        }
    }
}

// No closures in these kernels (`std::array::from_fn(|c| ...)`, `let f =
// |..| ...`), as in `quant`'s: with them the compiler kept a block's sixteen
// sums and the query in arrays on the stack, thirty 64-byte stores and
// reloads a block, and SmolLM2's decode attention at a batch of 16 ran at
// about 4 cycles a multiply-add.

/// q . k_j x scale for the (up to [`KEYS`]) key rows of `keys` into
/// `scores`: a whole block's sixteen sums across lanes in one
/// [`lane_sums`], a short one's a reduce each.
///
/// # Safety
/// This CPU has AVX-512F; q holds 16 x NV, keys `scores.len()` rows of it.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn dots<const NV: usize, K: Lanes16>(q: &[f32], keys: &[K], scale: f32, scores: &mut [f32]) {
    let (d, n) = (16 * NV, scores.len());
    assert!(q.len() == d && keys.len() == n * d && n <= KEYS);
    let (qp, kp) = (q.as_ptr(), keys.as_ptr());
    // SAFETY (every load): c < NV and j < n: inside q and keys (asserted).
    let mut qv = [_mm512_setzero_ps(); NV];
    for (c, v) in qv.iter_mut().enumerate() {
        *v = unsafe { _mm512_loadu_ps(qp.add(16 * c)) };
    }
    if n == KEYS {
        let mut lanes = [_mm512_setzero_ps(); KEYS];
        for (j, l) in lanes.iter_mut().enumerate() {
            let row = unsafe { kp.add(j * d) };
            let mut a = _mm512_mul_ps(qv[0], unsafe { K::load16(row) });
            for (c, &qc) in qv.iter().enumerate().skip(1) {
                a = _mm512_fmadd_ps(qc, unsafe { K::load16(row.add(16 * c)) }, a);
            }
            *l = a;
        }
        let s = _mm512_mul_ps(lane_sums(&lanes), _mm512_set1_ps(scale));
        // SAFETY: scores holds KEYS = 16 f32s.
        unsafe { _mm512_storeu_ps(scores.as_mut_ptr(), s) };
    } else {
        for (j, s) in scores.iter_mut().enumerate() {
            let row = unsafe { kp.add(j * d) };
            let mut a = _mm512_mul_ps(qv[0], unsafe { K::load16(row) });
            for (c, &qc) in qv.iter().enumerate().skip(1) {
                a = _mm512_fmadd_ps(qc, unsafe { K::load16(row.add(16 * c)) }, a);
            }
            *s = _mm512_reduce_add_ps(a) * scale;
        }
    }
}

/// A head's scores overwritten by e^(score - max), sixteen at a time (the
/// tail masked), with [`exp16`]: returns (max, the exponentials' sum), as
/// the portable `softmax_parts` does (a NaN score is passed over by the
/// max, as `f32::max` passes it over).
///
/// # Safety
/// This CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn softmax_parts(scores: &mut [f32]) -> (f32, f32) {
    let (n, p) = (scores.len(), scores.as_mut_ptr());
    let whole = n - n % 16;
    let tail: __mmask16 = ((1u32 << (n % 16)) - 1) as __mmask16;
    // SAFETY (every load and store): i + 16 <= whole <= n, and the tail's
    // lanes past n are masked off.
    let mut mx = _mm512_set1_ps(f32::NEG_INFINITY);
    for i in (0..whole).step_by(16) {
        // `max(v, mx)` is mx where v is NaN.
        mx = _mm512_max_ps(unsafe { _mm512_loadu_ps(p.add(i)) }, mx);
    }
    if tail != 0 {
        let v = unsafe { _mm512_maskz_loadu_ps(tail, p.add(whole)) };
        mx = _mm512_mask_max_ps(mx, tail, v, mx);
    }
    let max = _mm512_reduce_max_ps(mx);
    let m = _mm512_set1_ps(max);
    let mut sum = _mm512_setzero_ps();
    for i in (0..whole).step_by(16) {
        let e = unsafe { exp16(_mm512_sub_ps(_mm512_loadu_ps(p.add(i)), m)) };
        unsafe { _mm512_storeu_ps(p.add(i), e) };
        sum = _mm512_add_ps(sum, e);
    }
    if tail != 0 {
        let e = unsafe { exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, p.add(whole)), m)) };
        unsafe { _mm512_mask_storeu_ps(p.add(whole), tail, e) };
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    (max, _mm512_reduce_add_ps(sum))
}

/// Value rows in flight in [`weigh`] for a row of NV registers: enough
/// independent chains of multiply-adds (up to 16 accumulators: four rows
/// where a row is one to four registers) to keep both FMA ports busy
/// through their latency.
const fn in_flight(nv: usize) -> usize {
    match nv {
        0..=4 => 4,
        5..=7 => 2,
        _ => 1,
    }
}

/// `acc` += the value rows (16 x NV each) weighted by `p`: each row's NV
/// registers added into NV accumulators, [`in_flight`] rows at a time (as
/// many sets of accumulators), so that the adds are not one chain a key.
///
/// # Safety
/// This CPU has AVX-512F; `values` holds `p.len()` rows, `acc` 16 x NV.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn weigh<const NV: usize, K: Lanes16>(values: &[K], p: &[f32], acc: &mut [f32]) {
    let (d, n) = (16 * NV, p.len());
    assert!(values.len() >= n * d && acc.len() == d);
    let sets = in_flight(NV);
    let (vp, ap) = (values.as_ptr(), acc.as_mut_ptr());
    let mut a = [[_mm512_setzero_ps(); NV]; 4];
    // SAFETY (every load and store): c < NV: inside acc; j < n: a row of
    // `values` (asserted).
    for (c, v) in a[0].iter_mut().enumerate() {
        *v = unsafe { _mm512_loadu_ps(ap.add(16 * c)) };
    }
    let mut j = 0;
    while j + sets <= n {
        for (s, a) in a.iter_mut().enumerate().take(sets) {
            let pj = _mm512_set1_ps(p[j + s]);
            let row = unsafe { vp.add((j + s) * d) };
            for (c, a) in a.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(pj, unsafe { K::load16(row.add(16 * c)) }, *a);
            }
        }
        j += sets;
    }
    for (j, &pj) in p.iter().enumerate().skip(j) {
        let pj = _mm512_set1_ps(pj);
        let row = unsafe { vp.add(j * d) };
        for (c, a) in a[0].iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(pj, unsafe { K::load16(row.add(16 * c)) }, *a);
        }
    }
    for c in 0..NV {
        let mut total = a[0][c];
        for set in a.iter().take(sets).skip(1) {
            total = _mm512_add_ps(total, set[c]);
        }
        unsafe { _mm512_storeu_ps(ap.add(16 * c), total) };
    }
}

/// Lane i of the result = the sum of `v[i]`'s sixteen lanes: pairs of
/// registers folded halves into one (256-bit halves, then 128-bit quarters
/// with `shuffle_f32x4`, then pairs and single lanes within the quarters
/// with `shuffle_ps`), which leaves key 4e + m at lane 4m + e; one permute
/// puts it back.
#[target_feature(enable = "avx512f")]
fn lane_sums(v: &[__m512; 16]) -> __m512 {
    let r: [__m512; 8] = std::array::from_fn(|p| {
        let (a, b) = (v[2 * p], v[2 * p + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xEE>(a, b),
        )
    });
    let s: [__m512; 4] = std::array::from_fn(|q| {
        let (a, b) = (r[2 * q], r[2 * q + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xDD>(a, b),
        )
    });
    let u: [__m512; 2] = std::array::from_fn(|w| {
        let (a, b) = (s[2 * w], s[2 * w + 1]);
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(a, b),
            _mm512_shuffle_ps::<0xEE>(a, b),
        )
    });
    let x = _mm512_add_ps(
        _mm512_shuffle_ps::<0x88>(u[0], u[1]),
        _mm512_shuffle_ps::<0xDD>(u[0], u[1]),
    );
    let back = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(back, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_sums_sums_each_register_into_its_own_lane() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let vals: Vec<[f32; 16]> = (0..16)
            .map(|k| std::array::from_fn(|l| (k * 16 + l) as f32 * 0.5 - k as f32))
            .collect();
        // SAFETY: this CPU has AVX-512F (checked above); each array is 16 f32s.
        let got: [f32; 16] = unsafe {
            let v: [__m512; 16] = std::array::from_fn(|k| _mm512_loadu_ps(vals[k].as_ptr()));
            std::mem::transmute(lane_sums(&v))
        };
        for (k, row) in vals.iter().enumerate() {
            assert_eq!(got[k], row.iter().sum::<f32>(), "key {k}");
        }
    }
}
