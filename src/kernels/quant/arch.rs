//! The quantized dot products, one folder per instruction set, as ggml's
//! `ggml-cpu/arch/{x86,arm}/` and Candle's `avx.rs`/`neon.rs` split them:
//! [`portable`] (plain integer arithmetic, for any CPU, and what the vector
//! tiers are tested against) and, on x86-64, `x86` (AVX2, AVX-VNNI and
//! AVX512-VNNI, picked at run time by [`super::QuantTier`]). Inside each,
//! a block type's kernels sit in the file of the same name:
//!
//! | file | types | weights |
//! | --- | --- | --- |
//! | `q32.rs` | Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 | repacked eight rows at a time ([`super::packed`]); x86's `wide.rs` takes two groups in 512 bits |
//! | `q2k_q3k.rs` | Q2_K, Q3_K | repacked, sub-blocks of 16 values |
//! | `q4k_q5k.rs` | Q4_K, Q5_K | repacked, sub-blocks of 32 values |
//! | `q6k.rs` | Q6_K | as stored, a row at a time |
//!
//! x86's `walk.rs` holds the instruction sets' entry points and the walk
//! over a pass's weight rows; [`portable`] holds the portable walk. A new
//! block type gets its layout in `blocks.rs` (and `packed.rs` if it is
//! repacked), and its kernels in one file of each folder, named as here.

pub(super) mod portable;
#[cfg(target_arch = "x86_64")]
pub(super) mod x86;
