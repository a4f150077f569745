//! The quantized dot products in plain integer arithmetic, for any CPU: one
//! weight row against one quantized activation row, block by block, each
//! block's integer sum scaled once. The x86 kernels compute the same sums
//! with vector instructions; the tests hold them to these.

use super::act::{Q8, Q8K, QK, QK_K};
use super::blocks::{f16_at, q4k_scales, Kind};

/// The dot product of weight row `w` (its blocks' bytes) with activation
/// row `r` of `a` (Q8 blocks) or `ak` (Q8_K blocks), as `kind` says.
pub(super) fn dot(kind: Kind, w: &[u8], a: Option<&Q8>, ak: Option<&Q8K>, r: usize) -> f32 {
    match (kind, a, ak) {
        (Kind::Q8_0 | Kind::Q4_0 | Kind::Q4_1, Some(a), _) => dot32(kind, w, a, r),
        (Kind::Q4K, _, Some(a)) => dot_q4k(w, a, r),
        (Kind::Q6K, _, Some(a)) => dot_q6k(w, a, r),
        _ => unreachable!("the caller quantizes the activations for the kind"),
    }
}

/// Q8_0, Q4_0 and Q4_1 against Q8 blocks.
fn dot32(kind: Kind, w: &[u8], a: &Q8, r: usize) -> f32 {
    let nb = a.blocks;
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(kind.bytes()).take(nb).enumerate() {
        let i = r * nb + b;
        let x = &a.qs[i * QK..(i + 1) * QK];
        // SAFETY: a block holds its f16 fields at these offsets (blocks.rs).
        let d = unsafe { f16_at(blk.as_ptr()) };
        let (isum, offset) = match kind {
            Kind::Q8_0 => {
                let q = &blk[2..34];
                let s: i32 = q
                    .iter()
                    .zip(x)
                    .map(|(&q, &x)| i32::from(q as i8) * i32::from(x))
                    .sum();
                (s, 0.0)
            }
            Kind::Q4_0 => (nibble_dot(&blk[2..18], x), -8.0 * d * a.s[i]),
            // Q4_1's minimum times the sum as Q8_1 stores it (act.rs).
            _ => {
                let m = unsafe { f16_at(blk.as_ptr().add(2)) };
                (nibble_dot(&blk[4..20], x), m * a.s16[i])
            }
        };
        sum += isum as f32 * d * a.d[i] + offset;
    }
    sum
}

/// The 32 nibbles of `q` (value j low in byte j, value 16 + j high) dotted
/// with `x`, unsigned (0..15).
fn nibble_dot(q: &[u8], x: &[i8]) -> i32 {
    let mut s = 0;
    for (j, &b) in q.iter().enumerate() {
        s += i32::from(b & 15) * i32::from(x[j]) + i32::from(b >> 4) * i32::from(x[j + 16]);
    }
    s
}

fn dot_q4k(w: &[u8], a: &Q8K, r: usize) -> f32 {
    let nb = a.blocks;
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(Kind::Q4K.bytes()).take(nb).enumerate() {
        let i = r * nb + b;
        let x = &a.qs[i * QK_K..(i + 1) * QK_K];
        // SAFETY: d and dmin are the block's first four bytes.
        let (d, dmin) = unsafe { (f16_at(blk.as_ptr()), f16_at(blk.as_ptr().add(2))) };
        let scales: &[u8; 12] = blk[4..16].try_into().expect("12 bytes");
        let (sc, mn) = q4k_scales(scales);
        let qs = &blk[16..144];
        let mut isum = 0i32;
        for c in 0..4 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let q = qs[32 * c + l];
                lo += i32::from(q & 15) * i32::from(x[64 * c + l]);
                hi += i32::from(q >> 4) * i32::from(x[64 * c + 32 + l]);
            }
            isum += i32::from(sc[2 * c]) * lo + i32::from(sc[2 * c + 1]) * hi;
        }
        let bs = &a.bsums[i * 16..(i + 1) * 16];
        let mins: i32 = (0..8)
            .map(|j| i32::from(mn[j]) * (i32::from(bs[2 * j]) + i32::from(bs[2 * j + 1])))
            .sum();
        sum += a.d[i] * (d * isum as f32 - dmin * mins as f32);
    }
    sum
}

fn dot_q6k(w: &[u8], a: &Q8K, r: usize) -> f32 {
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
