//! The body of `block`: one decoder block of the kind every current LLM stacks
//! (RMSNorm, Q/K/V/O projections, rotary embedding, causal attention, residual
//! adds, RMSNorm, a SwiGLU MLP), timed end to end per phase and precision, with
//! where its time goes by op class, the speedup over fp32 beside the matmul-only
//! speedup and Amdahl's prediction from the parts, fused kernels against the
//! same math from primitive ops, and accuracy against an f64 run.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::{Clock, Pairing, TimedRow, Timing};
use super::{Bound, Ladder, RatioInterval, RowStatus, TimeSource, Timed};
use crate::precision::Precision;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockResults {
    pub shape: BlockShape,
    /// Why these sizes (the device's defaults, or the flags).
    pub sizes_note: String,
    pub warmup: usize,
    pub iters: usize,
    /// Seed of the random weights and inputs (standard normal, scaled).
    pub seed: u64,
    /// Weights of one block: 2 hidden^2 (Q, O) + 2 hidden x kv_width (K, V) +
    /// 3 hidden x mlp, plus the two norms.
    pub params: u64,
    /// The clock every time, share and rate of this body's rows is read from
    /// ([`Timed::rate_ms`]): CUDA events on a GPU, the wall clock on the CPU.
    /// 2.3; absent in older files: read it through [`BlockResults::clock`].
    #[serde(default)]
    pub time_source: Option<TimeSource>,
    /// The largest cache in front of the device's memory (the CPU's last
    /// level, the GPU's L2), for telling whether a row's bytes fit in it (2.3;
    /// null where unknown).
    #[serde(default)]
    pub cache_bytes: Option<u64>,
    /// Before 2.3: one plain device copy (decode's f32 bytes, 32 MiB to 1 GiB)
    /// that every row was held against (GB/s, 10^9 bytes per second). 2.3
    /// files leave it out: each row holds its own, of its own footprint
    /// ([`BlockMeasured::copy_ceiling_gb_per_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_ceiling_gb_per_s: Option<f64>,
    /// Whose kernels the end-to-end rows ran with (`--kernels`; 2.3, absent
    /// before: candle-nn's). The parts and the fused rows are candle-nn's
    /// either way.
    #[serde(default)]
    pub kernels: KernelChoice,
    pub phases: Vec<BlockPhase>,
    /// The bandwidth ladder's points the rows were held against (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// Candle's fused kernels against the same math from primitive ops.
    pub fused: Vec<FusedRow>,
}

/// Whose kernels a block runs with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelChoice {
    /// candle-nn's fused RMSNorm, softmax and rope, Candle's SwiGLU and adds.
    #[default]
    Candle,
    /// The suite's own (`candle_lab::kernels`): RMSNorm with its weight,
    /// softmax, SwiGLU's gate and the residual adds; rope is candle-nn's.
    Lab,
    /// Candle's for the rows, and each row's call timed again with the
    /// suite's right after it, in the same run ([`BlockMeasured::lab_end_to_end`]).
    Both,
}

impl std::str::FromStr for KernelChoice {
    type Err = String;

    /// `--kernels`' values: candle, lab, both.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "candle" => Ok(Self::Candle),
            "lab" => Ok(Self::Lab),
            "both" => Ok(Self::Both),
            _ => Err(format!(
                "unknown kernels '{s}': expected candle, lab or both"
            )),
        }
    }
}

impl KernelChoice {
    pub fn name(self) -> &'static str {
        match self {
            Self::Candle => "candle",
            Self::Lab => "lab",
            Self::Both => "both",
        }
    }
}

/// The block's sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockShape {
    pub batch: usize,
    /// Tokens of a prefill, and the KV cache's length in decode.
    pub seq: usize,
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads, each shared by heads / kv_heads query heads
    /// (grouped-query attention; as many as `heads`: multi-head). 2.3; absent
    /// in older files, whose blocks had as many as `heads`: read it through
    /// [`BlockShape::kv_heads`].
    #[serde(default)]
    pub kv_heads: Option<usize>,
    /// hidden / heads.
    pub head_dim: usize,
    /// The MLP's inner width.
    pub mlp: usize,
    pub rms_eps: f64,
    pub rope_theta: f64,
    /// Tokens whose output is checked against the f64 run (the first ones).
    pub accuracy_seq: usize,
}

impl BlockShape {
    /// Key/value heads: the file's, or as many as `heads` in a file before 2.3.
    pub fn kv_heads(&self) -> usize {
        self.kv_heads.unwrap_or(self.heads)
    }
}

/// Prefill (the whole sequence at once: compute-bound) or decode (one new
/// token against a KV cache of `seq`: every weight read per token).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Prefill,
    Decode,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Self::Prefill => "prefill",
            Self::Decode => "decode",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockPhase {
    pub phase: Phase,
    /// Tokens one block call processes: batch x seq (prefill), batch (decode).
    pub tokens: usize,
    /// Keys the attention reads per query at most: seq (prefill, causal), seq +
    /// 1 (decode: the cache and the new token).
    pub context: usize,
    /// FLOPs of one call, the matmuls' (2 per multiply-add; the element-wise
    /// work is not counted): `model::cost::block_flops`.
    pub flops: f64,
    pub rows: Vec<BlockRow>,
}

