//! A decode step's attention (one query row per head) split over the keys,
//! as flash-decoding does (Tri Dao et al., "Flash-Decoding for long-context
//! inference", 2023): a unit is one key/value head's chunk of keys for every
//! query head that reads it, and leaves per head its scores' max, the sum of
//! their exponentials and the weighted sum of the chunk's value rows; the
//! units are then merged per head, each part scaled by e^(its max - the
//! overall max) (on one thread after; where a group's keys are one chunk,
//! by its unit, which writes its heads' rows itself).
//!
//! Why: one head per unit (the form this replaced) read each key/value head
//! once per query head it serves (3 times on SmolLM2) and had 9 units of a
//! layer for 2 threads (5 on one, 4 on the other); the units here read each
//! key and value row once from past the core's caches (the group's other
//! heads take it from L1) and are many and even at long contexts. With the
//! AVX-512 kernel of [`super::x86`] SmolLM2's 30 layers of attention at
//! 2,048 keys (a probe of the op alone, random caches) went from 5.6 to 2.9
//! ms a token on the 2-core Xeon VM, and the model's tg at depth 2048 from
//! 87-88 to 104-115 tok/s. Inside the model the step is then memory's: the
//! attention's 94 MB of keys and values and the weights' 92 MB each read at
//! about 21 GB/s (the spans of `clock::spans`), where the ladder reads 44
//! GB/s at that footprint and 34 past the caches.
//! Each thread asks the cache for the start of the next unit of its range
//! before it works on the current one ([`WARM`] bytes of its keys and of
//! its values, [`super::super::ahead::first`]): inside SmolLM2's batch steps
//! (`scaling`, f16 cache, three interleaved runs of both builds on the
//! f6m207 Xeon VM) attention went from 2.52-2.67 to 2.17-2.20 ms a step at
//! 16 sequences and from 9.75-10.9 to 8.46-8.62 ms at 64, where each unit
//! is 80 keys whose start the streamer cannot guess (the f32 cache at 16
//! sequences: lower in 3 of 3 pairs, 3.26-4.05 to 2.75-2.96 ms, a noisy
//! hour). A range's first unit is not asked for ahead: where a range
//! starts is the pool's cursor's to say.
//! Computed in f32 for f32, f16 and bf16 (widened on load, rounded once).

use candle_core::CpuStorage;

use super::super::ahead;
use super::super::cpu::{output, simd_kernel, Elem, BLOCK};
use super::super::exp::exp;
use super::super::rows::{share, Out, Threads};
use super::super::softmax::lanes_max;
use super::{write_row, Attend, Kv};

/// Keys a unit takes at least (fewer pay more in merging than they share)
/// and at most (a chunk's keys and values, 2 x 256 x d f32s, stay in L2).
const MIN_KEYS: usize = 64;
const MAX_KEYS: usize = 256;
/// Units wanted per thread, so that threads coming free take the rest.
const PER_THREAD: usize = 4;
/// Bytes of the next unit's keys, and of its values, asked for before the
/// current unit: a stream's start, the same 4 KiB the suite's streams ask
/// ahead ([`super::super::ahead::AHEAD`]). Measured on the op alone at 64
/// sequences of 80 keys (f16 cache, 30 layers, three interleaved rounds on
/// the f6m207 Xeon VM): none 6.7-8.0 ms, 2 KiB 5.7-7.6, 4 KiB 5.6-5.9,
/// 16 KiB 6.3-7.3.
const WARM: usize = 4096;

/// Keys per unit for `n` keys over `groups` key/value heads (all batches):
/// enough units for [`PER_THREAD`] each of `threads`, within
/// [`MIN_KEYS`]..=[`MAX_KEYS`], a multiple of 16 (the scores' blocks).
pub(super) fn chunk_keys(n: usize, groups: usize, threads: usize) -> usize {
    let chunks = (PER_THREAD * threads).div_ceil(groups.max(1)).max(1);
    n.div_ceil(chunks)
        .next_multiple_of(16)
        .clamp(MIN_KEYS, MAX_KEYS)
}

