//! The blocks read repacked (all but Q6_K), once, when a layer is made,
//! eight weight rows at a time, as ggml's CPU "repack" types do
//! (`block_q4_0x8`): the same values, in an order that lets one vector
//! register hold a piece of each of eight rows.
//!
//! Why: stored as GGUF lays them out, a block is one row's values, so a
//! dot product ends in a sum across a register's lanes and every block's
//! scale is broadcast to all of them, per row. Interleaved, lane `j` of a
//! register is row `j`: four values of each of eight rows meet the same four
//! activations (broadcast once to every lane), the integer sums of the eight
//! rows come out in the eight lanes, their eight scales are one load, and
//! the result is eight outputs with no sum across lanes. Nothing is
//! converted to float and the byte count is the file's (the k-quants a few
//! percent more, below): the kernels still read each weight byte once per
//! token, now in the order of this layout.
//!
//! A group of eight rows holds, block after block (block `b` of all eight
//! rows at `b * block_bytes(kind)`):
//!
//! | type | per block of eight rows |
//! | --- | --- |
//! | Q8_0 | 8 scales d (f16); 8 chunks of 32 bytes, chunk `c` byte `4 j + t` = value `4 c + t` of row `j` |
//! | Q4_0 | 8 scales d; 4 chunks, chunk `g` byte `4 j + t` = stored byte `4 g + t` of row `j` (its low nibble value `4 g + t`, its high one `16 + 4 g + t`) |
//! | Q4_1 | 8 scales d; 8 minima m (f16); the same 4 chunks |
//! | Q5_0 | 8 d; Q4_0's 4 chunks of low nibbles; a high plane of 32 bytes, byte `4 j + t` bit `c` = the fifth bit of value `4 c + t` of row `j` |
//! | Q5_1 | 8 d; 8 m; the 4 chunks; the high plane |
//!
//! So in every case the 32-byte register `c` of a block (Q4's chunk `c % 4`,
//! low nibbles for `c < 4`, high ones after, with bit `c` of the high plane
//! moved to bit 4 for Q5) holds values `4 c .. 4 c + 4` of each row, against
//! activations `4 c .. 4 c + 4`. The k-quants ([`kquant`]) are laid out the
//! same way a sub-block at a time, their scales unpacked to a byte each. A
//! last group of fewer than eight rows is padded with zero blocks, whose
//! outputs are not written.

mod kquant;

pub(super) use kquant::{
    Q2K_SCALES, Q2K_VALUES, Q3K_SCALES, Q3K_VALUES, Q4K_MINIMA, Q4K_SCALES, Q4K_VALUES,
};

use super::blocks::Kind;

/// Weight rows per packed group: the eight 32-bit lanes of a 256-bit register.
pub(super) const ROWS: usize = 8;

/// A weight of blocks, repacked.
pub(super) struct Packed {
    pub(super) kind: Kind,
    /// Blocks per row.
    pub(super) blocks: usize,
    bytes: Vec<u8>,
}

/// Bytes of a 32-value block's scales (and minima) at the front of a packed
/// block: the values follow.
pub(super) const fn head(kind: Kind) -> usize {
    match kind {
        Kind::Q4_1 | Kind::Q5_1 => 4 * ROWS,
        _ => 2 * ROWS,
    }
}

/// Where a packed Q5_0 or Q5_1 block's high plane starts: after its four
/// chunks of nibbles.
pub(super) const fn q5_high(kind: Kind) -> usize {
    head(kind) + 128
}

/// Bytes of one packed block of eight rows.
pub(super) const fn block_bytes(kind: Kind) -> usize {
    match kind {
        Kind::Q2K => kquant::Q2K_VALUES + 16 * 32,
        Kind::Q3K => kquant::Q3K_VALUES + 8 * 96,
        Kind::Q4K => Q4K_VALUES + 8 * sub_bytes(kind),
        Kind::Q5K => Q4K_VALUES + 8 * sub_bytes(kind),
        _ => ROWS * kind.bytes(),
    }
}

/// Bytes of a packed Q4_K or Q5_K sub-block of 32 values: Q4_0's 4 chunks,
/// and for Q5_K a high plane after them (laid out as Q5_0's).
pub(super) const fn sub_bytes(kind: Kind) -> usize {
    match kind {
        Kind::Q5K => 160,
        _ => 128,
    }
}