/// One precision in one phase: measured, or failed with its error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockRow {
    pub precision: Precision,
    pub status: RowStatus,
    pub error: Option<String>,
    pub measured: Option<BlockMeasured>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockMeasured {
    /// One block call, end to end.
    pub end_to_end: Timed,
    /// With `--kernels both`: the same call end to end with the suite's own
    /// kernels, on the same inputs (2.3; null otherwise), timed in turn with
    /// `end_to_end`, a sample of each at a time (2.4; right after it before).
    #[serde(default)]
    pub lab_end_to_end: Option<Timed>,
    /// `lab_end_to_end`'s median over `end_to_end`'s, by the body's clock:
    /// under 1, the suite's kernels made the layer faster.
    #[serde(default)]
    pub lab_vs_candle: Option<f64>,
    /// Its 95% bootstrap interval (2.4; null with under 3 samples a side:
    /// the ratio then gives a direction only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab_vs_candle_interval: Option<RatioInterval>,
    /// The least one call moves: every weight once, the input and output, the
    /// keys and values written (prefill), or the cache read and the new
    /// token's written into it (decode: a preallocated cache, nothing cached
    /// is copied): `model::cost::block_bytes`.
    pub bytes_min: u64,
    /// Tokens per second through this one layer (one block call): the
    /// phase's tokens over the end-to-end median of the body's clock. Not a
    /// model's speed: a model of n such layers takes at least n times as long
    /// per token, before its embedding and output head.
    pub tokens_per_s: f64,
    pub gflop_per_s: f64,
    /// bytes_min over the end-to-end median of the body's clock.
    pub gb_per_s: f64,
    /// The ceiling's footprint: in 2.3 a plain device copy between two
    /// buffers of bytes_min / 2 each; from 2.4 the footprint of the ladder
    /// point the bound was read at (the row's, or a larger one the run read
    /// faster: a footprint is never slower than a larger one). Null where not
    /// measured.
    #[serde(default)]
    pub copy_bytes: Option<u64>,
    /// That copy's rate in this run, by the body's clock (GB/s; 2.3).
    #[serde(default)]
    pub copy_ceiling_gb_per_s: Option<f64>,
    /// gb_per_s as a percentage of the row's copy ceiling (before 2.3: of the
    /// body's one `copy_ceiling_gb_per_s`; 2.4: of `bound`).
    pub pct_of_copy_ceiling: Option<f64>,
    /// The ladder's point the row is held against (2.4): its read (a block
    /// reads its weights, and decode its cache, and writes little) at the
    /// row's footprint, the faster of one thread and the pool's; then
    /// `copy_bytes` is its footprint and `copy_ceiling_gb_per_s` its rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// Peak memory during the end-to-end samples above the use before the
    /// block's inputs (the weights, made before, not included).
    pub peak_bytes: Option<u64>,
    /// Each op class timed alone at the block's shapes, per block call.
    pub parts: Vec<BlockPart>,
    /// The parts' medians (by the body's clock) added up, against the
    /// end-to-end median by the same clock.
    pub parts_sum_ms: f64,
    /// The matmul classes' (linear and attention) share of the parts' sum.
    pub matmul_share: f64,
    /// End to end: fp32's median over this row's (null without an fp32 row);
    /// from `fp32_beside` where the row has it.
    pub speedup_vs_fp32: Option<f64>,
    /// The fp32 block's call end to end (the same kernels as `end_to_end`),
    /// timed in turn with this row's (2.5): what `speedup_vs_fp32` divides,
    /// side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp32_beside: Option<Timed>,
    /// `speedup_vs_fp32`'s 95% bootstrap interval, from `fp32_beside` (2.5;
    /// null under 3 samples a side or without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_vs_fp32_interval: Option<RatioInterval>,
    /// The same for the matmul classes alone, at the same shapes.
    pub matmul_speedup_vs_fp32: Option<f64>,
    /// Amdahl's law: 1 / ((1 - f) + f / s), with f fp32's matmul share and s
    /// this row's matmul-only speedup: what the block would gain if only its
    /// matmuls changed.
    pub amdahl_speedup_vs_fp32: Option<f64>,
    pub accuracy: BlockAccuracy,
}

/// What one class of operations costs in one block call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockPart {
    pub class: OpClass,
    /// Calls of the class in one block call.
    pub calls: usize,
    #[serde(flatten)]
    pub timed: Timed,
}

/// The block's operations by class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    /// Q, K, V, O projections and the MLP's gate, up and down.
    Linear,
    /// Q K^T and the weights times V.
    AttentionMatmul,
    /// The two RMSNorms.
    Norm,
    Softmax,
    /// Rotary embedding of Q and K.
    Rotary,
    /// Residual adds, SiLU and the gate's product, the scale and the causal
    /// mask, and the copies that lay heads out (transposes, the cache's concat).
    Elementwise,
}

