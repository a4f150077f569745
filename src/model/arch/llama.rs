//! Llama (Llama 2 and 3, SmolLM, TinyLlama...): the decoder the others are
//! told apart from. llama.cpp's converter permutes Q's and K's rows per head
//! (`convert_hf_to_gguf.py`, `LlamaModel.permute`), so a GGUF Llama rotates
//! interleaved pairs. Candle's model: candle-transformers' `quantized_llama`.

use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;

use super::{Activation, CandleForward, Features, ReadSeek};

pub const FEATURES: Features = Features {
    name: "llama",
    qkv_bias: false,
    qk_norm: false,
    sandwich_norms: false,
    activation: Activation::Silu,
    embed_scale: false,
    permuted_qk: true,
    key_length: false,
};

pub(super) fn load(
    content: Content,
    r: &mut dyn ReadSeek,
    device: &Device,
) -> Result<ModelWeights> {
    Ok(ModelWeights::from_gguf(content, &mut &mut *r, device)?)
}

impl CandleForward for ModelWeights {
    fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        // A new sequence at position 0: quantized_llama drops its cache there.
        ModelWeights::forward(self, x, pos)
    }
}