/// A step's queries, then its keys and values with where each key/value
/// head's rows start in them ([`Attend::starts`]).
type Inputs<'a, E, K> = (&'a [E], &'a [K], &'a [usize], &'a [K], &'a [usize]);

/// One head's part of one chunk: its scores' max, the sum of e^(score -
/// max), then the d weighted sums of the value rows.
const HEAD: usize = 2;

impl Attend {
    /// `softmax(q K^T / sqrt(d)) V` for one query row per head (t = 1)
    /// against every key.
    pub(super) fn decode<E: Elem, K: Kv>(
        &self,
        q: &[E],
        k: &[K],
        ks: &[usize],
        v: &[K],
        vs: &[usize],
    ) -> CpuStorage {
        let (n, d) = (self.n, self.d);
        let threads = candle_core::utils::barrier_pool().n_workers() + 1;
        let len = chunk_keys(n, ks.len(), threads);
        let chunks = n.div_ceil(len);
        let stride = HEAD + d;
        let rows = self.b * self.heads * d;
        if chunks == 1 {
            // One chunk a group (short contexts; a batch's many groups):
            // a unit's parts are its heads' whole answers, written where
            // they go by the unit, with no merge after on one thread (16
            // sequences at 80 keys, SmolLM2's heads, f16 cache: 44 to 41 us
            // a layer, medians of three interleaved pairs of builds on a
            // 2-core AMD EPYC VM; one sequence within noise).
            return output::<E>(rows, |dst| {
                let out = Out::new(dst);
                self.units((q, k, ks, v, vs), len, 1, |h, _, part| {
                    let mut acc = [0f32; BLOCK];
                    merge(part, stride, &mut acc[..d]);
                    // SAFETY: head h is written by its group's unit alone
                    // (`share` hands out each unit once).
                    unsafe { write_row(&out, h * d, &acc[..d]) };
                });
            });
        }
        let total = self.b * self.heads * chunks * stride;
        let mut parts = Vec::<f32>::with_capacity(total);
        {
            let out = Out::new(&mut parts.spare_capacity_mut()[..total]);
            self.units((q, k, ks, v, vs), len, chunks, |h, c, part| {
                // SAFETY: (head h, chunk c) is written by one unit alone
                // (`share` hands out each unit once).
                unsafe { out.write_all((h * chunks + c) * stride, part) };
            });
        }
        // SAFETY: the units wrote every (head, chunk)'s part: each group's
        // `per` heads for each of its chunks, every group and chunk a unit.
        unsafe { parts.set_len(total) };
        output::<E>(rows, |dst| {
            let out = Out::new(dst);
            let mut acc = [0f32; BLOCK];
            for (bh, parts) in parts.chunks_exact(chunks * stride).enumerate() {
                merge(parts, stride, &mut acc[..d]);
                // SAFETY: one thread writes every row here.
                unsafe { write_row(&out, bh * d, &acc[..d]) };
            }
        })
    }

