//! Attention over a cache: `softmax(q K^T / sqrt(d)) V` for the query rows
//! of a decode step or a prompt chunk against the keys and values a cache
//! holds, causal by position, each head's row in one pass over its key/value
//! head's rows.
//!
//! The idea: at one token the composed form is a handful of tiny products
//! per layer (one `gemm` call per key/value head for the scores, one for the
//! values, each paying the crate's dispatch for a 3 x n x 64 product), a
//! scale and a softmax, each a new tensor: on SmolLM2 (30 layers, 9 heads
//! over 3 key/value heads, head_dim 64) about 90 microseconds a layer, a
//! third of a token on the lab's quantized path (`generate`'s parts, 2-core
//! VM). Here a head is one task: its n scores (one dot product of d per key
//! row, read where the cache holds it), their max, the exponentials and
//! their sum, and the weighted sum of the n value rows into d accumulators,
//! each row read once in order; nothing is allocated but the output and a
//! row of scores. The heads of a query go to Candle's pool when the keys are
//! long enough to pay for a hand-off ([`super::rows::share`]), else the
//! calling thread does them. No mask tensor: a prompt chunk's t rows are the
//! cache's last t positions, and row i sees the keys up to its own position
//! (a decode step's one row sees every key), which is `causal_mask`'s rule;
//! in a prompt chunk of 16 tokens this replaced the composed form's products,
//! mask and softmax for 10-16% more pp on SmolLM2's q4_1 (2-core Xeon VM).
//! A prompt chunk (t > 1) takes its rows a block at a time against the keys
//! transposed ([`prompt`]), where one row at a time paid a sum across lanes
//! per key: SmolLM2's q4_1 pp256 went from 986 to 1294 tok/s (one run of
//! each build, 3 samples), pp64 4-7% (two A B pairs), pp16 within its noise.
//! Computed in f32 for f32, f16 and bf16 (widened on load, rounded once).
//! A decode step's f32 heads (d a multiple of 16) run AVX-512 code where
//! the CPU has it ([`fast_scores`]): a key's dot product reduced once in a
//! register, the weighted values summed in registers; SmolLM2's q4_1 tg at
//! depth 2048 went from 70 to 89-93 tok/s (2-core Xeon VM, two runs).
//! On a GPU the composed form runs (the caller's choice): this is CPU code.

mod prompt;

use std::borrow::Cow;

use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};

use super::cpu::{output, simd_kernel, Elem, BLOCK};
use super::exp::exp;
use super::rows::{share, Out, Threads};
use super::{as_is_or_copied, check_dtype, contiguous};

/// f32 lanes of the dot products' accumulators.
const LANES: usize = 16;

/// `softmax(q K^T / sqrt(d)) V` for `q` (batch, heads, t, d) against `keys`
/// and `values` (batch, kv_heads, n, d), t from 1 to n, query head `h`
/// reading key/value head `h / (heads / kv_heads)` (grouped-query attention),
/// query row i (the cache's position n - t + i) the keys up to its own
/// position; returns (batch, heads, t, d), as a view of (batch, t, heads, d)
/// storage: the heads merged back token by token, which the output
/// projection reads, are then `transpose(1, 2)` with no copy (the composed
/// form copies them there). The keys and values may be a view of a larger
/// cache (rows of d apart, heads any distance apart), read in place; any
/// other layout is copied first.
pub fn cached_attention(q: &Tensor, keys: &Tensor, values: &Tensor) -> Result<Tensor> {
    let (b, heads, t, d) = q.dims4()?;
    let (kb, kv_heads, n, kd) = keys.dims4()?;
    if t == 0 || t > n || kb != b || kd != d || values.dims() != keys.dims() {
        bail!(
            "lab attention: t query rows (batch, heads, t, d) against keys and values of \
             (batch, kv_heads, n, d), t from 1 to n, got {:?}, {:?} and {:?}",
            q.dims(),
            keys.dims(),
            values.dims()
        );
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) || d > BLOCK || n == 0 {
        bail!(
            "lab attention: {heads} heads over {kv_heads} key/value heads, head_dim {d} \
             (at most {BLOCK}), {n} keys: needs whole groups, a head_dim that fits, a key"
        );
    }
    if keys.dtype() != q.dtype() || values.dtype() != q.dtype() {
        bail!("lab attention: q, keys and values must be one dtype");
    }
    check_dtype("attention", q.dtype())?;
    if !q.device().is_cpu() {
        bail!("lab attention: CPU code (a GPU runs the composed form)");
    }
    let op = Attend {
        b,
        heads,
        kv_heads,
        t,
        n,
        d,
    };
    let y = contiguous(q)?.apply_op3_no_bwd(&*rows(keys, d)?, &*rows(values, d)?, &op)?;
    y.transpose(1, 2)
}

