//! Gemma 3: RMSNorm on each head of Q and K, norms on attention's and the
//! MLP's outputs as well as their inputs, a GELU-gated MLP (GeGLU, GELU's
//! tanh form), the embedding scaled by sqrt(hidden), heads of the
//! metadata's `key_length` (256 at 270M, wider than hidden / heads), and
//! sliding-window attention on five layers of every six, with a rotary
//! base of their own (llama.cpp's `models/gemma3.cpp`; transformers'
//! `Gemma3TextConfig`: `sliding_window_pattern` 6, `rope_local_base_freq`
//! 10 000, `hidden_activation` "gelu_pytorch_tanh"). llama.cpp's converter
//! stores the norms' scales as 1 + w, so they multiply as stored.
//!
//! Candle's model, candle-transformers' `quantized_gemma3` (0.11.1), gates
//! its MLP with SiLU (its issue 3745; PR 3747 open), applies no window at one
//! token, and in a prompt lets a query see one key more than its window
//! (`j + w < i` masked, where llama.cpp masks `i - j >= w`): its rows compute
//! another function than the file's, and say so ([`CANDLE_CAVEAT`]).

use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_gemma3::ModelWeights;

use super::{Activation, CandleForward, Features, ReadSeek};
use crate::model::Local;

pub const FEATURES: Features = Features {
    name: "gemma3",
    qkv_bias: false,
    qk_norm: true,
    sandwich_norms: true,
    activation: Activation::GeluTanh,
    embed_scale: true,
    permuted_qk: false,
    key_length: true,
};

/// Every sixth layer is global (transformers' `sliding_window_pattern`).
const EVERY: usize = 6;
/// The local layers' rotary base (`rope_local_base_freq`).
const LOCAL_THETA: f64 = 10_000.0;

/// Gemma's documented chat turns (the Gemma 3 model card's prompt format,
/// as llama.cpp's built-in "gemma" template writes them), for files without
/// a template: one user turn, then the model's; no `<bos>`, which the
/// tokenizer adds (`tokenizer.ggml.add_bos_token`).
pub const TURNS: (&str, &str) = (
    "Gemma's turn format",
    "{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n\
     {{ m['content'] | trim }}<end_of_turn>\n{% endfor %}\
     {% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
);

pub const CANDLE_CAVEAT: &str = "candle-transformers 0.11.1's quantized_gemma3 gates the MLP \
    with SiLU where Gemma 3 uses GELU (candle issue 3745), applies no sliding window at one \
    token and one key more than the window in a prompt: its answer is not the model's";

pub(super) fn local(window: Option<usize>, theta: Option<f64>) -> Option<Local> {
    window.map(|window| Local {
        window,
        every: EVERY,
        rope_theta: theta.unwrap_or(LOCAL_THETA),
    })
}

pub(super) fn load(
    content: Content,
    r: &mut dyn ReadSeek,
    device: &Device,
) -> Result<ModelWeights> {
    Ok(ModelWeights::from_gguf(content, &mut &mut *r, device)?)
}

impl CandleForward for ModelWeights {
    fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        // quantized_gemma3 drops its cache at position 0. Several tokens
        // after cached ones make its mask of two dtypes (f32 zeros for the
        // cache, u32 for the tokens), which `cat` refuses: said in one line.
        if pos > 0 && x.dim(1)? > 1 {
            candle_core::bail!(
                "candle-transformers' quantized_gemma3 (0.11.1) cannot run several tokens \
                 after cached ones (its mask at an offset joins f32 and u32 tensors)"
            );
        }
        ModelWeights::forward(self, x, pos)
    }
}
