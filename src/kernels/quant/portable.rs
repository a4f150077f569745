//! The quantized dot products in plain integer arithmetic, for any CPU: a
//! weight row (eight packed rows, for the 32-value blocks) against one
//! quantized activation row, block by block, each block's integer sum
//! scaled once. The x86 kernels compute the same sums
//! with vector instructions; the tests hold them to these.

use super::act::{Q8, Q8K, QK, QK_K};
use super::blocks::{f16_at, Kind};
use super::packed::{block_bytes, head, Q4K_MINIMA, Q4K_SCALES, Q4K_VALUES, ROWS};

/// Eight weight rows (packed group `w` of Q8_0, Q4_0 or Q4_1, laid out as
/// [`super::packed`] says) against activation row `r`: output `j` is row
/// `j`'s dot product.
pub(super) fn group(kind: Kind, w: &[u8], a: &Q8, r: usize) -> [f32; ROWS] {
    let (nb, h) = (a.blocks, head(kind));
    let mut out = [0f32; ROWS];
    for (b, blk) in w.chunks_exact(ROWS * kind.bytes()).take(nb).enumerate() {
        let i = r * nb + b;
        let x = &a.qs[i * QK..(i + 1) * QK];
        for (j, out) in out.iter_mut().enumerate() {
            // SAFETY: the packed block holds eight f16 scales (and Q4_1's
            // eight minima after them) at its front.
            let d = unsafe { f16_at(blk.as_ptr().add(2 * j)) };
            let mut isum = 0i32;
            for (v, &x) in x.iter().enumerate() {
                let (c, t) = (v / 4, v % 4);
                let q = match kind {
                    Kind::Q8_0 => i32::from(blk[h + 32 * c + 4 * j + t] as i8),
                    _ => {
                        let byte = blk[h + 32 * (c % 4) + 4 * j + t];
                        i32::from(if c < 4 { byte & 15 } else { byte >> 4 })
                    }
                };
                isum += q * i32::from(x);
            }
            let offset = match kind {
                Kind::Q8_0 => 0.0,
                Kind::Q4_0 => -8.0 * d * a.s[i],
                // Q4_1's minimum times the sum as Q8_1 stores it (act.rs).
                _ => (unsafe { f16_at(blk.as_ptr().add(2 * (ROWS + j))) }) * a.s16[i],
            };
            *out += isum as f32 * d * a.d[i] + offset;
        }
    }
    out
}

/// Eight Q4_K weight rows (packed group `w`, laid out as [`super::packed`]
/// says) against activation row `r`: output `j` is row `j`'s dot product.
pub(super) fn group_q4k(w: &[u8], a: &Q8K, r: usize) -> [f32; ROWS] {
    let nb = a.blocks;
    let mut out = [0f32; ROWS];
    for (b, blk) in w.chunks_exact(block_bytes(Kind::Q4K)).take(nb).enumerate() {
        let i = r * nb + b;
        let (x, bs) = (&a.qs[i * QK_K..][..QK_K], &a.bsums[i * 16..][..16]);
        for (j, out) in out.iter_mut().enumerate() {
            // SAFETY: the packed block holds eight f16 d, then eight dmin.
            let (d, dmin) = unsafe {
                let p = blk.as_ptr();
                (f16_at(p.add(2 * j)), f16_at(p.add(2 * (ROWS + j))))
            };
            let (mut isum, mut mins) = (0i32, 0i32);
            for s in 0..8 {
                let vals = &blk[Q4K_VALUES + 128 * s..][..128];
                let part: i32 = (0..32)
                    .map(|v| {
                        let byte = vals[32 * (v % 16 / 4) + 4 * j + v % 4];
                        let q = if v < 16 { byte & 15 } else { byte >> 4 };
                        i32::from(q) * i32::from(x[32 * s + v])
                    })
                    .sum();
                isum += i32::from(blk[Q4K_SCALES + ROWS * s + j]) * part;
                let sum32 = i32::from(bs[2 * s]) + i32::from(bs[2 * s + 1]);
                mins += i32::from(blk[Q4K_MINIMA + ROWS * s + j]) * sum32;
            }
            *out += a.d[i] * (d * isum as f32 - dmin * mins as f32);
        }
    }
    out
}

/// The dot product of Q6_K weight row `w` (its blocks' bytes, as stored)
/// with activation row `r` of `a`.
pub(super) fn dot_q6k(w: &[u8], a: &Q8K, r: usize) -> f32 {
    let nb = a.blocks;
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(Kind::Q6K.bytes()).take(nb).enumerate() {
        let i = r * nb + b;
        let x = &a.qs[i * QK_K..(i + 1) * QK_K];
        let (ql, qh) = (&blk[..128], &blk[128..192]);
        let sc = &blk[192..208];
        // SAFETY: d is the block's last two bytes.
        let d = unsafe { f16_at(blk.as_ptr().add(208)) };
        let mut isum = 0i32;
        for h in 0..2 {
            let (ql, qh, sc, x) = (&ql[64 * h..], &qh[32 * h..], &sc[8 * h..], &x[128 * h..]);
            let mut part = [0i32; 8];
            for l in 0..32 {
                let q = [
                    (ql[l] & 15) | ((qh[l] & 3) << 4),
                    (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                    (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
                ];
                for (t, q) in q.iter().enumerate() {
                    part[2 * t + l / 16] += (i32::from(*q) - 32) * i32::from(x[32 * t + l]);
                }
            }
            for (t, p) in part.iter().enumerate() {
                // part[2t + half] is scale 2t + half of this 128.
                isum += i32::from(sc[t] as i8) * p;
            }
        }
        sum += d * a.d[i] * isum as f32;
    }
    sum
}
