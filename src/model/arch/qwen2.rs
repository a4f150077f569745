//! Qwen 2 and 2.5: a Llama whose Q, K and V projections add a bias, its rows
//! as the checkpoint had them (rotating halves), rotary base 1e6 in the
//! released models. Candle's model: candle-transformers' `quantized_qwen2`.

use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_qwen2::ModelWeights;

use super::{Activation, CandleForward, Features, ReadSeek};

pub const FEATURES: Features = Features {
    name: "qwen2",
    qkv_bias: true,
    qk_norm: false,
    sandwich_norms: false,
    activation: Activation::Silu,
    embed_scale: false,
    permuted_qk: false,
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
        // quantized_qwen2 drops its cache at position 0.
        ModelWeights::forward(self, x, pos)
    }
}
