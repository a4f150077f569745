//! The architecture seam: what differs between the decoders this suite runs
//! (Llama, Qwen 2, Qwen 3, Gemma 3), said as data ([`Features`]) that one
//! forward pass reads ([`super::layer`]), never as a copy of that pass. A new
//! architecture is one file in `arch/` (its features, its metadata's
//! defaults, and candle-transformers' model of it, the "candle" rows), its
//! variant here, and whatever feature it brings that the layer lacks.
//!
//! | | Llama | Qwen 2 | Qwen 3 | Gemma 3 |
//! | --- | --- | --- | --- | --- |
//! | Q, K, V biases | | yes | | |
//! | RMSNorm on each head of Q and K | | | yes | yes |
//! | norms after attention and the MLP too | | | | yes |
//! | MLP gate | SiLU | SiLU | SiLU | GELU (tanh) |
//! | embedding scaled by sqrt(hidden) | | | | yes |
//! | Q and K rows permuted in the GGUF | yes | | | |
//! | sliding-window layers | | | | 5 of 6 |
//!
//! Sources: llama.cpp's `models/{llama,qwen2,qwen3,gemma3}.cpp` (the
//! files' home runtime) and transformers' modeling files of each.

mod gemma3;
mod llama;
mod qwen2;
mod qwen3;

use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};

/// The decoders the suite runs, by GGUF's `general.architecture`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

/// The MLP's gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) * up (SwiGLU).
    Silu,
    /// gelu(gate) * up with GELU's tanh approximation (GeGLU; transformers'
    /// `gelu_pytorch_tanh`).
    GeluTanh,
}

/// What an architecture's forward pass does beyond a Llama's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// GGUF's `general.architecture`, and its metadata keys' prefix.
    pub name: &'static str,
    /// Q, K and V projections add a bias.
    pub qkv_bias: bool,
    /// Each head of Q and K is RMS-normed (its own scale), before rotary.
    pub qk_norm: bool,
    /// Attention's and the MLP's outputs are normed before their residual
    /// adds (`post_attention_norm`, `post_ffw_norm`), besides their inputs.
    pub sandwich_norms: bool,
    pub activation: Activation,
    /// The embedding's rows are scaled by sqrt(hidden) before the first layer.
    pub embed_scale: bool,
    /// llama.cpp's converter permuted Q's and K's rows within each head so
    /// that they rotate interleaved pairs (2i, 2i+1); the others rotate
    /// halves (i, i + d/2) as stored.
    pub permuted_qk: bool,
    /// The heads' width is the metadata's `attention.key_length` (else
    /// hidden / heads).
    pub key_length: bool,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3];

    pub const fn features(self) -> Features {
        match self {
            Arch::Llama => llama::FEATURES,
            Arch::Qwen2 => qwen2::FEATURES,
            Arch::Qwen3 => qwen3::FEATURES,
            Arch::Gemma3 => gemma3::FEATURES,
        }
    }

    /// GGUF's name ("llama", "gemma3").
    pub const fn name(self) -> &'static str {
        self.features().name
    }

    /// The architecture GGUF calls `name`, if the suite runs it.
    pub fn of_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The names [`Arch::of_name`] takes, for messages.
    pub fn names() -> String {
        let n: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        n.join(", ")
    }

    /// Sliding-window layers as the metadata's window gives them (Gemma 3's
    /// window, which the check requires, every sixth layer global and the
    /// local rotary base: the file's `rope.local_freq_base`, else
    /// transformers' and candle-transformers' 10 000).
    pub fn local(self, window: Option<usize>, local_theta: Option<f64>) -> Option<super::Local> {
        match self {
            Arch::Gemma3 => gemma3::local(window, local_theta),
            _ => None,
        }
    }

    /// The chat format to use when the file has no template (Gemma 3's
    /// documented turns), as a Jinja template, with its name.
    pub fn fallback_template(self) -> Option<(&'static str, &'static str)> {
        match self {
            Arch::Gemma3 => Some(gemma3::TURNS),
            _ => None,
        }
    }

    /// candle-transformers' quantized model of this architecture on the
    /// GGUF `content` (whose metadata the suite wrote from checked sizes),
    /// read from `r` onto `device`.
    pub fn candle(
        self,
        content: Content,
        r: &mut dyn ReadSeek,
        device: &Device,
    ) -> Result<Box<dyn CandleForward>> {
        Ok(match self {
            Arch::Llama => Box::new(llama::load(content, r, device)?),
            Arch::Qwen2 => Box::new(qwen2::load(content, r, device)?),
            Arch::Qwen3 => Box::new(qwen3::load(content, r, device)?),
            Arch::Gemma3 => Box::new(gemma3::load(content, r, device)?),
        })
    }

    /// What candle-transformers' model of this architecture computes
    /// differently from the file's own runtime, said on its rows.
    pub fn candle_caveat(self) -> Option<&'static str> {
        match self {
            Arch::Gemma3 => Some(gemma3::CANDLE_CAVEAT),
            _ => None,
        }
    }
}

/// What candle's GGUF readers read from.
pub trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// One of candle-transformers' quantized models: the last token's logits
/// (batch x vocab) for `x` (batch x tokens) at positions `pos..`, a new
/// sequence at `pos` 0.
pub trait CandleForward {
    fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor>;
}
