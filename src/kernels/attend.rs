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
//! Computed in f32 for f32, f16 and bf16 (widened on load, rounded once);
//! under f32 queries the keys and values may be f16 or bf16 (a 16-bit KV
//! cache, as llama.cpp's default f16 one: half the bytes a step reads).
//! A decode step (t = 1) is split over the keys ([`decode`]): a unit is one
//! key/value head's chunk of keys for every query head that reads it, its
//! parts merged per head after (by the unit itself where the keys are one
//! chunk), with AVX-512 code for f32 heads of 32 to
//! 256 ([`x86`]); SmolLM2's q4_1 tg at depth 2048 went from 70 to 89-93
//! tok/s with the first AVX-512 scores, and to 104-115 with the split.
//! On a GPU the composed form runs (the caller's choice): this is CPU code.

mod decode;
mod prompt;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::borrow::Cow;

use candle_core::{bail, CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};

use super::cpu::{output, Elem, BLOCK};
use super::rows::{share, Out, Threads};
use super::{as_is_or_copied, check_dtype, contiguous};

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
    let kv = keys.dtype();
    let sixteen_under_f32 = q.dtype() == DType::F32 && matches!(kv, DType::F16 | DType::BF16);
    if values.dtype() != kv || (kv != q.dtype() && !sixteen_under_f32) {
        bail!(
            "lab attention: keys and values of one dtype, q's or (under f32 queries) f16 or \
             bf16; got q {:?}, keys {kv:?}, values {:?}",
            q.dtype(),
            values.dtype()
        );
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

/// A key/value element: one of the kernels' elements, which the AVX-512
/// kernels load sixteen at a time widened to f32 ([`x86`]).
#[cfg(target_arch = "x86_64")]
trait Kv: Elem + super::cpu::x86::Lanes16 {}
#[cfg(target_arch = "x86_64")]
impl<T: Elem + super::cpu::x86::Lanes16> Kv for T {}
#[cfg(not(target_arch = "x86_64"))]
trait Kv: Elem {}
#[cfg(not(target_arch = "x86_64"))]
impl<T: Elem> Kv for T {}

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

    fn run<E: Elem, K: Kv>(
        &self,
        q: &[E],
        k: (&[K], &Layout),
        v: (&[K], &Layout),
    ) -> Result<CpuStorage> {
        let (ks, vs) = (self.starts(k.1, k.0.len())?, self.starts(v.1, v.0.len())?);
        if self.t > 1 {
            return Ok(self.prompt(q, k.0, &ks, v.0, &vs));
        }
        Ok(self.decode(q, k.0, &ks, v.0, &vs))
    }
}

impl Attend {
    /// A prompt chunk ([`prompt`]): each kv head's keys transposed once,
    /// then a unit is [`prompt::QROWS`] query rows of one head.
    fn prompt<E: Elem, K: Elem>(
        &self,
        q: &[E],
        k: &[K],
        ks: &[usize],
        v: &[K],
        vs: &[usize],
    ) -> CpuStorage {
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
            // A 16-bit cache under f32 queries.
            (CpuStorage::F32(q), CpuStorage::F16(k), CpuStorage::F16(v)) => {
                self.run(&q[a..z], (k, l2), (v, l3))?
            }
            (CpuStorage::F32(q), CpuStorage::BF16(k), CpuStorage::BF16(v)) => {
                self.run(&q[a..z], (k, l2), (v, l3))?
            }
            _ => bail!(
                "lab attention: q of f32, f16 or bf16, keys and values of its dtype (or 16 bits \
                 under f32)"
            ),
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
        // over the pool), other groups and head_dims, a head_dim that is no
        // multiple of the lanes, a batch of two with one head per key/value
        // head; one query row (a decode step), and t rows: a whole prompt
        // (t = n) and a chunk after what the cache held, in blocks of QROWS
        // rows and a last part block, keys past a whole score block.
        for (b, heads, kv, t, n, d, cap) in [
            (1, 9, 3, 1, 1, 64, 8),
            (1, 9, 3, 1, 37, 64, 40),
            (1, 9, 3, 1, 700, 64, 1024),
            (2, 2, 2, 1, 5, 20, 5),
            (2, 4, 2, 1, 130, 64, 160),
            (1, 8, 2, 1, 300, 128, 320),
            (1, 4, 1, 1, 100, 256, 128),
            (1, 6, 2, 1, 90, 96, 96),
            (2, 4, 4, 1, 17, 32, 20),
            // Groups of 4 and 5 heads at d = 64, of 4 at 32 and of 3 at 80:
            // the AVX-512 values' pass takes 4, 4 then 1, 4 and 3 heads
            // together.
            (1, 8, 2, 1, 45, 64, 48),
            (1, 8, 2, 1, 45, 32, 48),
            (1, 10, 2, 1, 33, 64, 40),
            (1, 6, 2, 1, 50, 80, 64),
            (1, 9, 3, 16, 16, 64, 40),
            (1, 9, 3, 7, 37, 64, 40),
            (2, 2, 2, 3, 5, 20, 5),
            (1, 9, 3, 37, 37, 64, 40),
            (2, 2, 2, 5, 19, 20, 24),
        ] {
            // One dtype throughout, and a 16-bit cache under f32 queries
            // (computed in f32 from the cache's values: f32's tolerance).
            for (dtype, kv_dtype, tol) in [
                (DType::F32, DType::F32, 1e-5),
                (DType::F16, DType::F16, 4e-3),
                (DType::BF16, DType::BF16, 3e-2),
                (DType::F32, DType::F16, 1e-5),
                (DType::F32, DType::BF16, 1e-5),
            ] {
                let q = Tensor::randn(0f32, 1.0, (b, heads, t, d), &dev).unwrap();
                let cache = |s| Tensor::randn(0f32, 1.0, (b, kv, cap, d), &dev).unwrap() * s;
                let (kc, vc) = (cache(1.0).unwrap(), cache(1.0).unwrap());
                let q = q.to_dtype(dtype).unwrap();
                let [kc, vc] = [kc, vc].map(|t| t.to_dtype(kv_dtype).unwrap());
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
                        "{dtype:?}/{kv_dtype:?} {b}x{heads}x{t}x{n}x{d} [{i}]: {g} vs {w}"
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
            // A 16-bit cache under 16-bit queries of the other kind, and
            // keys and values of two dtypes.
            (
                z(&[1, 9, 1, 64]).to_dtype(DType::BF16).unwrap(),
                z(&[1, 3, 4, 64]).to_dtype(DType::F16).unwrap(),
                z(&[1, 3, 4, 64]).to_dtype(DType::F16).unwrap(),
            ),
            (
                z(&[1, 9, 1, 64]),
                z(&[1, 3, 4, 64]).to_dtype(DType::F16).unwrap(),
                z(&[1, 3, 4, 64]),
            ),
        ] {
            let err = cached_attention(&q, &k, &v).unwrap_err().to_string();
            assert!(err.starts_with("lab attention:"), "{err}");
        }
    }
}
