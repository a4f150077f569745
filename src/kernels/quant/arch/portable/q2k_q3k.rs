//! The k-quants of 16-value sub-blocks (Q2_K and Q3_K), eight repacked rows
//! at a time, in plain integer arithmetic.

use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::{f16_at, Kind};
use crate::kernels::quant::packed::{
    block_bytes, crumb_at, high_at, Q2K_SCALES, Q2K_VALUES, Q3K_SCALES, Q3K_VALUES, ROWS,
};

/// Eight Q2_K or Q3_K weight rows (packed group `w`, laid out as
/// [`crate::kernels::quant::packed`] says) against activation row `r`:
/// output `j` is row `j`'s dot product.
pub(in crate::kernels::quant) fn group_q2k_q3k(
    kind: Kind,
    w: &[u8],
    a: &Q8K,
    r: usize,
) -> [f32; ROWS] {
    let nb = a.blocks;
    let mut out = [0f32; ROWS];
    for (b, blk) in w.chunks_exact(block_bytes(kind)).take(nb).enumerate() {
        let i = r * nb + b;
        let (x, bs) = (&a.qs[i * QK_K..][..QK_K], &a.bsums[i * 16..][..16]);
        for (j, out) in out.iter_mut().enumerate() {
            // Per sub-block of 16: the values' sum times its scale, and
            // what the weights subtract (Q2_K's minimum, Q3_K's 4 x scale)
            // times the activations' sum.
            let (mut isum, mut less) = (0i32, 0i32);
            for (s, &bsum) in bs.iter().enumerate() {
                let at = 16 * (s / 2) + 2 * j + s % 2;
                let part: i32 = (0..16)
                    .map(|v| i32::from(value(kind, blk, j, s, v)) * i32::from(x[16 * s + v]))
                    .sum();
                let (scale, minus) = match kind {
                    Kind::Q2K => {
                        let byte = blk[Q2K_SCALES + at];
                        (i32::from(byte & 15), i32::from(byte >> 4))
                    }
                    _ => {
                        let sc = i32::from(blk[Q3K_SCALES + at] as i8);
                        (sc, 4 * sc)
                    }
                };
                isum += scale * part;
                less += minus * i32::from(bsum);
            }
            // SAFETY: the packed block holds eight f16 d (and Q2_K's eight
            // dmin after them) at its front.
            let d = unsafe { f16_at(blk.as_ptr().add(2 * j)) };
            *out += a.d[i]
                * match kind {
                    Kind::Q2K => {
                        let dmin = unsafe { f16_at(blk.as_ptr().add(2 * (ROWS + j))) };
                        d * isum as f32 - dmin * less as f32
                    }
                    _ => d * (isum - less) as f32,
                };
        }
    }
    out
}

/// Row `j`'s value `v` of sub-block `s` in a packed block: Q2_K's 2 bits,
/// or Q3_K's 3 (0-7, standing for -4..3).
fn value(kind: Kind, blk: &[u8], j: usize, s: usize, v: usize) -> u8 {
    match kind {
        Kind::Q2K => crumb_at(&blk[Q2K_VALUES + 32 * s..], j, v),
        _ => {
            let pair = &blk[Q3K_VALUES + 96 * (s / 2)..][..96];
            let low = crumb_at(&pair[32 * (s % 2)..], j, v);
            low | (high_at(&pair[64..], j, 16 * (s % 2) + v) << 2)
        }
    }
}
