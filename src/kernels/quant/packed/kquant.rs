//! The k-quants' packed layouts (all but Q6_K, which is read as stored):
//! each 256-value block of eight rows as sub-blocks of the 32-value layouts
//! of [`super`], the rows' scales unpacked to a byte each, once, here, not
//! per block and row in the kernels' loops:
//!
//! | type | per block of eight rows | bytes a row (stored) |
//! | --- | --- | --- |
//! | Q2_K | 8 d; 8 dmin (f16); the scale bytes as stored (scale low nibble, minimum high), sub-blocks `2 p` and `2 p + 1` of row `j` at `32 + 16 p + 2 j`; from [`Q2K_VALUES`], per sub-block `s` of 16 values a 2-bit plane of 32 bytes, byte `4 j + t` bits `2 q..` = value `4 q + t` of row `j` | 84 (84) |
//! | Q3_K | 8 d; the sixteen scales less 32 as i8, laid out as Q2_K's from [`Q3K_SCALES`]; from [`Q3K_VALUES`], per pair `p` of sub-blocks (32 values) 96 bytes: the two sub-blocks' 2-bit planes of low bits, then a high plane as Q5_0's (bit `c` of byte `4 j + t` is value `32 p + 4 c + t`'s third bit) | 114 (110) |
//! | Q4_K | 8 d; 8 dmin; the 6-bit scales as bytes, sub-block `s` of row `j` at [`Q4K_SCALES`]` + 8 s + j`; the minima alike at [`Q4K_MINIMA`]; from [`Q4K_VALUES`], per sub-block of 32 values, Q4_0's 4 chunks (128 bytes) | 148 (144) |
//! | Q5_K | Q4_K's, and after each sub-block's chunks a high plane as Q5_0's (160 bytes a sub-block) | 180 (176) |
//!
//! So a 2-bit plane is one 32-byte load holding four registers' worth of
//! a 16-value sub-block (a shift and a mask each), and a high plane one
//! load holding eight registers' extra bits. The scales a row's block
//! holds in 12 bytes (Q3_K, Q4_K, Q5_K) are 16 bytes packed: the few
//! percent more bytes cost less than unpacking 6-bit fields per block and
//! row in the loop, which is what held a stored Q4_K under Candle's
//! repacked one in cache (docs/kernels.md).

use super::{high_plane, sub_bytes, ROWS};
use crate::kernels::quant::blocks::{q3k_scales, q4k_scales, Kind};

/// Where a packed Q2_K block's scale bytes start: after its 8 d and 8 dmin.
pub(in crate::kernels::quant) const Q2K_SCALES: usize = 4 * ROWS;
/// Where its 2-bit planes start, one of 32 bytes per sub-block of 16.
pub(in crate::kernels::quant) const Q2K_VALUES: usize = Q2K_SCALES + 16 * ROWS;
/// Where a packed Q3_K block's scales start: after its 8 d.
pub(in crate::kernels::quant) const Q3K_SCALES: usize = 2 * ROWS;
/// Where its values start, 96 bytes per pair of sub-blocks.
pub(in crate::kernels::quant) const Q3K_VALUES: usize = Q3K_SCALES + 16 * ROWS;
/// Where a packed Q4_K or Q5_K block's scales start (sub-block `s` of row
/// `j` at `Q4K_SCALES + ROWS * s + j`): after its eight d and eight dmin.
pub(in crate::kernels::quant) const Q4K_SCALES: usize = 4 * ROWS;
/// Where its minima start, laid out as the scales.
pub(in crate::kernels::quant) const Q4K_MINIMA: usize = Q4K_SCALES + 8 * ROWS;
/// Where its values start: after the minima.
pub(in crate::kernels::quant) const Q4K_VALUES: usize = Q4K_MINIMA + 8 * ROWS;

/// Row `j`'s two f16 fields at `src[at..]` (d, then dmin) into their places.
fn fields(dst: &mut [u8], j: usize, src: &[u8], at: usize, count: usize) {
    for f in 0..count {
        dst[2 * (f * ROWS + j)..][..2].copy_from_slice(&src[at + 2 * f..][..2]);
    }
}

