//! The body of `scaling`: one model's cost as its work grows, per precision
//! and kernel set, along three axes: generation at a context depth (tokens
//! already in the KV cache, as llama-bench's `-d`), prompt processing at a
//! prompt length, and decode of B sequences in lockstep (a batch, as
//! llama.cpp's `llama-batched-bench`). Every point is held against its own
//! roofline: the bytes a step must read (the weights once, and the KV cache
//! it attends to) at the bandwidth ladder's read of that footprint, and the
//! FLOPs it must do at the compute peak this run measured for the row; the
//! lower of the two binds it. A batch's predicted ridge (where the memory
//! line, rising with B, meets the flat compute ceiling) stands beside the
//! measured knee; the KV cache's bytes per token give how many sequences fit
//! beside the weights.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::model::ModelInfo;
use super::rows::{Clock, Pairing, TimedRow, Timing};
use super::{Bound, KernelChoice, Ladder, RowStatus, Timed, TokenOpClass, LAB_SUFFIX};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingResults {
    pub model: ModelInfo,
    /// Context depths of the depth axis (`--depth`): tokens in the cache
    /// before a point's tests.
    pub depths: Vec<usize>,
    /// Prompt lengths of the prompt axis (`--pp-tokens`).
    pub pp_tokens: Vec<usize>,
    /// Sequences decoding together on the batch axis (`--batch`).
    pub batches: Vec<usize>,
    /// Tokens a tg test generates per sequence (`--tokens`).
    pub tg_tokens: usize,
    /// Tokens of each sequence's prompt before a batch's decode; and of the
    /// pp test at each depth.
    pub batch_prompt_tokens: usize,
    pub warmup: usize,
    pub iters: usize,
    pub seed: u64,
    /// Whose kernels the rows ran with (`both`: each precision twice).
    pub kernels: KernelChoice,
    /// The bandwidth ladder's points the rows were held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// The KV cache's bytes per token (every layer's keys and values) at
    /// each precision a cache can be kept in.
    pub kv_cache: Vec<KvCacheBytes>,
    /// The device's memory the capacity lines are computed from (the GPU's
    /// total, or the host's RAM); null where it cannot be read.
    pub device_memory_bytes: Option<u64>,
    pub rows: Vec<ScalingRow>,
    /// What the run could not measure, and why.
    pub notes: Vec<String>,
}

/// A KV cache's size per token at one precision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KvCacheBytes {
    /// "fp32", "fp16", "bf16".
    pub precision: String,
    /// 2 (keys, values) x layers x key/value heads x head width x bytes.
    pub bytes_per_token: u64,
}

/// One precision on one kernel set: measured, or failed with its error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingRow {
    /// As generate names it: "q4_1 (stored)", "fp16 (lab kernels)".
    pub precision: String,
    pub kernels: KernelChoice,
    pub status: RowStatus,
    pub error: Option<String>,
    pub measured: Option<ScalingMeasured>,
}

/// A row's points and what they add up to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingMeasured {
    /// Bytes the row's weights hold, and bytes one step reads of them.
    pub weight_bytes: u64,
    pub weight_bytes_per_token: u64,
    /// The precision the row's KV cache is kept in ("fp32" for a quantized
    /// row: its activations are f32), and its bytes per token.
    pub kv_precision: String,
    pub kv_bytes_per_token: u64,
    /// The compute ceiling of every point: the product this run measured for
    /// the row (its precision's GEMM, or its block type's product on its
    /// kernels; its fastest sample, twice, the higher kept), or where its
    /// matmuls ran faster inside a timed step, theirs, GFLOP/s, and what it
    /// was measured on ("..., its matmuls inside a timed step").
    pub compute_peak_gflop_per_s: f64,
    pub compute_peak_of: String,
    pub points: Vec<ScalingPoint>,
    /// The batch axis' ridge, where it has a point at batch 1.
    pub ridge: Option<Ridge>,
    /// Sequences of the model's context that fit beside the weights.
    pub capacity: Option<Capacity>,
    /// Each sequence of the largest batch gave the greedy tokens it gives
    /// decoded alone (null: no batch above 1).
    pub batch_matches_alone: Option<bool>,
    /// The first token after the deepest depth's cache is the one a pass over
    /// the whole context from scratch gives (null: no depth above 0).
    pub depth_matches_scratch: Option<bool>,
    /// Points the row's model could not run, and why (candle's Gemma 3 runs
    /// no prompt after cached tokens).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Which question a point answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// tg (and pp) after `depth` tokens in the cache.
    Depth,
    /// pp of `pp_tokens` from an empty cache.
    Prompt,
    /// tg of `batch` sequences in lockstep.
    Batch,
}