impl Packed {
    /// `data` (`n` rows of `k / values` blocks of `kind`, as stored) repacked.
    pub(super) fn new(kind: Kind, data: &[u8], n: usize, k: usize) -> Packed {
        debug_assert!(kind != Kind::Q6K, "Q6_K is read as stored");
        let (blocks, bytes) = (k / kind.values(), kind.bytes());
        let row = blocks * bytes;
        let groups = n.div_ceil(ROWS);
        // Zero blocks pad the last group: d = 0, so their sums are 0.
        let mut out = vec![0u8; groups * blocks * block_bytes(kind)];
        let pack = match kind {
            Kind::Q5_0 | Kind::Q5_1 => q5_row,
            Kind::Q2K => kquant::q2k_row,
            Kind::Q3K => kquant::q3k_row,
            Kind::Q4K | Kind::Q5K => kquant::q4k_q5k_row,
            _ => plain_row,
        };
        for (gi, group) in out.chunks_exact_mut(blocks * block_bytes(kind)).enumerate() {
            for (b, dst) in group.chunks_exact_mut(block_bytes(kind)).enumerate() {
                for j in (0..ROWS).filter(|j| gi * ROWS + j < n) {
                    pack(
                        kind,
                        dst,
                        j,
                        &data[(gi * ROWS + j) * row + b * bytes..][..bytes],
                    );
                }
            }
        }
        Packed {
            kind,
            blocks,
            bytes: out,
        }
    }

    /// The weights of `parts` one after another (their rows stacked), or
    /// `None` unless they are one kind with rows of one length and each
    /// holds whole groups (padding would sit inside the stack).
    pub(super) fn stack(parts: &[(&Packed, usize)]) -> Option<Packed> {
        let (first, _) = parts.first()?;
        let fits = |&(p, n): &(&Packed, usize)| {
            p.kind == first.kind && p.blocks == first.blocks && n.is_multiple_of(ROWS)
        };
        if !parts.iter().all(fits) {
            return None;
        }
        Some(Packed {
            kind: first.kind,
            blocks: first.blocks,
            bytes: parts
                .iter()
                .flat_map(|(p, _)| p.bytes.iter().copied())
                .collect(),
        })
    }

    /// Group `gi`'s bytes: its blocks one after another.
    pub(super) fn group(&self, gi: usize) -> &[u8] {
        let len = self.blocks * block_bytes(self.kind);
        &self.bytes[gi * len..(gi + 1) * len]
    }
}

/// Row `j`'s Q8_0, Q4_0 or Q4_1 block `src` (as stored) into the packed
/// block `dst`: its f16 fields (d, and Q4_1's m) beside the other rows',
/// its 4-byte word `w` of values at chunk `w`, lane `j`.
fn plain_row(kind: Kind, dst: &mut [u8], j: usize, src: &[u8]) {
    let head = head(kind);
    for f in 0..head / (2 * ROWS) {
        dst[2 * (f * ROWS + j)..][..2].copy_from_slice(&src[2 * f..][..2]);
    }
    let values = &src[head / ROWS..];
    for w in 0..values.len() / 4 {
        let at = head + 32 * w + 4 * j;
        dst[at..at + 4].copy_from_slice(&values[4 * w..][..4]);
    }
}

/// Row `j`'s Q5_0 or Q5_1 block `src` into the packed block `dst`: the f16
/// fields and nibbles as Q4_0's and Q4_1's (the stored qh sits between
/// them), and each value's fifth bit in the high plane.
fn q5_row(kind: Kind, dst: &mut [u8], j: usize, src: &[u8]) {
    let fields = head(kind) / (2 * ROWS);
    for f in 0..fields {
        dst[2 * (f * ROWS + j)..][..2].copy_from_slice(&src[2 * f..][..2]);
    }
    let qh = u32::from_le_bytes(src[2 * fields..][..4].try_into().expect("4 bytes of qh"));
    let qs = &src[2 * fields + 4..][..16];
    for w in 0..4 {
        let at = head(kind) + 32 * w + 4 * j;
        dst[at..at + 4].copy_from_slice(&qs[4 * w..][..4]);
    }
    high_plane(&mut dst[q5_high(kind)..][..32], j, |v| (qh >> v) & 1 == 1);
}

/// Row `j`'s value `v` (of 32) in four chunks of nibbles (Q4_0's packed
/// layout, from its first chunk).
#[inline(always)]
pub(super) fn nibble_at(chunks: &[u8], j: usize, v: usize) -> u8 {
    let byte = chunks[32 * (v % 16 / 4) + 4 * j + v % 4];
    if v < 16 {
        byte & 15
    } else {
        byte >> 4
    }
}

/// Row `j`'s bit of value `v` (of 32) in a high plane ([`high_plane`]).
#[inline(always)]
pub(super) fn high_at(plane: &[u8], j: usize, v: usize) -> u8 {
    (plane[4 * j + v % 4] >> (v / 4)) & 1
}

/// Row `j`'s value `i` (of 16) in a k-quant's 2-bit plane ([`kquant`]).
#[inline(always)]
pub(super) fn crumb_at(plane: &[u8], j: usize, i: usize) -> u8 {
    (plane[4 * j + i % 4] >> (2 * (i / 4))) & 3
}