/// `x` itself when its rows of `d` lie next to each other (a cache's view),
/// else a contiguous copy.
fn rows(x: &Tensor, d: usize) -> Result<Cow<'_, Tensor>> {
    let s = x.stride();
    as_is_or_copied(x, s[3] == 1 && s[2] == d)
}

struct Attend {
    b: usize,
    heads: usize,
    kv_heads: usize,
    /// Query rows: row i is the cache's position n - t + i, and sees the
    /// keys up to it (causal).
    t: usize,
    n: usize,
    d: usize,
}

impl Attend {
    /// Where each key/value head's n rows start in its storage, checked to
    /// lie inside it.
    fn starts(&self, l: &Layout, len: usize) -> Result<Vec<usize>> {
        let s = l.stride();
        let mut starts = Vec::with_capacity(self.b * self.kv_heads);
        for bi in 0..self.b {
            for g in 0..self.kv_heads {
                let at = l.start_offset() + bi * s[0] + g * s[1];
                if at + self.n * self.d > len {
                    bail!("lab attention: a key/value head lies past its storage");
                }
                starts.push(at);
            }
        }
        Ok(starts)
    }

    /// The key/value head (its index in [`Attend::starts`]) that query head
    /// `bh` (batch x heads + head) reads: `heads / kv_heads` consecutive
    /// query heads share one.
    fn kv_head(&self, bh: usize) -> usize {
        let groups = self.heads / self.kv_heads;
        (bh / self.heads) * self.kv_heads + (bh % self.heads) / groups
    }

    fn run<E: Elem>(&self, q: &[E], k: (&[E], &Layout), v: (&[E], &Layout)) -> Result<CpuStorage> {
        let (ks, vs) = (self.starts(k.1, k.0.len())?, self.starts(v.1, v.0.len())?);
        if self.t > 1 {
            return Ok(self.prompt(q, k.0, &ks, v.0, &vs));
        }
        let (n, d) = (self.n, self.d);
        let scale = 1.0 / (d as f32).sqrt();
        // A unit: one query row of one head, (batch, head, row) in q's order,
        // which at one row (t = 1 here) is also the output's (batch, row, head).
        let (t, units) = (self.t, self.b * self.heads * self.t);
        let fast = fast_scores::<E>(d);
        Ok(output::<E>(units * d, |dst| {
            let out = Out::new(dst);
            share(units, 2 * n * d, Threads::Pool, |range| {
                let mut scores = vec![0f32; n];
                let mut acc = [0f32; BLOCK];
                for u in range {
                    let bh = u / t;
                    let g = self.kv_head(bh);
                    // Row u % t sees the keys up to its own position.
                    let seen = n - t + u % t + 1;
                    let keys = &k.0[ks[g]..ks[g] + seen * d];
                    let values = &v.0[vs[g]..vs[g] + seen * d];
                    let q = &q[u * d..(u + 1) * d];
                    let scores = &mut scores[..seen];
                    match fast {
                        // SAFETY: `fast` holds only where this CPU has
                        // AVX-512F and E is f32 (checked once, above).
                        Some((x86, w)) => unsafe {
                            x86(as_f32(q), as_f32(keys), d, scale, scores);
                            w(as_f32(values), d, scores, &mut acc[..d]);
                        },
                        None => {
                            dots(q, keys, d, scale, scores);
                            weigh(values, d, scores, &mut acc[..d]);
                        }
                    }
                    // SAFETY: unit u's d outputs are written by this task
                    // alone (`share` hands out each unit once).
                    unsafe { write_row(&out, u * d, &acc[..d]) };
                }
            });
        }))
    }
}

