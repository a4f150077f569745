//! The GGUF block types the quantized kernels read as they are stored, with
//! their byte layouts. The blocks are Candle's own (`QTensor::data()` borrows
//! them in place, rows of `k / values` blocks one after another); their
//! fields are private to candle-core, so the offsets are written here, after
//! ggml's `ggml-common.h`, and held to the sizes of Candle's block structs at
//! compile time:
//!
//! | type | values | bytes | layout |
//! | --- | --- | --- | --- |
//! | Q8_0 | 32 | 34 | d (f16), 32 x i8 |
//! | Q4_0 | 32 | 18 | d (f16), 16 bytes: value i in the low nibble of byte i, value 16 + i in the high one; w = d (q - 8) |
//! | Q4_1 | 32 | 20 | d, m (f16), the same 16 bytes; w = d q + m |
//! | Q5_0 | 32 | 22 | d (f16), qh (4 bytes, a u32: bit i is value i's fifth bit), Q4_0's 16 bytes of low nibbles; w = d (q - 16) |
//! | Q5_1 | 32 | 24 | d, m (f16), qh, the 16 bytes; w = d q + m |
//! | Q2_K | 256 | 84 | 16 bytes of scales (per 16 values: scale in the low nibble, minimum in the high), 64 bytes of 2-bit values (value 128 h + 32 s + l is bits 2s.. of byte 32 h + l), d, dmin (f16); w = d sc q - dmin mn per 16 |
//! | Q3_K | 256 | 110 | hmask (32 bytes: value 128 h + 32 s + l's third bit is bit 4 h + s of byte l), 64 bytes of low 2 bits (as Q2_K's), 12 bytes of sixteen 6-bit scales, d (f16); w = d (sc - 32) (q - 4) per 16 |
//! | Q4_K | 256 | 144 | d, dmin (f16), 12 bytes of eight 6-bit scales and mins, 128 bytes: chunk c of 32 bytes holds values 64c.. (low nibbles) and 64c + 32.. (high); w = d sc q - dmin mn per 32 |
//! | Q5_K | 256 | 176 | d, dmin, Q4_K's 12 bytes of scales and mins, qh (32 bytes: value 32 s + l's fifth bit is bit s of byte l), Q4_K's 128 bytes of low nibbles; w = d sc q - dmin mn per 32 |
//! | Q6_K | 256 | 210 | 128 bytes of low 4 bits, 64 of high 2 bits, 16 i8 scales (one per 16 values), d (f16); w = d sc (q - 32) |

use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8_0,
};
use candle_core::quantized::GgmlDType;

/// A block type the kernels read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<BlockQ8_0>() == Kind::Q8_0.bytes());
    assert!(size_of::<BlockQ4_0>() == Kind::Q4_0.bytes());
    assert!(size_of::<BlockQ4_1>() == Kind::Q4_1.bytes());
    assert!(size_of::<BlockQ5_0>() == Kind::Q5_0.bytes());
    assert!(size_of::<BlockQ5_1>() == Kind::Q5_1.bytes());
    assert!(size_of::<BlockQ2K>() == Kind::Q2K.bytes());
    assert!(size_of::<BlockQ3K>() == Kind::Q3K.bytes());
    assert!(size_of::<BlockQ4K>() == Kind::Q4K.bytes());
    assert!(size_of::<BlockQ5K>() == Kind::Q5K.bytes());
    assert!(size_of::<BlockQ6K>() == Kind::Q6K.bytes());
};

impl Kind {
    /// The kernels' type for a GGUF type, if they have one.
    pub(super) fn of(t: GgmlDType) -> Option<Kind> {
        Some(match t {
            GgmlDType::Q8_0 => Kind::Q8_0,
            GgmlDType::Q4_0 => Kind::Q4_0,
            GgmlDType::Q4_1 => Kind::Q4_1,
            GgmlDType::Q5_0 => Kind::Q5_0,
            GgmlDType::Q5_1 => Kind::Q5_1,
            GgmlDType::Q2K => Kind::Q2K,
            GgmlDType::Q3K => Kind::Q3K,
            GgmlDType::Q4K => Kind::Q4K,
            GgmlDType::Q5K => Kind::Q5K,
            GgmlDType::Q6K => Kind::Q6K,
            _ => return None,
        })
    }

    /// Bytes per block.
    pub(super) const fn bytes(self) -> usize {
        match self {
            Kind::Q8_0 => 34,
            Kind::Q4_0 => 18,
            Kind::Q4_1 => 20,
            Kind::Q5_0 => 22,
            Kind::Q5_1 => 24,
            Kind::Q2K => 84,
            Kind::Q3K => 110,
            Kind::Q4K => 144,
            Kind::Q5K => 176,
            Kind::Q6K => 210,
        }
    }

    /// Values per block (and per activation block: Q8 or Q8_K).
    pub(super) const fn values(self) -> usize {
        match self {
            Kind::Q8_0 | Kind::Q4_0 | Kind::Q4_1 | Kind::Q5_0 | Kind::Q5_1 => 32,
            Kind::Q2K | Kind::Q3K | Kind::Q4K | Kind::Q5K | Kind::Q6K => 256,
        }
    }

    /// Whether the activations are Q8_K (256-value) blocks.
    pub(super) const fn k_quant(self) -> bool {
        self.values() == 256
    }
}

/// The f16 at `p` as f32.
///
/// # Safety
/// `p` points at two readable bytes.
#[inline(always)]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller's contract; unaligned, as blocks are packed.
    half::f16::from_bits(unsafe { p.cast::<u16>().read_unaligned() }).to_f32()
}

/// Q4_K's eight 6-bit scales and mins from its 12 bytes (ggml's
/// `get_scale_min_k4`): scales 0-3 and mins 0-3 are the low 6 bits of bytes
/// 0-3 and 4-7; scales and mins 4-7 are the nibbles of bytes 8-11, with their
/// top 2 bits from the top bits of bytes 0-3 and 4-7.
#[inline(always)]
pub(super) fn q4k_scales(s: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    (sc, mn)
}

/// Q3_K's sixteen 6-bit scales from their 12 bytes, less the 32 they are
/// stored above (ggml's `kmask1`/`kmask2` unpacking, a byte at a time):
/// scale i's low 4 bits are the low nibble of byte i (i < 8) or the high
/// nibble of byte i - 8, its top 2 bits bits 2 (i / 4).. of byte 8 + i % 4.
#[inline(always)]
pub(super) fn q3k_scales(s: &[u8; 12]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 { s[i] & 15 } else { s[i - 8] >> 4 };
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        // At most 63: the difference is an i8.
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}
