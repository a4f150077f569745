//! The 32-value blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), eight repacked rows
//! at a time, in plain integer arithmetic.

use crate::kernels::quant::act::{Q8, QK};
use crate::kernels::quant::blocks::{f16_at, Kind};
use crate::kernels::quant::packed::{head, high_at, nibble_at, q5_high, ROWS};

/// Eight weight rows (packed group `w` of a 32-value type, laid out as
/// [`crate::kernels::quant::packed`] says) against activation row `r`:
/// output `j` is row `j`'s dot product.
pub(in crate::kernels::quant) fn group(kind: Kind, w: &[u8], a: &Q8, r: usize) -> [f32; ROWS] {
    let (nb, h) = (a.blocks, head(kind));
    let mut out = [0f32; ROWS];
    for (b, blk) in w.chunks_exact(ROWS * kind.bytes()).take(nb).enumerate() {
        let i = r * nb + b;
        let x = &a.qs[i * QK..(i + 1) * QK];
        for (j, out) in out.iter_mut().enumerate() {
            // SAFETY: the packed block holds eight f16 scales (and Q4_1's
            // and Q5_1's eight minima after them) at its front.
            let d = unsafe { f16_at(blk.as_ptr().add(2 * j)) };
            let mut isum = 0i32;
            for (v, &x) in x.iter().enumerate() {
                let q = match kind {
                    Kind::Q8_0 => i32::from(blk[h + 32 * (v / 4) + 4 * j + v % 4] as i8),
                    Kind::Q5_0 | Kind::Q5_1 => {
                        let high = high_at(&blk[q5_high(kind)..], j, v);
                        i32::from(nibble_at(&blk[h..], j, v) | (high << 4))
                    }
                    _ => i32::from(nibble_at(&blk[h..], j, v)),
                };
                isum += q * i32::from(x);
            }
            let offset = match kind {
                Kind::Q8_0 => 0.0,
                Kind::Q4_0 => -8.0 * d * a.s[i],
                Kind::Q5_0 => -16.0 * d * a.s[i],
                // The minimum times the sum as Q8_1 stores it (act.rs).
                _ => (unsafe { f16_at(blk.as_ptr().add(2 * (ROWS + j))) }) * a.s16[i],
            };
            *out += isum as f32 * d * a.d[i] + offset;
        }
    }
    out
}