/// Row `j`'s fifth bits of 32 values (`high(v)`) into a high plane: bit `c`
/// of byte `4 j + t` is value `4 c + t`'s.
fn high_plane(plane: &mut [u8], j: usize, high: impl Fn(usize) -> bool) {
    for v in (0..32).filter(|&v| high(v)) {
        plane[4 * j + v % 4] |= 1 << (v / 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::quant::blocks::q4k_scales;

    /// Row `j`'s value `v` of block `b` in a packed group, read back from
    /// the layout the module's table states.
    fn value(kind: Kind, group: &[u8], j: usize, b: usize, v: usize) -> i32 {
        let blk = &group[b * ROWS * kind.bytes()..];
        let h = head(kind);
        match kind {
            Kind::Q8_0 => i32::from(blk[h + 32 * (v / 4) + 4 * j + v % 4] as i8),
            _ => {
                let byte = blk[h + 32 * (v % 16 / 4) + 4 * j + v % 4];
                i32::from(if v < 16 { byte & 15 } else { byte >> 4 })
            }
        }
    }

    /// Row `j`'s value `v` of block `b` as GGUF stores it.
    fn stored(kind: Kind, data: &[u8], row: usize, b: usize, v: usize) -> i32 {
        let blk = &data[row + b * kind.bytes()..];
        let q = &blk[head(kind) / ROWS..];
        match kind {
            Kind::Q8_0 => i32::from(q[v] as i8),
            _ if v < 16 => i32::from(q[v] & 15),
            _ => i32::from(q[v - 16] >> 4),
        }
    }

    #[test]
    fn every_value_and_scale_lands_where_the_layout_says() {
        for kind in [Kind::Q8_0, Kind::Q4_0, Kind::Q4_1] {
            let (n, k) = (11, 96);
            let row = k / 32 * kind.bytes();
            let data: Vec<u8> = (0..n * row).map(|i| (i * 131 % 251) as u8).collect();
            let p = Packed::new(kind, &data, n, k);
            assert_eq!(
                p.bytes.len(),
                2 * ROWS * row,
                "two groups, the second padded"
            );
            for r in 0..2 * ROWS {
                let (g, j) = (p.group(r / ROWS), r % ROWS);
                for b in 0..3 {
                    let blk = &g[b * ROWS * kind.bytes()..];
                    for f in 0..head(kind) / (2 * ROWS) {
                        let scale = &blk[2 * (f * ROWS + j)..][..2];
                        let want: &[u8] = if r < n {
                            &data[r * row + b * kind.bytes() + 2 * f..][..2]
                        } else {
                            &[0, 0]
                        };
                        assert_eq!(scale, want, "{kind:?} row {r} block {b} field {f}");
                    }
                    for v in 0..32 {
                        let want = if r < n {
                            stored(kind, &data, r * row, b, v)
                        } else {
                            0
                        };
                        assert_eq!(value(kind, g, j, b, v), want, "{kind:?} {r} {b} {v}");
                    }
                }
            }
        }
    }

    #[test]
    fn q4k_values_scales_and_minima_land_where_the_layout_says() {
        let (n, k, bytes) = (9, 512, Kind::Q4K.bytes());
        let data: Vec<u8> = (0..n * 2 * bytes).map(|i| (i * 131 % 251) as u8).collect();
        let p = Packed::new(Kind::Q4K, &data, n, k);
        assert_eq!(
            p.bytes.len(),
            2 * 2 * block_bytes(Kind::Q4K),
            "two groups of two blocks"
        );
        for r in 0..n {
            let (g, j) = (p.group(r / ROWS), r % ROWS);
            for b in 0..2 {
                let src = &data[(r * 2 + b) * bytes..][..bytes];
                let blk = &g[b * block_bytes(Kind::Q4K)..][..block_bytes(Kind::Q4K)];
                assert_eq!(blk[2 * j..][..2], src[..2], "d, row {r} block {b}");
                assert_eq!(blk[2 * (ROWS + j)..][..2], src[2..4], "dmin");
                let (sc, mn) = q4k_scales(src[4..16].try_into().unwrap());
                for s in 0..8 {
                    assert_eq!(blk[Q4K_SCALES + ROWS * s + j], sc[s], "scale {s}");
                    assert_eq!(blk[Q4K_MINIMA + ROWS * s + j], mn[s], "minimum {s}");
                    for v in 0..32 {
                        // Stored: value 64 c + l is byte 32 c + l's low nibble, 64 c + 32 + l its high.
                        let (c, l) = ((32 * s + v) / 64, (32 * s + v) % 64);
                        let byte = src[16 + 32 * c + l % 32];
                        let want = if l < 32 { byte & 15 } else { byte >> 4 };
                        let got = blk[Q4K_VALUES + 128 * s + 32 * (v % 16 / 4) + 4 * j + v % 4];
                        let got = if v < 16 { got & 15 } else { got >> 4 };
                        assert_eq!(got, want, "row {r} block {b} value {}", 32 * s + v);
                    }
                }
            }
        }
        // The padding rows of the second group are zero blocks.
        assert!(p.group(1)[2..16].iter().all(|&b| b == 0));
    }

    /// Row `j`'s weights of block `b` from a packed group, computed from
    /// the layout the tables (here and in [`kquant`]) state, as Candle's
    /// `to_float` computes them from the stored block.
    fn weights(kind: Kind, group: &[u8], j: usize, b: usize) -> Vec<f32> {
        let blk = &group[b * block_bytes(kind)..][..block_bytes(kind)];
        let f16 = |at: usize| half::f16::from_le_bytes([blk[at], blk[at + 1]]).to_f32();
        let (d, second) = (f16(2 * j), f16(2 * (ROWS + j)));
        let h = head(kind);
        let five =
            |v: usize| nibble_at(&blk[h..], j, v) | (high_at(&blk[q5_high(kind)..], j, v) << 4);
        let weight = |v: usize| -> f32 {
            let (s16, s32) = (v / 16, v / 32);
            let at = 16 * (s16 / 2) + 2 * j + s16 % 2;
            match kind {
                Kind::Q8_0 => f32::from(blk[h + 32 * (v / 4) + 4 * j + v % 4] as i8) * d,
                Kind::Q4_0 => (f32::from(nibble_at(&blk[h..], j, v)) - 8.0) * d,
                Kind::Q4_1 => f32::from(nibble_at(&blk[h..], j, v)) * d + second,
                Kind::Q5_0 => (f32::from(five(v)) - 16.0) * d,
                Kind::Q5_1 => f32::from(five(v)) * d + second,
                Kind::Q2K => {
                    let sc = blk[Q2K_SCALES + at];
                    let q = crumb_at(&blk[Q2K_VALUES + 32 * s16..], j, v % 16);
                    d * f32::from(sc & 15) * f32::from(q) - second * f32::from(sc >> 4)
                }
                Kind::Q3K => {
                    let pair = &blk[Q3K_VALUES + 96 * (v / 32)..];
                    let low = crumb_at(&pair[32 * (s16 % 2)..], j, v % 16);
                    let q = i16::from(low | (high_at(&pair[64..], j, v % 32) << 2)) - 4;
                    d * f32::from(blk[Q3K_SCALES + at] as i8) * f32::from(q)
                }
                _ => {
                    let sub = &blk[Q4K_VALUES + sub_bytes(kind) * s32..];
                    let mut q = nibble_at(sub, j, v % 32);
                    if kind == Kind::Q5K {
                        q |= high_at(&sub[128..], j, v % 32) << 4;
                    }
                    let (sc, mn) = (
                        blk[Q4K_SCALES + ROWS * s32 + j],
                        blk[Q4K_MINIMA + ROWS * s32 + j],
                    );
                    d * f32::from(sc) * f32::from(q) - second * f32::from(mn)
                }
            }
        };
        (0..kind.values()).map(weight).collect()
    }

    #[test]
    fn every_packed_type_holds_candles_weights() {
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let types = [
            GgmlDType::Q8_0,
            GgmlDType::Q4_0,
            GgmlDType::Q4_1,
            GgmlDType::Q5_0,
            GgmlDType::Q5_1,
            GgmlDType::Q2K,
            GgmlDType::Q3K,
            GgmlDType::Q4K,
            GgmlDType::Q5K,
        ];
        for t in types {
            let kind = Kind::of(t).unwrap();
            // Two groups, the second padded; two blocks a row.
            let (n, k) = (11, 2 * kind.values());
            let f: Vec<f32> = (0..n * k)
                .map(|i| ((i * 7919 % 1009) as f32 - 504.0) * 0.002 + (i % 7) as f32 * 0.01)
                .collect();
            let q =
                QTensor::quantize(&Tensor::from_vec(f, (n, k), &Device::Cpu).unwrap(), t).unwrap();
            let want: Vec<f32> = q
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let p = Packed::new(kind, &q.data().unwrap(), n, k);
            assert_eq!(p.bytes.len(), 2 * 2 * block_bytes(kind), "{t:?}");
            for r in 0..2 * ROWS {
                let g = p.group(r / ROWS);
                for b in 0..2 {
                    let got = weights(kind, g, r % ROWS, b);
                    let vs = kind.values();
                    match r < n {
                        true => {
                            assert_eq!(got, want[r * k + b * vs..][..vs], "{t:?} row {r} block {b}")
                        }
                        false => assert!(got.iter().all(|&w| w == 0.0), "{t:?} padding row {r}"),
                    }
                }
            }
        }
    }
}
