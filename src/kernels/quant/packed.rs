//! The 32-value blocks (Q8_0, Q4_0, Q4_1) repacked once, when a layer is
//! made, eight weight rows at a time, as ggml's CPU "repack" types do
//! (`block_q4_0x8`): the same bytes, in an order that lets one vector
//! register hold a piece of each of eight rows.
//!
//! Why: stored as GGUF lays them out, a block is one row's 32 values, so a
//! dot product ends in a sum across a register's lanes and every block's
//! scale is broadcast to all of them, per row. Interleaved, lane `j` of a
//! register is row `j`: four values of each of eight rows meet the same four
//! activations (broadcast once to every lane), the integer sums of the eight
//! rows come out in the eight lanes, their eight scales are one load, and
//! the result is eight outputs with no sum across lanes. Nothing is
//! converted to float and the byte count is unchanged: the kernels still
//! read each weight byte once per token, now in the order of this layout.
//!
//! A group of eight rows holds, block after block (block `b` of all eight
//! rows at `b * 8 * bytes`):
//!
//! | type | per block of eight rows |
//! | --- | --- |
//! | Q8_0 | 8 scales d (f16); 8 chunks of 32 bytes, chunk `c` byte `4 j + t` = value `4 c + t` of row `j` |
//! | Q4_0 | 8 scales d; 4 chunks, chunk `g` byte `4 j + t` = stored byte `4 g + t` of row `j` (its low nibble value `4 g + t`, its high one `16 + 4 g + t`) |
//! | Q4_1 | 8 scales d; 8 minima m (f16); the same 4 chunks |
//!
//! | Q4_K | 8 d; 8 dmin (f16); the 6-bit scales as bytes, sub-block `s` of row `j` at `32 + 8 s + j`; the minima alike at `96 + 8 s + j`; from [`Q4K_VALUES`], per sub-block of 32 values, Q4_0's 4 chunks (128 bytes) |
//!
//! So in every case the 32-byte register `c` of a block (Q4's chunk `c % 4`,
//! low nibbles for `c < 4`, high ones after) holds values `4 c .. 4 c + 4` of
//! each row, against activations `4 c .. 4 c + 4` (of the sub-block, for
//! Q4_K). Q4_K's scales are unpacked from their 12 bytes once, here, not per
//! block and row in the loop (ggml's `get_scale_min_k4`): 16 bytes a row
//! and block where 12 were, 148 bytes per 256 values instead of 144. A last
//! group of fewer than eight rows is padded with zero blocks, whose outputs
//! are not written.

use super::blocks::{q4k_scales, Kind};

/// Weight rows per packed group: the eight 32-bit lanes of a 256-bit register.
pub(super) const ROWS: usize = 8;

/// A weight of 32-value blocks, repacked.
pub(super) struct Packed {
    pub(super) kind: Kind,
    /// Blocks per row.
    pub(super) blocks: usize,
    bytes: Vec<u8>,
}

/// Bytes of a block's scales (and minima) at the front of a packed block.
pub(super) const fn head(kind: Kind) -> usize {
    match kind {
        Kind::Q4_1 => 4 * ROWS,
        Kind::Q4K => Q4K_VALUES,
        _ => 2 * ROWS,
    }
}

/// Where a packed Q4_K block's scales start (sub-block `s` of row `j` at
/// `Q4K_SCALES + ROWS * s + j`): after its eight d and eight dmin.
pub(super) const Q4K_SCALES: usize = 4 * ROWS;
/// Where its minima start, laid out as the scales.
pub(super) const Q4K_MINIMA: usize = Q4K_SCALES + 8 * ROWS;
/// Where its values start: after the minima.
pub(super) const Q4K_VALUES: usize = Q4K_MINIMA + 8 * ROWS;

/// Bytes of one packed block of eight rows.
pub(super) const fn block_bytes(kind: Kind) -> usize {
    match kind {
        Kind::Q4K => Q4K_VALUES + ROWS * 128,
        _ => ROWS * kind.bytes(),
    }
}

impl Packed {
    /// `data` (`n` rows of `k / 32` blocks of `kind`, as stored) repacked.
    pub(super) fn new(kind: Kind, data: &[u8], n: usize, k: usize) -> Packed {
        debug_assert!(kind != Kind::Q6K, "Q6_K is read as stored");
        let (blocks, bytes) = (k / kind.values(), kind.bytes());
        let row = blocks * bytes;
        let groups = n.div_ceil(ROWS);
        // Zero blocks pad the last group: d = 0, so their sums are 0.
        let mut out = vec![0u8; groups * blocks * block_bytes(kind)];
        let (head, words) = (head(kind), (bytes - head(kind) / ROWS) / 4);
        for (gi, group) in out.chunks_exact_mut(blocks * block_bytes(kind)).enumerate() {
            for (b, dst) in group.chunks_exact_mut(block_bytes(kind)).enumerate() {
                for j in (0..ROWS).filter(|j| gi * ROWS + j < n) {
                    let src = &data[(gi * ROWS + j) * row + b * bytes..][..bytes];
                    if kind == Kind::Q4K {
                        q4k_row(dst, j, src);
                        continue;
                    }
                    // The f16 fields: d (and Q4_1's m) of row j side by side.
                    for f in 0..head / (2 * ROWS) {
                        dst[2 * (f * ROWS + j)..][..2].copy_from_slice(&src[2 * f..][..2]);
                    }
                    // The values: 4-byte word w of row j at chunk w, lane j.
                    let values = &src[head / ROWS..];
                    for w in 0..words {
                        let at = head + 32 * w + 4 * j;
                        dst[at..at + 4].copy_from_slice(&values[4 * w..][..4]);
                    }
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

/// Row `j`'s Q4_K block `src` (as stored) into the packed block `dst`.
fn q4k_row(dst: &mut [u8], j: usize, src: &[u8]) {
    dst[2 * j..][..2].copy_from_slice(&src[..2]);
    dst[2 * (ROWS + j)..][..2].copy_from_slice(&src[2..4]);
    let (sc, mn) = q4k_scales(src[4..16].try_into().expect("12 bytes of scales"));
    for s in 0..8 {
        dst[Q4K_SCALES + ROWS * s + j] = sc[s];
        dst[Q4K_MINIMA + ROWS * s + j] = mn[s];
    }
    // Stored, value 32 s + l of a block is nibble s % 2 of byte 32 (s / 2) + l.
    let qs = &src[16..];
    let value = |s: usize, l: usize| (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
    for s in 0..8 {
        for (w, t) in (0..16).map(|v| (v / 4, v % 4)) {
            let byte = value(s, 4 * w + t) | (value(s, 16 + 4 * w + t) << 4);
            dst[Q4K_VALUES + 128 * s + 32 * w + 4 * j + t] = byte;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