    /// Every unit (a key/value head's chunk of `len` keys, `chunks` a
    /// head) on the pool: its group's parts, each handed to `sink(query
    /// head, chunk, part)` ([`HEAD`] + d floats).
    fn units<E: Elem, K: Kv>(
        &self,
        (q, k, ks, v, vs): Inputs<'_, E, K>,
        len: usize,
        chunks: usize,
        sink: impl Fn(usize, usize, &[f32]) + Sync,
    ) {
        let (n, d) = (self.n, self.d);
        let per = self.heads / self.kv_heads;
        let stride = HEAD + d;
        let scale = 1.0 / (d as f32).sqrt();
        let units = ks.len() * chunks;
        // Unit u's key/value head, chunk, keys and values.
        let unit = |u: usize| {
            let (gi, c) = (u / chunks, u % chunks);
            let (first, m) = (c * len, len.min(n - c * len));
            let keys = &k[ks[gi] + first * d..][..m * d];
            (gi, c, keys, &v[vs[gi] + first * d..][..m * d])
        };
        share(units, 2 * len.min(n) * d * per, Threads::Pool, |range| {
            let mut scores = vec![0f32; per * len];
            let mut part = vec![0f32; per * stride];
            let end = range.end;
            for u in range {
                // The next unit's keys and values start somewhere else: the
                // hardware's streamer cannot guess where, and a batch's
                // units are short (80 keys: 10 KiB of an f16 cache).
                if u + 1 < end {
                    let (_, _, keys, values) = unit(u + 1);
                    ahead::first(keys, WARM);
                    ahead::first(values, WARM);
                }
                let (gi, c, keys, values) = unit(u);
                let m = keys.len() / d;
                // Key/value head gi (batch gi / kv_heads) serves `per`
                // consecutive query heads.
                let (bi, g) = (gi / self.kv_heads, gi % self.kv_heads);
                let h0 = bi * self.heads + g * per;
                let qs = &q[h0 * d..(h0 + per) * d];
                group(
                    qs,
                    (keys, values),
                    d,
                    scale,
                    &mut scores[..per * m],
                    &mut part,
                );
                for (i, part) in part.chunks_exact(stride).enumerate() {
                    sink(h0 + i, c, part);
                }
            }
        });
    }
}

/// A group's query heads (`qs`, d each) over a chunk of keys and values
/// (rows of d) into `parts` ([`HEAD`] + d a head): each
/// head's scores' max, their exponentials' sum, the weighted sum of the
/// value rows; `scores` is scratch (the chunk's length a head).
fn group<E: Elem, K: Kv>(
    qs: &[E],
    (keys, values): (&[K], &[K]),
    d: usize,
    scale: f32,
    scores: &mut [f32],
    parts: &mut [f32],
) {
    let m = keys.len() / d;
    #[cfg(target_arch = "x86_64")]
    let fast = super::x86::group::<E, K>(d);
    #[cfg(not(target_arch = "x86_64"))]
    let fast: Option<((), (), ())> = None;
    match fast {
        // SAFETY: `x86::group` returns kernels only where this CPU runs them
        // and E is f32 with a head_dim they take; the slices are as they say.
        #[cfg(target_arch = "x86_64")]
        Some((dots, _, _)) => unsafe { dots(as_f32(qs), keys, scale, scores) },
        _ => {
            let mut qb = [0f32; BLOCK];
            for (q, s) in qs.chunks_exact(d).zip(scores.chunks_exact_mut(m)) {
                dots(E::widen(q, &mut qb), keys, scale, s);
            }
        }
    }
    for (s, part) in scores
        .chunks_exact_mut(m)
        .zip(parts.chunks_exact_mut(HEAD + d))
    {
        let (max, sum) = match fast {
            // SAFETY: as the scores' above.
            #[cfg(target_arch = "x86_64")]
            Some((_, softmax, _)) => unsafe { softmax(s) },
            _ => softmax_parts(s),
        };
        part[..HEAD].copy_from_slice(&[max, sum]);
        part[HEAD..].fill(0.0);
    }
    match fast {
        // SAFETY: as the scores' above.
        #[cfg(target_arch = "x86_64")]
        Some((_, _, weigh)) => unsafe { weigh(values, scores, parts) },
        _ => {
            for (s, part) in scores.chunks_exact(m).zip(parts.chunks_exact_mut(HEAD + d)) {
                weigh(values, s, &mut part[HEAD..]);
            }
        }
    }
}

/// `x` as f32s.
///
/// # Safety
/// E is f32.
#[cfg(target_arch = "x86_64")]
unsafe fn as_f32<E: Elem>(x: &[E]) -> &[f32] {
    // SAFETY: E is f32 (the caller's), so the slice is f32s as it lies.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) }
}

