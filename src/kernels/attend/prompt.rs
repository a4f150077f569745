//! A prompt chunk's attention, [`QROWS`] query rows of a head at a time
//! against the keys transposed: the scores of a row block are a small
//! product, not one dot product per key.
//!
//! Why: a decode step ([`super::decode`]) takes a query row's score for one key as a dot
//! product of d in 16 lanes, then a sum across the lanes, then a max: at
//! d = 64 that is 4 multiply-adds and about as many instructions again for
//! the sum, per key and row, and a prompt of t tokens has t^2 / 2 of them
//! per head. Here each kv head's keys are copied once per call, transposed
//! (d rows of the positions, in f32), so one 16-lane multiply-add is one
//! query value times the same dimension of 16 keys: a block's scores build
//! up in lanes with nothing summed across them, the block's query rows share
//! every key load, and the copy is paid once per kv head, not per row. The
//! softmax is the same, its max and sum taken in lanes (a float fold in one
//! value does not vectorize); the weighted sum of the value rows (widened to
//! f32 once, with the keys) keeps the block's rows' sums of 16 dimensions in
//! registers over every key. Same arithmetic as [`super::decode`] up to the
//! order of the sums.

use super::super::cpu::{simd_kernel, Elem, BLOCK};
use super::super::exp::exp;

/// Query rows per tile: they share each load of the transposed keys and of
/// the value rows.
pub(super) const QROWS: usize = 4;
/// Keys per score block: the f32 lanes of a 512-bit register.
const KEYS: usize = 16;

/// Keys `n` rounded up to whole score blocks: a transposed row's length.
pub(super) fn padded(n: usize) -> usize {
    n.next_multiple_of(KEYS)
}

simd_kernel! {
    /// `keys` (n rows of d) into `kt` (d rows of `padded(n)`, the positions
    /// past n zero), and `values` (n rows of d) into `vf`, as f32.
    pub(super) fn widen<E: Elem>(keys: &[E], values: &[E], d: usize, kt: &mut [f32], vf: &mut [f32]) {
        let (np, n) = (kt.len() / d, keys.len() / d);
        let mut buf = [0f32; BLOCK];
        for (j, key) in keys.chunks_exact(d).enumerate() {
            for (i, &v) in E::widen(key, &mut buf).iter().enumerate() {
                kt[i * np + j] = v;
            }
        }
        for row in kt.chunks_exact_mut(np) {
            row[n..].fill(0.0);
        }
        for (value, vf) in values.chunks_exact(d).zip(vf.chunks_exact_mut(d)) {
            vf.copy_from_slice(E::widen(value, &mut buf));
        }
    }
}

simd_kernel! {
    /// `seen.len()` query rows (`q`, rows of d) of one head: row r sees the first
    /// `seen[r]` keys (non-decreasing in r), `kt` those keys transposed (d
    /// rows of `padded(n)`), `vf` the value rows in f32 (at least
    /// `seen[rows - 1]` rows of d). Writes each row's softmax(q k^T x scale)
    /// weighted sum of the values into `acc` (rows of [`BLOCK`]), which
    /// holds the query rows widened until the scores are done (no zeroed
    /// array of its own: zeroing 4 KiB a block held a tenth of `perf`'s
    /// samples in a 16-token prompt's attention); `p` is scratch of `QROWS` rows of `padded(n)`. Every
    /// loop runs all [`QROWS`] rows (a short block's others hold what they
    /// held, and are zeroed in `p` and not kept), so its accumulators are
    /// registers, not memory.
    pub(super) fn tile<E: Elem>(
        q: &[E],
        kt: &[f32],
        vf: &[f32],
        seen: &[usize],
        scale: f32,
        p: &mut [f32],
        acc: &mut [[f32; BLOCK]; QROWS],
    ) {
        let rows = seen.len();
        let d = q.len() / rows;
        let np = kt.len() / d;
        let last = seen[rows - 1];
        let mut buf = [0f32; BLOCK];
        for (r, qr) in q.chunks_exact(d).enumerate() {
            acc[r][..d].copy_from_slice(E::widen(qr, &mut buf));
        }
        let qf: &[[f32; BLOCK]; QROWS] = acc;
        // The scores, KEYS positions at a time, every row of the block
        // against the same loads of the transposed keys.
        for kb in (0..last).step_by(KEYS) {
            let mut s = [[0f32; KEYS]; QROWS];
            for i in 0..d {
                let k: &[f32; KEYS] = kt[i * np + kb..][..KEYS].try_into().expect("KEYS");
                for (s, qf) in s.iter_mut().zip(qf) {
                    let x = qf[i];
                    for (s, &k) in s.iter_mut().zip(k) {
                        *s += x * k;
                    }
                }
            }
            for (r, s) in s.iter().enumerate() {
                for (p, &s) in p[r * np + kb..][..KEYS].iter_mut().zip(s) {
                    *p = s * scale;
                }
            }
        }
        let inv = softmax(p, np, padded(last), seen);
        // The weighted sum, KEYS dimensions at a time: the block's rows'
        // sums of them stay in registers over every key.
        for c in (0..d).step_by(KEYS) {
            let w = KEYS.min(d - c);
            let mut a = [[0f32; KEYS]; QROWS];
            // A whole block of dimensions is read where it lies (a copy in
            // the loop, kept for the part block, cost the loop its
            // registers); a head_dim's last part block is copied.
            if w == KEYS {
                for j in 0..last {
                    let v = vf[j * d + c..].first_chunk::<KEYS>().expect("w = KEYS");
                    weigh(&mut a, p, np, j, v);
                }
            } else {
                for j in 0..last {
                    let mut v = [0f32; KEYS];
                    v[..w].copy_from_slice(&vf[j * d + c..][..w]);
                    weigh(&mut a, p, np, j, &v);
                }
            }
            for ((acc, a), &inv) in acc.iter_mut().zip(&a).zip(&inv).take(rows) {
                for (o, &a) in acc[c..c + w].iter_mut().zip(a.iter()) {
                    *o = a * inv;
                }
            }
        }
    }
}