impl OpClass {
    pub const ALL: [OpClass; 6] = [
        Self::Linear,
        Self::AttentionMatmul,
        Self::Norm,
        Self::Softmax,
        Self::Rotary,
        Self::Elementwise,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Linear => "linear",
            Self::AttentionMatmul => "attention matmul",
            Self::Norm => "norm",
            Self::Softmax => "softmax",
            Self::Rotary => "rotary",
            Self::Elementwise => "element-wise",
        }
    }

    /// Whether the class is matmuls (the part precision speeds up most).
    pub fn is_matmul(self) -> bool {
        matches!(self, Self::Linear | Self::AttentionMatmul)
    }
}

/// The block's output against an f64 run of the same weights and inputs on the
/// CPU: |y - y_f64| / rms(y_f64), over the first `tokens_checked` tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockAccuracy {
    pub tokens_checked: usize,
    pub max_rel_err: f64,
    pub mean_rel_err: f64,
}

/// A fused kernel against the same math from primitive ops, at the block's
/// shapes, in one precision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FusedRow {
    pub op: FusedOp,
    pub precision: Precision,
    /// What the fused call is (`candle_nn::ops::rms_norm`).
    pub fused_call: String,
    /// What the composed one is (`candle_nn::ops::rms_norm_slow`).
    pub composed_call: String,
    pub fused: Timed,
    pub composed: Timed,
    /// The least the fused kernel moves: its inputs read once, its output
    /// written once.
    pub fused_bytes: u64,
    /// What the primitive ops move, each reading its inputs and writing its
    /// output as a tensor of its own.
    pub composed_bytes: u64,
    /// composed median over fused median, both by the body's clock (2.0: the
    /// fused kernel is twice as fast; wall-clock medians before 2.3).
    pub composed_over_fused: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FusedOp {
    RmsNorm,
    Softmax,
    Rope,
}

impl FusedOp {
    pub const ALL: [FusedOp; 3] = [Self::RmsNorm, Self::Softmax, Self::Rope];

    pub fn name(self) -> &'static str {
        match self {
            Self::RmsNorm => "rms_norm",
            Self::Softmax => "softmax",
            Self::Rope => "rope",
        }
    }
}

impl BlockResults {
    /// The clock this body's times and rates are read from: the file's, or
    /// in a file before 2.3 the one its rates were computed with (CUDA events
    /// where its rows have them, else the wall clock).
    pub fn clock(&self) -> TimeSource {
        self.time_source.unwrap_or_else(|| {
            self.phases
                .iter()
                .flat_map(|p| &p.rows)
                .find_map(|r| r.measured.as_ref())
                .map_or(TimeSource::MedianMs, |m| m.end_to_end.rate_ms().1)
        })
    }
}

impl super::rows::Rows for BlockResults {
    /// Every phase's rows, named "prefill fp32" and timed end to end; each
    /// phase pairs as its own experiment ("block prefill"), so that prefill
    /// pairs with prefill.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let rows = self
            .phases
            .iter()
            .flat_map(|p| p.rows.iter().map(move |r| (p, r)));
        rows.map(|(p, row)| {
            let name = format!("{} {}", p.phase.name(), row.precision);
            let clock = row.measured.as_ref().map(|m| Clock::of(&m.end_to_end));
            let pairs = clock.map(|clock| Pairing {
                experiment: format!("block {}", p.phase.name()),
                size: self.shape.seq as u64,
                precision: row.precision.name().to_string(),
                stands_for: None,
                device: None,
                clock,
                calls_per_sample: 1,
            });
            let timings = clock.map(|c| Timing::new(name.clone(), c));
            let (timings, pairs) = (timings.into_iter().collect(), pairs.into_iter().collect());
            let pct = row.measured.as_ref().and_then(|m| m.pct_of_copy_ceiling);
            TimedRow::ran(name.clone(), row.status, timings, pairs, clock.is_some())
                .bounded(format!("block {name}"), pct)
        })
        .collect()
    }

    fn validate(&self) -> Result<()> {
        let s = &self.shape;
        if s.heads == 0 || s.head_dim * s.heads != s.hidden {
            bail!(
                "block: heads {} x head_dim {} is not hidden {}",
                s.heads,
                s.head_dim,
                s.hidden
            );
        }
        if s.kv_heads() == 0 || !s.heads.is_multiple_of(s.kv_heads()) {
            bail!(
                "block: kv_heads {} does not divide heads {}",
                s.kv_heads(),
                s.heads
            );
        }
        for row in self.phases.iter().flat_map(|p| &p.rows) {
            match (row.status, &row.measured, &row.error) {
                (RowStatus::Ok, Some(_), None) | (RowStatus::Error, None, Some(_)) => {}
                _ => bail!(
                    "block {}: status {:?} disagrees with its measurements and error",
                    row.precision,
                    row.status
                ),
            }
        }
        Ok(())
    }
}