/// The weighted values of one head over every chunk, from its parts
/// (`stride` apart): sum over c of e^(max_c - max) x acc_c, over the sum
/// of e^(max_c - max) x sum_c.
fn merge(parts: &[f32], stride: usize, acc: &mut [f32]) {
    let max = parts
        .chunks_exact(stride)
        .fold(f32::NEG_INFINITY, |m, p| m.max(p[0]));
    acc.fill(0.0);
    let mut total = 0.0;
    for p in parts.chunks_exact(stride) {
        let w = exp(p[0] - max);
        total += w * p[1];
        for (a, &x) in acc.iter_mut().zip(&p[HEAD..]) {
            *a += w * x;
        }
    }
    let inv = 1.0 / total;
    for a in acc.iter_mut() {
        *a *= inv;
    }
}

simd_kernel! {
    /// `scores` (each key's) overwritten by e^(score - max): returns (max,
    /// the exponentials' sum).
    fn softmax_parts_into<E: Elem>(scores: &mut [f32], out: &mut [f32; 2]) {
        // In lanes: a fold of `f32::max` is one scalar chain, which held a
        // third of a 64-key chunk's time.
        let max = lanes_max(scores);
        for s in scores.iter_mut() {
            *s = exp(*s - max);
        }
        *out = [max, sum(scores)];
    }
}

/// [`softmax_parts_into`] as a value.
fn softmax_parts(scores: &mut [f32]) -> (f32, f32) {
    let mut out = [0.0; 2];
    softmax_parts_into::<f32>(scores, &mut out);
    (out[0], out[1])
}

simd_kernel! {
    /// One head's scores: q . k_j x scale for every key row k_j of `keys`
    /// (q.len() apart), into `scores`.
    fn dots<E: Elem>(q: &[f32], keys: &[E], scale: f32, scores: &mut [f32]) {
        let d = q.len();
        let mut rb = [0f32; BLOCK];
        for (s, key) in scores.iter_mut().zip(keys.chunks_exact(d)) {
            *s = dot(q, E::widen(key, &mut rb)) * scale;
        }
    }
}

simd_kernel! {
    /// `acc` += the value rows v_j of `values` (acc.len() apart) weighted
    /// by `p`.
    fn weigh<E: Elem>(values: &[E], p: &[f32], acc: &mut [f32]) {
        let d = acc.len();
        let mut rb = [0f32; BLOCK];
        for (&p, value) in p.iter().zip(values.chunks_exact(d)) {
            for (a, &v) in acc.iter_mut().zip(E::widen(value, &mut rb)) {
                *a += p * v;
            }
        }
    }
}

/// f32 lanes of the dot products' accumulators.
const LANES: usize = 16;

/// `a . b` in [`LANES`] lanes.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (a, b) in ac.zip(bc) {
        for ((l, &a), &b) in lanes.iter_mut().zip(a).zip(b) {
            *l += a * b;
        }
    }
    let tail: f32 = ar.iter().zip(br).map(|(a, b)| a * b).sum();
    across(lanes) + tail
}

/// The sum of `x` in [`LANES`] lanes.
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += v;
        }
    }
    across(lanes) + tail
}