/// Each row's softmax over the keys it sees (`seen[r]` of row `r`'s scores
/// in `p`, rows `np` apart), in whole blocks of KEYS (`blocks` scores): the
/// scores past them are -inf, whose exponential is zero, so no block is cut
/// short (a part block's fold ran a lane at a time) and the weighted sum
/// runs over the block's keys alike; a short block's missing rows are zero.
/// Each step is taken for every row before the next, so that the rows' short
/// chains of dependent operations overlap (one row's max, then its
/// exponentials, then its sum, left the core waiting on each). Returns each
/// row's 1 / sum.
#[inline(always)]
fn softmax(p: &mut [f32], np: usize, blocks: usize, seen: &[usize]) -> [f32; QROWS] {
    let mut max = [0f32; QROWS];
    for (r, max) in max.iter_mut().enumerate() {
        let p = &mut p[r * np..r * np + blocks];
        let n = seen.get(r).copied().unwrap_or(0);
        p[n..].fill(f32::NEG_INFINITY);
        // A missing row's max is 0, so its exponentials are all 0.
        *max = if n == 0 { 0.0 } else { lanes(p, f32::max) };
    }
    // The exponentials alone (a loop that carries no sum vectorizes).
    for (r, &max) in max.iter().enumerate() {
        for s in p[r * np..r * np + blocks].iter_mut() {
            *s = exp(*s - max);
        }
    }
    let mut inv = [0f32; QROWS];
    for (r, inv) in inv.iter_mut().enumerate().take(seen.len()) {
        *inv = 1.0 / lanes(&p[r * np..r * np + blocks], |a, b| a + b);
    }
    inv
}

/// Adds key `j`'s weight in each row of `p` (rows `np` apart) times its
/// values `v` to that row's sums `a`.
#[inline(always)]
fn weigh(a: &mut [[f32; KEYS]; QROWS], p: &[f32], np: usize, j: usize, v: &[f32; KEYS]) {
    for (r, a) in a.iter_mut().enumerate() {
        let pj = p[r * np + j];
        for (a, &v) in a.iter_mut().zip(v) {
            *a += pj * v;
        }
    }
}

/// `x` (whole blocks of [`KEYS`]) folded by `f` in [`KEYS`] lanes, then
/// across them in halves: a float fold carried in one value runs one
/// element at a time (the compiler may not reorder it), in lanes it is a
/// vector operation per [`KEYS`] elements, and the halving four more.
#[inline(always)]
fn lanes(x: &[f32], f: impl Fn(f32, f32) -> f32) -> f32 {
    let (blocks, rest) = x.as_chunks::<KEYS>();
    debug_assert!(rest.is_empty() && !blocks.is_empty());
    let mut acc = blocks[0];
    for c in &blocks[1..] {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = f(*a, v);
        }
    }
    let mut w = KEYS;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] = f(acc[i], acc[i + w]);
        }
    }
    acc[0]
}