impl Attend {
    /// A prompt chunk ([`prompt`]): each kv head's keys transposed once,
    /// then a unit is [`prompt::QROWS`] query rows of one head.
    fn prompt<E: Elem>(&self, q: &[E], k: &[E], ks: &[usize], v: &[E], vs: &[usize]) -> CpuStorage {
        let (n, d, t) = (self.n, self.d, self.t);
        let np = prompt::padded(n);
        let (mut kt, mut vf) = (vec![0f32; ks.len() * d * np], vec![0f32; ks.len() * n * d]);
        let heads = kt.chunks_exact_mut(d * np).zip(vf.chunks_exact_mut(n * d));
        for ((kt, vf), (&ka, &va)) in heads.zip(ks.iter().zip(vs)) {
            prompt::widen(&k[ka..ka + n * d], &v[va..va + n * d], d, kt, vf);
        }
        let scale = 1.0 / (d as f32).sqrt();
        let blocks = t.div_ceil(prompt::QROWS);
        // A unit: one block of query rows of one head, in q's order.
        let units = self.b * self.heads * blocks;
        output::<E>(self.b * self.heads * t * d, |dst| {
            let out = Out::new(dst);
            share(units, 2 * n * d * prompt::QROWS, Threads::Pool, |range| {
                let mut p = vec![0f32; prompt::QROWS * np];
                let mut acc = [[0f32; BLOCK]; prompt::QROWS];
                for u in range {
                    let (bh, r0) = (u / blocks, (u % blocks) * prompt::QROWS);
                    let rows = prompt::QROWS.min(t - r0);
                    let g = self.kv_head(bh);
                    // Row r sees the keys up to its own position, n - t + r.
                    let mut seen = [0; prompt::QROWS];
                    for (i, s) in seen[..rows].iter_mut().enumerate() {
                        *s = n - t + r0 + i + 1;
                    }
                    let first = (bh * t + r0) * d;
                    // Output row r0 + r of head h at (batch, r0 + r, h).
                    let (bi, h) = (bh / self.heads, bh % self.heads);
                    let at = |r: usize| ((bi * t + r0 + r) * self.heads + h) * d;
                    prompt::tile(
                        &q[first..first + rows * d],
                        &kt[g * d * np..(g + 1) * d * np],
                        &vf[g * n * d..(g + 1) * n * d],
                        &seen[..rows],
                        scale,
                        &mut p,
                        &mut acc,
                    );
                    for (r, a) in acc[..rows].iter().enumerate() {
                        // SAFETY: unit u's rows are written by this task
                        // alone (`share` hands out each unit once).
                        unsafe { write_row(&out, at(r), &a[..d]) };
                    }
                }
            });
        })
    }
}

/// `a` rounded to `E` into `out` from `at`, one bounds check a row (one a
/// value, with the conversion beside it, held a quarter of `perf`'s samples
/// in a 16-token prompt's attention, the Xeon VM).
///
/// # Safety
/// As [`Out::write_all`]: no other thread touches `at..at + a.len()`.
#[inline(always)]
unsafe fn write_row<E: Elem>(out: &Out<E>, at: usize, a: &[f32]) {
    let mut row = [E::from_f64(0.0); BLOCK];
    for (o, &a) in row.iter_mut().zip(a) {
        *o = E::from_f64(f64::from(a));
    }
    // SAFETY: the caller's.
    unsafe { out.write_all(at, &row[..a.len()]) };
}

simd_kernel! {
    /// One head's scores: q . k_j x scale for every key row k_j of `keys`
    /// (d apart), into `scores`.
    fn dots<E: Elem>(q: &[E], keys: &[E], d: usize, scale: f32, scores: &mut [f32]) {
        let (mut qb, mut rb) = ([0f32; BLOCK], [0f32; BLOCK]);
        let q = E::widen(q, &mut qb);
        for (s, key) in scores.iter_mut().zip(keys.chunks_exact(d)) {
            *s = dot(q, E::widen(key, &mut rb)) * scale;
        }
    }
}

simd_kernel! {
    /// One head's output: `acc` = softmax(`scores`) weighted sum of the
    /// value rows v_j of `values` (d apart); `scores` is overwritten.
    fn weigh<E: Elem>(values: &[E], d: usize, scores: &mut [f32], acc: &mut [f32]) {
        let mut rb = [0f32; BLOCK];
        // The max, the exponentials and their sum each a loop of its own: a
        // sum carried through the exponentials' loop keeps it scalar.
        let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        for s in scores.iter_mut() {
            *s = exp(*s - max);
        }
        let sum = sum(scores);
        acc.fill(0.0);
        for (&p, value) in scores.iter().zip(values.chunks_exact(d)) {
            for (a, &v) in acc.iter_mut().zip(E::widen(value, &mut rb)) {
                *a += p * v;
            }
        }
        let inv = 1.0 / sum;
        for a in acc.iter_mut() {
            *a *= inv;
        }
    }
}

/// A head's scores and its weighted values in AVX-512 (f32, d a multiple
/// of 16).
type Scores = (
    unsafe fn(&[f32], &[f32], usize, f32, &mut [f32]),
    unsafe fn(&[f32], usize, &mut [f32], &mut [f32]),
);

