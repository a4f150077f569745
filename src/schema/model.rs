//! A model as a result records it: its file or shape, its architecture and
//! sizes, how it is stored ([`ModelInfo`], the `model` of `generate`'s body).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the weights came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WeightSource {
    /// A GGUF file's own weights.
    File,
    /// Seeded random weights (never zeros) at a named shape: speed and memory
    /// only, no claim about text.
    Random,
}

/// How a random model's `name` begins: what follows is the shape it has.
pub const RANDOM_NAME_PREFIX: &str = "random weights at the shape of ";

/// The model: its file or shape, its architecture's sizes, how it is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelInfo {
    pub source: WeightSource,
    /// GGUF's `general.architecture`: llama, qwen2, qwen3, gemma3 (2.9;
    /// llama before).
    #[serde(default = "llama")]
    pub architecture: String,
    /// The file's quantization as llama.cpp names it ("Q4_K_M", from
    /// `general.file_type`, else its layers' main type); null for random
    /// weights (2.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
    /// The GGUF file's name (not its path: that is the machine's); null for
    /// random weights.
    pub file: Option<String>,
    pub file_bytes: Option<u64>,
    /// The named shape (`llama-3.2-1b`) of random weights; null for a file.
    pub shape: Option<String>,
    /// general.name of the file, or [`RANDOM_NAME_PREFIX`] and the shape's
    /// name.
    pub name: String,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    pub head_dim: usize,
    pub mlp: usize,
    pub vocab: usize,
    /// Positions the model takes (the file's context length, capped by what
    /// the quantized path's rotary tables hold).
    pub context: usize,
    pub rope_theta: f64,
    pub rms_eps: f64,
    /// The output projection is the token embedding (no output.weight).
    pub tied_embeddings: bool,
    /// Keys a query sees on the sliding-window layers, and how often a
    /// layer is global (Gemma 3: 512, every 6th); null without (2.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindow>,
    /// Weights, embedding and norms included.
    pub params: u64,
    /// The tensors by stored type: GGUF's own mix (Q4_1 layers, a Q8_0
    /// embedding, F32 norms), or f32 for random weights.
    pub stored: Vec<StoredType>,
    /// How Q and K's rows are laid out for rotary embedding, and what the
    /// float path does about it.
    pub rotary_layout: String,
}

fn llama() -> String {
    "llama".into()
}

/// A model's sliding-window layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlidingWindow {
    /// Keys a query sees: its own position and the ones before it.
    pub window: usize,
    /// Every `global_every`-th layer attends to all positions.
    pub global_every: usize,
    /// The local layers' rotary base.
    pub rope_theta: f64,
}

/// One stored tensor type and how much of the model it holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredType {
    /// GGUF's name of the type: "Q4_1", "Q8_0", "F32".
    pub ggml_type: String,
    pub tensors: usize,
    pub bytes: u64,
}

impl ModelInfo {
    /// How the model is told apart: its file, or its shape, or its name.
    pub fn key(&self) -> &str {
        self.file
            .as_deref()
            .or(self.shape.as_deref())
            .unwrap_or(&self.name)
    }
}