/// What a point times: a prompt's pass, or generated tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    Pp,
    Tg,
}

/// One point: a test at a depth, prompt length and batch, against its bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScalingPoint {
    pub axis: Axis,
    pub test: Test,
    /// Tokens in the cache before the test.
    pub depth: usize,
    /// Tokens of a pp test (0 for tg).
    pub pp_tokens: usize,
    /// Sequences in the step.
    pub batch: usize,
    /// Tokens one sample makes (pp: its prompt's; tg: batch x tokens).
    pub tokens: usize,
    pub timed: Timed,
    /// Tokens per second of the median sample, every sequence's together,
    /// and of the slowest and fastest sample.
    pub tokens_per_s: f64,
    pub tokens_per_s_min: f64,
    pub tokens_per_s_max: f64,
    /// tokens_per_s / batch: what one sequence sees.
    pub per_sequence_tokens_per_s: f64,
    /// Bytes a step must read (the weights once, and the KV cache its
    /// tokens attend to, on average over the test) and its tokens.
    pub bytes_per_step: u64,
    pub tokens_per_step: usize,
    /// FLOPs per token (the matmuls', attention's at the point's context).
    pub flops_per_token: f64,
    /// The ladder's read at the step's footprint.
    pub memory: Bound,
    /// memory GB/s x tokens per step / bytes per step.
    pub memory_bound_tokens_per_s: f64,
    /// The row's compute peak / FLOPs per token.
    pub compute_bound_tokens_per_s: f64,
    /// The lower of the two.
    pub bound_tokens_per_s: f64,
    /// "memory (DRAM)", "memory (L2)", or "compute".
    pub bound_by: String,
    pub pct_of_bound: f64,
    /// Memory the point's test held above what the device held before the
    /// row (the KV cache, activations), where the device can say.
    pub peak_bytes: Option<u64>,
    /// Where a step of a tg point goes, by op class (2.11; the suite's
    /// decoder's rows: candle's models have no spans).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_parts: Option<StepParts>,
}

/// A tg point's step by op class: one more sample of its test, every op
/// class's spans timed (`clock::spans`), per step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepParts {
    /// The spanned sample's time per step, and the clean median's: the
    /// spans' own cost is the difference.
    pub spanned_ms_per_step: f64,
    pub clean_ms_per_step: f64,
    /// The classes the step spent time in, in `TokenOpClass::ALL`'s order.
    pub parts: Vec<StepPart>,
}

/// One op class's share of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepPart {
    pub class: TokenOpClass,
    pub ms_per_step: f64,
    pub calls_per_step: f64,
    /// What the class must read a step over its time: the weights for the
    /// matmuls, the KV cache for attention; null for the others.
    pub gb_per_s: Option<f64>,
    /// What the class computes a step over its time: the matmuls' FLOPs
    /// (every sequence's projections and head); null for the others.
    pub gflop_per_s: Option<f64>,
}