/// The AVX-512 scores where this CPU has AVX-512F, E is f32 and `d` a
/// multiple of 16; else none (the generic [`dots`]). The generic dot
/// product ended each key in sixteen lanes' sum, which LLVM left as 128-bit
/// shuffles: at 2,048 keys of SmolLM2 a decode step's attention held most of
/// the token (perf: the dot's shuffles and multiplies the top lines), and
/// the weighted values kept their accumulators in memory, a load and a
/// store a key.
fn fast_scores<E: Elem>(d: usize) -> Option<Scores> {
    #[cfg(target_arch = "x86_64")]
    if E::DTYPE == candle_core::DType::F32
        && d.is_multiple_of(16)
        && std::arch::is_x86_feature_detected!("avx512f")
    {
        return Some((scores_avx512, weigh_avx512));
    }
    let _ = d;
    None
}

/// `x` as f32s.
///
/// # Safety
/// E must be f32 ([`fast_scores`] checks it before this is called).
unsafe fn as_f32<E: Elem>(x: &[E]) -> &[f32] {
    // SAFETY: E is f32 (the caller's), so the slice is f32s as it lies.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) }
}

/// q . k_j x scale for every key row k_j (d apart, d a multiple of 16):
/// sixteen lanes a step in one register, reduced once a key.
///
/// # Safety
/// This CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn scores_avx512(q: &[f32], keys: &[f32], d: usize, scale: f32, scores: &mut [f32]) {
    use std::arch::x86_64::*;
    for (s, key) in scores.iter_mut().zip(keys.chunks_exact(d)) {
        let mut acc = _mm512_setzero_ps();
        for (q, k) in q.chunks_exact(16).zip(key.chunks_exact(16)) {
            // SAFETY: each chunk is 16 f32s, an unaligned load's width.
            let (qv, kv) = unsafe { (_mm512_loadu_ps(q.as_ptr()), _mm512_loadu_ps(k.as_ptr())) };
            acc = _mm512_fmadd_ps(qv, kv, acc);
        }
        *s = _mm512_reduce_add_ps(acc) * scale;
    }
}

/// [`weigh`] in AVX-512 for f32 and d a multiple of 16: the probabilities,
/// then each 16 columns of the output summed over the value rows in four
/// registers (four keys in flight), stored once.
///
/// # Safety
/// This CPU has AVX-512F; `values` holds `scores.len()` rows of d.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weigh_avx512(values: &[f32], d: usize, scores: &mut [f32], acc: &mut [f32]) {
    use std::arch::x86_64::*;
    let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    for s in scores.iter_mut() {
        *s = exp(*s - max);
    }
    let inv = 1.0 / sum(scores);
    let n = scores.len();
    assert!(values.len() >= n * d && acc.len() == d && d.is_multiple_of(16));
    let v = values.as_ptr();
    for c in (0..d).step_by(16) {
        let mut a = [_mm512_setzero_ps(); 4];
        let mut j = 0;
        // SAFETY (each load): row j < n, columns c..c + 16 <= d, inside
        // `values` (asserted above).
        while j + 4 <= n {
            for (k, a) in a.iter_mut().enumerate() {
                let row = unsafe { _mm512_loadu_ps(v.add((j + k) * d + c)) };
                *a = _mm512_fmadd_ps(_mm512_set1_ps(scores[j + k]), row, *a);
            }
            j += 4;
        }
        while j < n {
            let row = unsafe { _mm512_loadu_ps(v.add(j * d + c)) };
            a[0] = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), row, a[0]);
            j += 1;
        }
        let total = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
        let out = _mm512_mul_ps(total, _mm512_set1_ps(inv));
        // SAFETY: c + 16 <= d = acc.len().
        unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add(c), out) };
    }
}

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
/// adds, where `iter().sum()` is sixteen dependent scalar adds, which a
/// decode step pays once a key: at 2,048 keys of SmolLM2 they held most
/// of a token's attention (tg at depth 2048 ran at 26% of its bound).
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