/// The lanes' sum as a tree (halves added, then quarters...): a few vector
/// adds, where `iter().sum()` is sixteen dependent scalar adds.
#[inline(always)]
fn across(l: [f32; LANES]) -> f32 {
    let mut h = [0f32; LANES / 2];
    for (i, h) in h.iter_mut().enumerate() {
        *h = l[i] + l[i + LANES / 2];
    }
    let mut q = [0f32; LANES / 4];
    for (i, q) in q.iter_mut().enumerate() {
        *q = h[i] + h[i + LANES / 4];
    }
    (q[0] + q[2]) + (q[1] + q[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_whole_score_blocks_within_their_bounds_and_enough_for_the_threads() {
        // SmolLM2 (3 kv heads) at 2,048 keys on 2 threads: 8 units wanted,
        // 3 chunks of 688 keys capped at 256 -> 8 chunks, 24 units.
        assert_eq!(chunk_keys(2048, 3, 2), 256);
        assert_eq!(chunk_keys(2048, 3, 16), 96);
        assert_eq!(chunk_keys(10, 3, 2), MIN_KEYS);
        assert_eq!(chunk_keys(1 << 20, 1, 1), MAX_KEYS);
        for (n, g, t) in [(1, 1, 1), (700, 3, 2), (4097, 8, 16), (33, 64, 2)] {
            let c = chunk_keys(n, g, t);
            assert!(
                c.is_multiple_of(16) && (MIN_KEYS..=MAX_KEYS).contains(&c),
                "{n} {g} {t}: {c}"
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_softmax_parts_are_the_portable_ones() {
        let Some((_, fast, _)) = super::super::x86::group::<f32, f32>(64) else {
            return;
        };
        // Whole blocks of sixteen and tails; a NaN score (passed over by the
        // max, NaN in the sum) and -inf scores (exponentials of 0).
        for n in [1, 5, 16, 17, 31, 64, 72, 257] {
            for edge in [None, Some(f32::NAN), Some(f32::NEG_INFINITY)] {
                let mut s: Vec<f32> = (0..n).map(|j| ((j * 7 % 11) as f32 - 5.0) * 0.9).collect();
                if let Some(e) = edge {
                    s[n / 2] = e;
                }
                let (mut a, mut b) = (s.clone(), s.clone());
                let (max, sum) = softmax_parts(&mut a);
                // SAFETY: `group` gave the kernels: this CPU runs them.
                let (fmax, fsum) = unsafe { fast(&mut b) };
                assert_eq!(max, fmax, "{n} {edge:?}");
                assert_eq!(sum.is_nan(), fsum.is_nan(), "{n} {edge:?}");
                if !sum.is_nan() {
                    assert!(
                        (sum - fsum).abs() <= 1e-6 * sum,
                        "{n} {edge:?}: {sum} {fsum}"
                    );
                }
                for (j, (x, y)) in a.iter().zip(&b).enumerate() {
                    let same = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 3e-7 * x;
                    assert!(same, "{n} {edge:?} [{j}]: {x} {y}");
                }
            }
        }
    }

    #[test]
    fn merged_parts_equal_one_softmax_over_every_key() {
        // Scores and values of 40 keys, d = 3, cut in parts of 16, 16 and 8.
        let d = 3;
        let s: Vec<f32> = (0..40).map(|j| ((j * 7 % 11) as f32 - 5.0) * 0.7).collect();
        let v: Vec<f32> = (0..40 * d)
            .map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.3)
            .collect();
        let mut parts = Vec::new();
        for (sc, vc) in s.chunks(16).zip(v.chunks(16 * d)) {
            let mut p = sc.to_vec();
            let (max, sum) = softmax_parts(&mut p);
            let mut acc = vec![0f32; d];
            weigh::<f32>(vc, &p, &mut acc);
            parts.extend([max, sum]);
            parts.extend(acc);
        }
        let mut got = vec![0f32; d];
        merge(&parts, HEAD + d, &mut got);
        let max = s
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, |m, x| m.max(f64::from(x)));
        let e: Vec<f64> = s.iter().map(|&x| (f64::from(x) - max).exp()).collect();
        let total: f64 = e.iter().sum();
        for i in 0..d {
            let want: f64 = (0..40).map(|j| e[j] * f64::from(v[j * d + i])).sum::<f64>() / total;
            assert!(
                (f64::from(got[i]) - want).abs() < 1e-5,
                "[{i}] {} vs {want}",
                got[i]
            );
        }
    }
}
