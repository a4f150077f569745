//! A model's rows as the experiments that run a whole model share them
//! (`generate`, `scaling`): what a `--dtypes` value asks for ([`RowKind`]),
//! the checked run the flags make ([`setup`], [`Config`]), the weights made
//! once and each row's model loaded on its device ([`load`]: candle-
//! transformers' quantized model, or the suite's decoder on either kernel
//! set), and what a row is held against ([`bounds`]: the bandwidth ladder,
//! the compute peak measured in the run). Each experiment times its own
//! tests on these.

pub mod bounds;
pub mod load;
pub mod setup;

use std::fmt;

use anyhow::{bail, Result};
use candle_core::quantized::GgmlDType;

use crate::clock::Plan;
use crate::memory::fits::Need;
use crate::model::gguf::{type_name, READ_TYPES};
use crate::model::quantize::{check_target, Mix, Quant};
use crate::model::weights::Source;
use crate::model::Config as ModelConfig;
use crate::precision::Precision;
use crate::schema::{KernelChoice, ModelInfo, PromptInfo, SlidingWindow, StoredType, WeightSource};

/// What one row runs: its quantized weights (as stored, one block type, a
/// mixture) on a quantized model, or a float precision on the float path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowKind {
    Quantized(Quant),
    Float(Precision),
}

/// A `--dtypes` value: `stored` (the file's own types), a block type (q4_1,
/// q8_0, q4_k...: every 2-D weight in it), a mixture of llama.cpp's
/// (q4_k_m...), or fp32, tf32, fp16, bf16.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DtypeArg(pub RowKind);

impl std::str::FromStr for DtypeArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let row = |q| Ok(Self(RowKind::Quantized(q)));
        if s == "stored" {
            return row(Quant::Stored);
        }
        // The block types a file may store, by their lowercase GGUF names.
        let mut blocks = READ_TYPES.iter().filter(|t| t.block_size() > 1);
        if let Some(t) = blocks.find(|t| type_name(**t).to_lowercase() == s) {
            return row(Quant::Type(*t));
        }
        if let Some(m) = Mix::ALL.iter().find(|m| m.name() == s) {
            return row(Quant::Mix(*m));
        }
        match s.parse::<Precision>() {
            Ok(p @ (Precision::F32 | Precision::Tf32 | Precision::F16 | Precision::Bf16)) => {
                Ok(Self(RowKind::Float(p)))
            }
            _ => Err(format!(
                "unknown dtype '{s}': expected stored, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, \
                 q4_k, q5_k, q6_k (every weight in that type), q2_k_mix, q3_k_m, q4_k_m, q5_k_m \
                 (llama.cpp's mixtures), fp32, tf32, fp16 or bf16"
            )),
        }
    }
}

impl RowKind {
    /// The row's name in tables and files: "q4_k_m (stored)" for the file's
    /// own types (its quantization as llama.cpp names it), else "q8_0",
    /// "q4_k_m", "fp16".
    pub fn label(self, source: &Source) -> String {
        match (self, source) {
            (Self::Quantized(Quant::Stored), Source::File(f)) => {
                format!("{} (stored)", f.quantization().to_lowercase())
            }
            (Self::Quantized(Quant::Stored), Source::Random { .. }) => "q4_1".into(),
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for RowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quantized(Quant::Stored) => f.write_str("stored"),
            Self::Quantized(Quant::Type(t)) => f.write_str(&type_name(*t).to_lowercase()),
            Self::Quantized(Quant::Mix(m)) => f.write_str(m.name()),
            Self::Float(p) => write!(f, "{p}"),
        }
    }
}

/// The row `kind` is for `source`: a block type a file's layers are stored
/// in is its stored row (nothing requantized); a file stored as floats has
/// no stored quantized row (its stored row is its float precision).
fn resolve(kind: RowKind, source: &Source) -> RowKind {
    let Source::File(f) = source else {
        return match kind {
            // Random weights are stored f32: their "stored" row is Q4_1.
            RowKind::Quantized(Quant::Type(GgmlDType::Q4_1)) => RowKind::Quantized(Quant::Stored),
            k => k,
        };
    };
    match kind {
        RowKind::Quantized(Quant::Type(t)) if f.uniform(t) => RowKind::Quantized(Quant::Stored),
        // A file of that mixture (general.file_type says so) is its stored row.
        RowKind::Quantized(Quant::Mix(m)) if f.quantization().eq_ignore_ascii_case(m.name()) => {
            RowKind::Quantized(Quant::Stored)
        }
        RowKind::Quantized(Quant::Stored) => match f.layer_type() {
            GgmlDType::F16 if f.uniform(GgmlDType::F16) => RowKind::Float(Precision::F16),
            GgmlDType::BF16 if f.uniform(GgmlDType::BF16) => RowKind::Float(Precision::Bf16),
            GgmlDType::F32 if f.uniform(GgmlDType::F32) => RowKind::Float(Precision::F32),
            _ => kind,
        },
        k => k,
    }
}