/// Where decode turns from memory-bound to compute-bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ridge {
    /// The batch at which the memory line (batch x batch 1's memory bound)
    /// meets the compute ceiling: compute bound / memory bound at batch 1.
    pub predicted_batch: f64,
    /// The batch at which batch 1's measured rate, grown linearly, would
    /// reach the best rate measured: best / batch 1's.
    pub measured_knee_batch: f64,
    /// The best aggregate rate measured, at which batch, and its share of
    /// the compute bound.
    pub best_tokens_per_s: f64,
    pub best_batch: usize,
    pub best_pct_of_compute: f64,
}

/// How many sequences of a context fit beside the weights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Capacity {
    /// The model's context length (tokens a sequence may hold).
    pub context_tokens: usize,
    pub device_bytes: u64,
    pub weight_bytes: u64,
    /// KV bytes of one full sequence: context x bytes per token.
    pub kv_bytes_per_sequence: u64,
    /// (device - weights) / kv bytes per sequence, rounded down.
    pub sequences: u64,
}

impl Axis {
    /// As tables and messages name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Depth => "depth",
            Self::Prompt => "prompt",
            Self::Batch => "batch",
        }
    }
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Self::Pp => "pp",
            Self::Tg => "tg",
        }
    }
}

impl ScalingPoint {
    /// The point in a message: "tg32 @ d2048", "pp512", "tg32 x b8".
    pub fn name(&self) -> String {
        let n = match self.test {
            Test::Pp => self.pp_tokens,
            Test::Tg => self.tokens / self.batch.max(1),
        };
        let mut s = format!("{}{n}", self.test.name());
        if self.depth > 0 || self.axis == Axis::Depth {
            s.push_str(&format!(" @ d{}", self.depth));
        }
        if self.batch > 1 || self.axis == Axis::Batch {
            s.push_str(&format!(" x b{}", self.batch));
        }
        s
    }
}

impl super::rows::Rows for ScalingResults {
    /// Every point of every row, named by its row and point ("q4_1 (stored)
    /// tg32 @ d2048"), one clock, held against its bound; each pairs as its
    /// own experiment with the model and the point in its name, sized by its
    /// tokens, so that a twin's point pairs with the same point only. A
    /// failed row is one row, its error.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let model = self.model.key();
        let mut out = Vec::new();
        for row in &self.rows {
            let Some(m) = &row.measured else {
                out.push(TimedRow::ran(
                    row.precision.clone(),
                    row.status,
                    Vec::new(),
                    Vec::new(),
                    false,
                ));
                continue;
            };
            for p in &m.points {
                let name = format!("{} {}", row.precision, p.name());
                let pair = Pairing {
                    experiment: format!("scaling {} {model}", p.name()),
                    size: p.tokens as u64,
                    precision: row.precision.clone(),
                    stands_for: row.precision.strip_suffix(LAB_SUFFIX).map(str::to_string),
                    device: None,
                    clock: Clock::of(&p.timed),
                    calls_per_sample: 1,
                };
                let timing = Timing::new(name.clone(), Clock::of(&p.timed));
                out.push(
                    TimedRow::ran(name.clone(), row.status, vec![timing], vec![pair], true)
                        .bounded(format!("scaling {name}"), Some(p.pct_of_bound)),
                );
            }
        }
        out
    }

    fn validate(&self) -> Result<()> {
        let mut names = Vec::new();
        for row in &self.rows {
            match (row.status, &row.measured, &row.error) {
                (RowStatus::Ok, Some(_), None) | (RowStatus::Error, None, Some(_)) => {}
                _ => bail!(
                    "scaling {}: status {:?} disagrees with its measurements and error",
                    row.precision,
                    row.status
                ),
            }
            for p in row.measured.iter().flat_map(|m| &m.points) {
                if p.batch == 0 || p.tokens == 0 {
                    bail!(
                        "scaling {} {}: a point of no tokens",
                        row.precision,
                        p.name()
                    );
                }
                let name = format!("{} {}", row.precision, p.name());
                if names.contains(&name) {
                    bail!("scaling: the point {name} is in the file twice");
                }
                names.push(name);
            }
        }
        Ok(())
    }
}