impl CustomOp3 for Attend {
    fn name(&self) -> &'static str {
        "lab-cached-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (a, z) = super::span("attention", l1)?;
        let out = match (s1, s2, s3) {
            (CpuStorage::F32(q), CpuStorage::F32(k), CpuStorage::F32(v)) => {
                self.run(&q[a..z], (k, l2), (v, l3))?
            }
            (CpuStorage::F16(q), CpuStorage::F16(k), CpuStorage::F16(v)) => {
                self.run(&q[a..z], (k, l2), (v, l3))?
            }
            (CpuStorage::BF16(q), CpuStorage::BF16(k), CpuStorage::BF16(v)) => {
                self.run(&q[a..z], (k, l2), (v, l3))?
            }
            _ => bail!("lab attention: q, keys and values must be one dtype of f32, f16, bf16"),
        };
        Ok((out, Shape::from((self.b, self.t, self.heads, self.d))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    /// The f64 reference of t query rows per head, row i seeing the keys up
    /// to position n - t + i, from contiguous tensors.
    fn reference(q: &Tensor, k: &Tensor, v: &Tensor) -> Vec<f64> {
        let flat = |t: &Tensor| -> Vec<f64> {
            let t = t.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
            t.to_vec1::<f64>().unwrap()
        };
        let (b, heads, t, d) = q.dims4().unwrap();
        let (_, kv_heads, n, _) = k.dims4().unwrap();
        let (q, k, v) = (flat(q), flat(k), flat(v));
        let mut out = Vec::new();
        for bi in 0..b {
            for h in 0..heads {
                let g = bi * kv_heads + h / (heads / kv_heads);
                for r in 0..t {
                    let qh = &q[((bi * heads + h) * t + r) * d..][..d];
                    let row = |m: &[f64], j: usize| m[(g * n + j) * d..][..d].to_vec();
                    let seen = n - t + r + 1;
                    let s: Vec<f64> = (0..seen)
                        .map(|j| {
                            let kr = row(&k, j);
                            let dot: f64 = qh.iter().zip(&kr).map(|(a, b)| a * b).sum();
                            dot / (d as f64).sqrt()
                        })
                        .collect();
                    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    for i in 0..d {
                        let y: f64 = (0..seen).map(|j| e[j] * v[(g * n + j) * d + i]).sum();
                        out.push(y / sum);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn cached_attention_is_the_causal_softmax_weighted_values_on_a_cache_view() {
        let dev = Device::Cpu;
        // SmolLM2's heads at a short and a long cache (the long one shared
        // over the pool), a head_dim that is no multiple of the lanes, a
        // batch of two with one head per key/value head; one query row (a
        // decode step), and t rows: a whole prompt (t = n) and a chunk after
        // what the cache held, in blocks of QROWS rows and a last part block,
        // keys past a whole score block.
        for (b, heads, kv, t, n, d, cap) in [
            (1, 9, 3, 1, 1, 64, 8),
            (1, 9, 3, 1, 37, 64, 40),
            (1, 9, 3, 1, 700, 64, 1024),
            (2, 2, 2, 1, 5, 20, 5),
            (1, 9, 3, 16, 16, 64, 40),
            (1, 9, 3, 7, 37, 64, 40),
            (2, 2, 2, 3, 5, 20, 5),
            (1, 9, 3, 37, 37, 64, 40),
            (2, 2, 2, 5, 19, 20, 24),
        ] {
            for (dtype, tol) in [(DType::F32, 1e-5), (DType::F16, 4e-3), (DType::BF16, 3e-2)] {
                let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev).unwrap();
                let cache = |s| Tensor::randn(0f32, 1.0, (b, kv, cap, d), &dev).unwrap() * s;
                let (kc, vc) = (cache(1.0).unwrap(), cache(1.0).unwrap());
                let [q, kc, vc] = [q, kc, vc].map(|t| t.to_dtype(dtype).unwrap());
                // What the cache hands out: its first n positions, in place.
                let (k, v) = (kc.narrow(2, 0, n).unwrap(), vc.narrow(2, 0, n).unwrap());
                let got = cached_attention(&q, &k, &v).unwrap();
                assert_eq!(got.dims(), q.dims());
                // The heads merged back token by token need no copy.
                assert!(got.transpose(1, 2).unwrap().is_contiguous());
                let got = got.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
                let got = got.to_vec1::<f32>().unwrap();
                let want = reference(&q, &k.contiguous().unwrap(), &v.contiguous().unwrap());
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let err = (f64::from(g) - w).abs();
                    assert!(
                        err <= tol * (1.0 + w.abs()),
                        "{dtype:?} {b}x{heads}x{t}x{n}x{d} [{i}]: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn shapes_it_cannot_take_are_one_error() {
        let dev = Device::Cpu;
        let z = |s: &[usize]| Tensor::zeros(s, DType::F32, &dev).unwrap();
        for (q, k, v) in [
            (z(&[1, 9, 5, 64]), z(&[1, 3, 4, 64]), z(&[1, 3, 4, 64])),
            (z(&[1, 9, 1, 64]), z(&[1, 4, 4, 64]), z(&[1, 4, 4, 64])),
            (z(&[1, 9, 1, 64]), z(&[1, 3, 4, 64]), z(&[1, 3, 5, 64])),
            (z(&[1, 9, 1, 64]), z(&[1, 3, 0, 64]), z(&[1, 3, 0, 64])),
        ] {
            let err = cached_attention(&q, &k, &v).unwrap_err().to_string();
            assert!(err.starts_with("lab attention:"), "{err}");
        }
    }
}
