//! Qwen 3: no biases, an RMSNorm on each head of Q and K before rotary
//! (`attn_q_norm`, `attn_k_norm`), heads wider than hidden / heads (the
//! metadata's `key_length`). Candle's model: candle-transformers'
//! `quantized_qwen3` (on the CPU its own fused attention over a cache of
//! its own, its rotary tables in the metadata's `general.dtype`, f16 when
//! absent).

use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_qwen3::ModelWeights;

use super::{Activation, CandleForward, Features, ReadSeek};

pub const FEATURES: Features = Features {
    name: "qwen3",
    qkv_bias: false,
    qk_norm: true,
    sandwich_norms: false,
    activation: Activation::Silu,
    embed_scale: false,
    permuted_qk: false,
    key_length: true,
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
        // quantized_qwen3 keeps its cache across calls whatever the offset:
        // a new sequence clears it.
        if pos == 0 {
            self.clear_kv_cache();
        }
        // On the CPU its cache is one sequence's (a fused decode over raw
        // slices; the tensor cache it would fall back to is never made, and
        // unwrapping it panics): a batch is refused, in one line.
        if x.dim(0)? > 1 && x.device().is_cpu() {
            candle_core::bail!(
                "candle-transformers' quantized_qwen3 decodes one sequence at a time on the \
                 CPU (its fused attention's cache holds one): a batch runs on the suite's \
                 kernels (--kernels lab)"
            );
        }
        ModelWeights::forward(self, x, pos)
    }
}
