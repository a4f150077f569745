//! The float path: the weights dequantized to f32 and cast to the row's
//! dtype, run by `bench::block`'s decoder block stacked into a model.
//!
//! Rotary layout: llama.cpp's converter (convert_hf_to_gguf.py, `permute`)
//! reorders the rows of Q and K so that GGUF's Llama weights rotate
//! interleaved pairs (2i, 2i+1), as llama.cpp's ROPE_TYPE_NORM and
//! candle's `rope_i` do; Hugging Face's checkpoints, transformers and block's
//! model rotate halves (i, i + d/2), `rope`. The loader undoes the
//! permutation on Q and K's rows ([`unpermute`]), as transformers' GGUF
//! loader does, so the float path computes the checkpoint's own layout.

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};

use super::weights::Source;
use super::{Dims, Lm};

/// What the result says about the rotary layout.
pub const ROTARY_LAYOUT: &str = "GGUF's Llama Q and K rows are permuted by llama.cpp's converter \
    to rotate interleaved pairs (2i, 2i+1): the quantized path runs them so (rope_i); the float \
    path undoes the permutation at load and rotates halves (i, i+d/2), as the Hugging Face \
    checkpoint and transformers do";

/// (bytes held, bytes per token) of a float row in `dtype`.
pub fn bytes(d: &Dims, dtype: DType) -> (u64, u64) {
    let e = dtype.size_in_bytes() as u64;
    let matmuls = d.token_matmul_params() * e;
    let embed = if d.tied { 0 } else { (d.vocab * d.hidden) as u64 * e };
    let norms = ((2 * d.layers + 1) * d.hidden) as u64 * e;
    let per_token = crate::bench::decoder::weight_bytes_per_token(d, matmuls, e, e);
    (matmuls + embed + norms, per_token)
}

/// The float model of one row.
pub struct FloatLm {
    device: Device,
}

impl FloatLm {
    pub fn load(_source: &Source, _dtype: DType, _device: &Device) -> Result<Self> {
        bail!("the float path is not built yet")
    }

    pub fn layers(&self) -> usize {
        0
    }

    pub fn project(&self, _layer: usize, _which: usize, _x: &Tensor) -> Result<Tensor> {
        bail!("the float path is not built yet")
    }

    pub fn head(&self, _x: &Tensor) -> Result<Tensor> {
        bail!("the float path is not built yet")
    }
}

impl Lm for FloatLm {
    fn forward(&mut self, _tokens: &[u32], _pos: usize) -> Result<Tensor> {
        bail!("the float path is not built yet")
    }

    fn device(&self) -> &Device {
        &self.device
    }
}