/// Value `v`'s two bits in Q2_K's and Q3_K's 64 stored bytes: bits `2 s`..
/// of byte `32 h + l`, for `v = 128 h + 32 s + l`.
fn two_bits(qs: &[u8], v: usize) -> u8 {
    (qs[32 * (v / 128) + v % 32] >> (2 * (v % 128 / 32))) & 3
}

/// Row `j`'s 16 values `value(i)` (each below 4) into a 2-bit plane.
fn two_bit_plane(plane: &mut [u8], j: usize, value: impl Fn(usize) -> u8) {
    for i in 0..16 {
        plane[4 * j + i % 4] |= value(i) << (2 * (i / 4));
    }
}

/// Row `j`'s Q2_K block `src` (as stored) into the packed block `dst`.
pub(super) fn q2k_row(_: Kind, dst: &mut [u8], j: usize, src: &[u8]) {
    fields(dst, j, src, 80, 2);
    let qs = &src[16..80];
    for s in 0..16 {
        dst[Q2K_SCALES + 16 * (s / 2) + 2 * j + s % 2] = src[s];
        let plane = &mut dst[Q2K_VALUES + 32 * s..][..32];
        two_bit_plane(plane, j, |i| two_bits(qs, 16 * s + i));
    }
}

/// Row `j`'s Q3_K block `src` (as stored) into the packed block `dst`.
pub(super) fn q3k_row(_: Kind, dst: &mut [u8], j: usize, src: &[u8]) {
    fields(dst, j, src, 108, 1);
    let (hmask, qs) = (&src[..32], &src[32..96]);
    let scales = q3k_scales(src[96..108].try_into().expect("12 bytes of scales"));
    for (s, &sc) in scales.iter().enumerate() {
        dst[Q3K_SCALES + 16 * (s / 2) + 2 * j + s % 2] = sc as u8;
    }
    for p in 0..8 {
        let pair = &mut dst[Q3K_VALUES + 96 * p..][..96];
        for h in 0..2 {
            let s = 2 * p + h;
            two_bit_plane(&mut pair[32 * h..][..32], j, |i| two_bits(qs, 16 * s + i));
        }
        // Value v's third bit: bit 4 (v / 128) + (v % 128) / 32 of hmask[v % 32].
        let high = |i: usize| {
            let v = 32 * p + i;
            (hmask[v % 32] >> (4 * (v / 128) + v % 128 / 32)) & 1 == 1
        };
        high_plane(&mut pair[64..], j, high);
    }
}

/// Row `j`'s Q4_K or Q5_K block `src` (as stored) into the packed block `dst`.
pub(super) fn q4k_q5k_row(kind: Kind, dst: &mut [u8], j: usize, src: &[u8]) {
    fields(dst, j, src, 0, 2);
    let (sc, mn) = q4k_scales(src[4..16].try_into().expect("12 bytes of scales"));
    for s in 0..8 {
        dst[Q4K_SCALES + ROWS * s + j] = sc[s];
        dst[Q4K_MINIMA + ROWS * s + j] = mn[s];
    }
    let (qh, qs) = match kind {
        Kind::Q5K => (&src[16..48], &src[48..176]),
        _ => (&src[..0], &src[16..144]),
    };
    // Stored, value 32 s + l of a block is nibble s % 2 of byte 32 (s / 2) + l.
    let value = |s: usize, l: usize| (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
    for s in 0..8 {
        let sub = &mut dst[Q4K_VALUES + sub_bytes(kind) * s..][..sub_bytes(kind)];
        for (w, t) in (0..16).map(|v| (v / 4, v % 4)) {
            sub[32 * w + 4 * j + t] = value(s, 4 * w + t) | (value(s, 16 + 4 * w + t) << 4);
        }
        if kind == Kind::Q5K {
            // Value 32 s + l's fifth bit: bit s of qh[l].
            high_plane(&mut sub[128..], j, |l| (qh[l] >> s) & 1 == 1);
        }
    }
}
