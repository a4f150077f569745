//! The k-quants of 32-value sub-blocks with 6-bit scales and minima (Q4_K
//! and Q5_K), eight repacked rows at a time, in plain integer arithmetic.

use crate::kernels::quant::act::{Q8K, QK_K};
use crate::kernels::quant::blocks::{f16_at, Kind};
use crate::kernels::quant::packed::{
    block_bytes, high_at, nibble_at, sub_bytes, Q4K_MINIMA, Q4K_SCALES, Q4K_VALUES, ROWS,
};

/// Eight Q4_K or Q5_K weight rows (packed group `w`, laid out as
/// [`crate::kernels::quant::packed`] says) against activation row `r`:
/// output `j` is row `j`'s dot product.
pub(in crate::kernels::quant) fn group_q4k_q5k(
    kind: Kind,
    w: &[u8],
    a: &Q8K,
    r: usize,
) -> [f32; ROWS] {
    let (nb, sb) = (a.blocks, sub_bytes(kind));
    let mut out = [0f32; ROWS];
    for (b, blk) in w.chunks_exact(block_bytes(kind)).take(nb).enumerate() {
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
                let sub = &blk[Q4K_VALUES + sb * s..][..sb];
                let part: i32 = (0..32)
                    .map(|v| {
                        let mut q = nibble_at(sub, j, v);
                        if kind == Kind::Q5K {
                            q |= high_at(&sub[128..], j, v) << 4;
                        }
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