/// The rows a run makes: the flags' in their order, each once, or by
/// default the file's stored types (Q4_1 for random weights), q8_0, fp32,
/// tf32 (on a GPU), fp16, bf16.
pub fn rows(flags: &[DtypeArg], source: &Source, on_cuda: bool) -> Result<Vec<RowKind>> {
    let stored = RowKind::Quantized(Quant::Stored);
    let wanted: Vec<RowKind> = if flags.is_empty() {
        let mut v = vec![
            stored,
            RowKind::Quantized(Quant::Type(GgmlDType::Q8_0)),
            RowKind::Float(Precision::F32),
        ];
        if on_cuda {
            v.push(RowKind::Float(Precision::Tf32));
        }
        v.extend([
            RowKind::Float(Precision::F16),
            RowKind::Float(Precision::Bf16),
        ]);
        v
    } else {
        flags.iter().map(|f| f.0).collect()
    };
    let mut out = Vec::new();
    for r in wanted.into_iter().map(|r| resolve(r, source)) {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if !on_cuda && out.contains(&RowKind::Float(Precision::Tf32)) {
        bail!("--dtypes tf32: a cuBLAS GEMM mode, it needs a CUDA device (on the CPU it would be a plain fp32 row)");
    }
    for r in &out {
        if let RowKind::Quantized(Quant::Type(t)) = r {
            check_target(source.config(), *t)?;
        }
    }
    Ok(out)
}

/// What a `generate` run asks for, checked before any work.
#[derive(Debug)]
pub struct Config {
    pub rows: Vec<RowKind>,
    /// Whose kernels the rows run with (`both`: each twice).
    pub kernels: KernelChoice,
    pub plan: Plan,
    /// Tokens of one pp test.
    pub pp_tokens: usize,
    /// Tokens of one tg test and of the answer.
    pub tg_tokens: usize,
    pub seed: u64,
    /// The formatted prompt's ids (random weights: made-up ids).
    pub prompt_ids: Vec<u32>,
    pub prompt: PromptInfo,
    /// Ids that end an answer.
    pub eos: Vec<u32>,
    /// The token a tg test starts from (llama-bench: BOS where the model has
    /// one, else any token).
    pub start_token: u32,
    /// The bandwidth ladder's largest footprint in bytes (`--ladder-max-mib`).
    pub ladder_max: Option<u64>,
}

impl Config {
    /// Refuses what the model cannot take: a prompt (or a pp test, or the
    /// answer after the prompt) longer than its context.
    pub fn check(&self, d: &ModelConfig) -> Result<()> {
        let answer = self.prompt_ids.len() + self.tg_tokens;
        if answer > d.context {
            bail!(
                "the prompt is {} tokens and --tokens {}: {answer} positions, longer than the \
                 model's context of {}",
                self.prompt_ids.len(),
                self.tg_tokens,
                d.context
            );
        }
        for (flag, n) in [
            ("--pp-tokens", self.pp_tokens),
            ("--tokens", self.tg_tokens),
        ] {
            if n > d.context {
                bail!(
                    "{flag} {n}: longer than the model's context of {}",
                    d.context
                );
            }
        }
        if self.prompt_ids.is_empty() {
            bail!("the prompt gives no tokens");
        }
        Ok(())
    }
}

/// Made-up prompt ids for random weights (no tokenizer: ids stand for text).
pub fn random_ids(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    (0..n as u64)
        .map(|i| ((seed.wrapping_add(i).wrapping_mul(2_654_435_761) >> 7) % vocab as u64) as u32)
        .collect()
}

/// The model's facts for the result.
pub fn model_info(source: &Source) -> ModelInfo {
    let d = source.config();
    let (source_kind, file, file_bytes, shape, name, stored) = match source {
        Source::File(f) => (
            WeightSource::File,
            f.path.file_name().map(|n| n.to_string_lossy().into_owned()),
            Some(f.bytes),
            None,
            f.name.clone(),
            f.stored()
                .into_iter()
                .map(|(t, (n, b))| StoredType {
                    ggml_type: t,
                    tensors: n,
                    bytes: b,
                })
                .collect(),
        ),
        Source::Random { shape, .. } => (
            WeightSource::Random,
            None,
            None,
            Some(shape.name.to_string()),
            format!("{}{}", crate::schema::RANDOM_NAME_PREFIX, shape.of),
            vec![StoredType {
                ggml_type: "F32".into(),
                tensors: d.tensors().len(),
                bytes: d.params() * 4,
            }],
        ),
    };
    let quantization = match source {
        Source::File(f) => Some(f.quantization()),
        Source::Random { .. } => None,
    };
    ModelInfo {
        source: source_kind,
        architecture: d.arch.name().into(),
        quantization,
        file,
        file_bytes,
        shape,
        name,
        layers: d.layers,
        hidden: d.hidden,
        heads: d.heads,
        kv_heads: d.kv_heads,
        head_dim: d.head_dim,
        mlp: d.mlp,
        vocab: d.vocab,
        context: d.context,
        rope_theta: d.rope_theta,
        rms_eps: d.rms_eps,
        tied_embeddings: d.tied,
        sliding_window: d.local.as_ref().map(|w| SlidingWindow {
            window: w.window,
            global_every: w.every,
            rope_theta: w.rope_theta,
        }),
        params: d.params(),
        stored,
        rotary_layout: crate::model::decoder::rotary_layout(d).into(),
    }
}

/// What must fit: the largest row's weights and cache on the device, and on
/// the host the weights in f32 made once for every row (when a row needs
/// them: [`needs_f32`]) beside that row's weights made once more
/// (its quantized GGUF, or a file's tensors before they move).
pub fn needs(source: &Source, cfg: &Config) -> Vec<Need> {
    let d = source.config();
    // Bytes per weight of a quantized row: its widest type (Q8_0's at most,
    // a mixture's or a file's own included; F16 where a fallback gives it).
    let per_elem = |r: &RowKind| -> f64 {
        match r {
            RowKind::Quantized(Quant::Type(t)) => t.type_size() as f64 / t.block_size() as f64,
            RowKind::Quantized(_) => 2.0,
            RowKind::Float(p) => p.dtype().size_in_bytes() as f64,
        }
    };
    let widest = cfg.rows.iter().map(per_elem).fold(0.0, f64::max);
    let embed_f32 = (d.vocab * d.hidden * 4) as u64;
    let weights = (d.params() as f64 * widest) as u64 + embed_f32;
    let made_once = match needs_f32(source, &cfg.rows) {
        true => d.params() * 4,
        false => 0,
    };
    let positions = (cfg.pp_tokens.max(cfg.prompt_ids.len() + cfg.tg_tokens)) as u64;
    let cache = 2 * d.layers as u64 * positions * d.kv_width() as u64 * 4;
    let scores = d.heads as u64 * positions * positions * 4 * 3;
    // The fp32 models held beside the later rows (rows::references): one per
    // fp32 row, when other rows follow.
    let fp32 = RowKind::Float(crate::precision::Precision::F32);
    let held = match (cfg.rows.contains(&fp32), cfg.rows.len() > 1, cfg.kernels) {
        (true, true, KernelChoice::Both) => 2,
        (true, true, _) => 1,
        _ => 0,
    };
    let references = held * (d.params() * 4 + embed_f32 + cache);
    vec![Need {
        what: match source {
            Source::File(f) => format!(
                "{}'s largest row ({} parameters)",
                f.path.file_name().unwrap_or_default().to_string_lossy(),
                d.params()
            ),
            Source::Random { .. } => format!("the model's largest row ({} parameters)", d.params()),
        },
        host_bytes: made_once + weights * 2 + references,
        device_bytes: weights + cache + scores + references,
    }]
}

/// Whether any of `rows` is made from the weights in f32: every row of random
/// weights (stored f32), and a file's float rows and requantized ones.
pub fn needs_f32(source: &Source, rows: &[RowKind]) -> bool {
    match source {
        Source::Random { .. } => !rows.is_empty(),
        Source::File(_) => rows.iter().any(|r| *r != RowKind::Quantized(Quant::Stored)),
    }
}
