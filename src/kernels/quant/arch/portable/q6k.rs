//! Q6_K, read as stored, in plain integer arithmetic.

use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::{f16_at, Kind};

/// The dot product of Q6_K weight row `w` (its blocks' bytes, as stored)
/// with activation row `r` of `a`.
pub(in crate::kernels::quant) fn dot_q6k(w: &[u8], a: &Q8K, r: usize) -> f32 {
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
