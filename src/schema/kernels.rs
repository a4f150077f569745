//! The body of `kernels`: the suite's own kernels (`src/kernels`) beside
//! Candle's op, the same math from primitive ops, and the measured copy
//! ceiling for the bytes each op must move, per op, shape and precision. The
//! PyTorch twin (`pytorch/kernels`) writes the same body with its own op in
//! place of ours and Candle's, so `compare` pairs the two files row by row.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::{Clock, Pairing, TimedRow, Timing};
use super::{Bound, Ladder, RatioInterval, RowStatus, TelemetrySource, TimeSource, Timed};
use crate::precision::Precision;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelsResults {
    pub warmup: usize,
    pub iters: usize,
    /// Threads of the CPU's compute pool (Candle's, which its CPU ops and the
    /// suite's share; PyTorch: its intra-op threads).
    pub cpu_threads: usize,
    /// The largest cache in front of memory, when known: a case whose bytes
    /// fit in it measures the cache.
    pub cache_bytes: Option<u64>,
    pub telemetry: TelemetrySource,
    pub cases: Vec<KernelCase>,
    /// One row per op, case and precision, in that order of loops (op outermost).
    pub rows: Vec<KernelRow>,
    /// The bandwidth ladder's points the rows were held against (2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// The clock's own cost per sample subtracted from the K-call samples,
    /// where no ladder says it (the PyTorch twin's; 2.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_overhead_ms: Option<f64>,
    /// The matrix-vector rows: one per model shape, matrix and weight type
    /// (empty before 2.4 and in the PyTorch twin's).
    #[serde(default)]
    pub matvec: Vec<MatvecRow>,
    /// Whether malloc kept what was freed and served every block from its
    /// heap (mallopt: no mmap, no trim), so that an output past 32 MiB was
    /// memory the process held rather than pages faulted in on each call
    /// (2.7; false: not so; null: not said, as on a GPU, whose outputs come
    /// from the device's pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freed_memory_kept: Option<bool>,
}

/// `y = x W^T` on one weight at a model's decode shape, the weight in one
/// type as a model stores it: the suite's op ([`Implementation::Lab`]:
/// `kernels::linear`, `kernels::QLinear`) against Candle's (`matmul`,
/// `QMatMul`) and the bound its bytes set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MatvecRow {
    /// The model whose shape this is ("smollm2-135m", "llama-3-8b").
    pub model: String,
    /// The projections of this shape in a layer ("q_o", "k_v", "gate_up",
    /// "down") or the output head ("head").
    pub matrix: String,
    /// Weight rows (the outputs).
    pub n: usize,
    /// Weight columns (the activations' width).
    pub k: usize,
    /// Activation rows of one call: 1 is a decode step.
    pub tokens: usize,
    /// The weight's type: fp32, fp16, bf16 (the activations too), or a GGUF
    /// block type (q8_0, q4_1, q4_k...; the activations f32).
    pub weights: String,
    /// The weight's bytes as stored: what one call must read. The
    /// activations and the outputs are left out (under 1% of it here).
    pub weight_bytes: u64,
    /// A copy moving the weight's bytes (half read, half written, the same
    /// footprint) in this run: the bandwidth the bound uses.
    pub ceiling: KernelCeiling,
    /// weight_bytes at the ceiling's rate: the least time a call can take.
    pub bound_ms: f64,
    /// Each variant's `gb_per_s` is weight_bytes over its time, and its
    /// `pct_of_ceiling` the share of the bound it reaches.
    pub variants: Vec<KernelVariant>,
}

/// The case sized to live in memory: each f32 tensor half the ladder's
/// memory footprint (four times the last cache), run at fp32 only.
pub const DRAM_CASE: &str = "dram";

/// A shape the ops run at: a model's sizes in one phase. Each op takes its
/// tensors from it ([`KernelOp::shape`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelCase {
    /// "block-prefill", "smollm2-decode", "large", "dram".
    pub name: String,
    /// Where the sizes come from.
    pub source: String,
    /// Rows of the token-wise ops: tokens of one call.
    pub tokens: usize,
    pub hidden: usize,
    pub heads: usize,
    /// The MLP's inner width (SwiGLU's tensors are tokens x mlp).
    pub mlp: usize,
    /// Keys a query attends to (softmax's rows are heads x tokens of this width).
    pub context: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KernelOp {
    /// x / sqrt(mean(x^2) + eps) over the last dimension.
    RmsNorm,
    /// The same times a weight per column, in one kernel (a Llama layer's norm).
    RmsNormMul,
    /// Softmax over the last dimension (attention's scores).
    Softmax,
    /// silu(gate) * up (a Llama MLP's gate).
    Swiglu,
    /// A contiguous copy into a new tensor.
    Copy,
    /// a + b (a residual add).
    Add,
}

impl KernelOp {
    pub const ALL: [KernelOp; 6] = [
        Self::RmsNorm,
        Self::RmsNormMul,
        Self::Softmax,
        Self::Swiglu,
        Self::Copy,
        Self::Add,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::RmsNorm => "rms_norm",
            Self::RmsNormMul => "rms_norm_mul",
            Self::Softmax => "softmax",
            Self::Swiglu => "swiglu",
            Self::Copy => "copy",
            Self::Add => "add",
        }
    }

    /// The op named `s` (its [`Self::name`]).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        Self::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|op| op.name()).collect();
                format!("unknown op '{s}': expected one of {}", names.join(", "))
            })
    }

    /// The shape of the op's (first) input at `case`: tokens x hidden for the
    /// norms, the copy and the add; heads x tokens x context for softmax;
    /// tokens x mlp for SwiGLU.
    pub fn shape(self, case: &KernelCase) -> Vec<usize> {
        match self {
            Self::RmsNorm | Self::RmsNormMul | Self::Copy | Self::Add => {
                vec![case.tokens, case.hidden]
            }
            Self::Softmax => vec![case.heads, case.tokens, case.context],
            Self::Swiglu => vec![case.tokens, case.mlp],
        }
    }
}

/// Who wrote the code a variant runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Implementation {
    /// The suite's own kernel (`candle_lab::kernels`).
    Lab,
    /// Candle's op (candle-nn's fused kernel where there is one).
    Candle,
    /// The same math from primitive tensor ops, each a kernel of its own.
    Composed,
    /// PyTorch's op (the twin's file).
    Pytorch,
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Self::Lab => "lab",
            Self::Candle => "candle",
            Self::Composed => "composed",
            Self::Pytorch => "pytorch",
        }
    }
}

/// One op at one case and precision: what it must move, the copy ceiling for
/// those bytes, and each implementation's time against it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelRow {
    pub op: KernelOp,
    /// The case's name.
    pub case: String,
    pub precision: Precision,
    /// The (first) input's shape.
    pub shape: Vec<usize>,
    /// Elements of the output.
    pub elements: u64,
    /// The least the op can move: every input element read once, every output
    /// element written once (STREAM's counting, as `memory`'s rows).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// bytes_read + bytes_written.
    pub bytes_moved: u64,
    pub ceiling: KernelCeiling,
    /// The row's compute roof ([`ComputeRoof`], 2.12; none for the copy and
    /// the f32 add, nor where the row beat it twice): the roofline is the
    /// lower of it and the ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<ComputeRoof>,
    pub variants: Vec<KernelVariant>,
}

/// The rate the faster of the suite's kernel and Candle's op reaches on rows
/// of a row's op, precision and width held in the cores' private caches
/// (2.12): what paces it there is its own work per element, not memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComputeRoof {
    /// The work the op adds to moving its bytes ("exp", "f16 conversions").
    pub resource: String,
    /// Whose kernel set the roof (the suite's where a file lacks it).
    #[serde(default = "suites_own")]
    pub implementation: Implementation,
    /// The cache-resident input's shape.
    pub shape: Vec<usize>,
    /// Bytes one call moves there.
    pub footprint_bytes: u64,
    /// Where that footprint lives at these threads ("L2").
    pub level: String,
    pub threads: usize,
    pub calls_per_sample: u64,
    /// Output elements per second, 10^9, from the fastest sample.
    pub g_elements_per_s: f64,
    /// The same rate in the row's own bytes, 10^9 a second (as the ceiling).
    pub gb_per_s: f64,
    #[serde(flatten)]
    pub timed: Timed,
}

/// A roof's implementation where a file does not say: the suite's kernel.
fn suites_own() -> Implementation {
    Implementation::Lab
}

/// A plain copy between two preallocated buffers that moves the row's bytes
/// (bytes_moved / 2 read, as many written), measured in the same run: what
/// this device can move at this size (the cache's speed where it fits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelCeiling {
    /// What ran ("dst.copy_from_slice(&src)", "cuMemcpyDtoDAsync(dst, src)").
    pub call: String,
    pub bytes_copied: u64,
    /// The time per call the rate divides by: the ladder's point's (its
    /// fastest sample from 2.8, the median before).
    pub time_ms: f64,
    pub time_source: TimeSource,
    /// 2 x bytes_copied / time_ms, in 10^9 bytes per second.
    pub gb_per_s: f64,
    /// The ladder's point this is (2.4; before it, a one-thread copy at the
    /// row's footprint): its kernel, threads and level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// Timed in turn with the row's variants (A B C A B C: 2.5), so the
    /// machine's drift between minutes is not inside a row's share of it;
    /// false: read at another moment (before 2.5).
    #[serde(default)]
    pub side_by_side: bool,
    #[serde(flatten)]
    pub timed: Timed,
}

/// One implementation of the op, measured or failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelVariant {
    pub implementation: Implementation,
    /// What ran ("candle_lab::kernels::rms_norm_mul", "candle_nn::ops::rms_norm").
    pub call: String,
    pub status: RowStatus,
    pub error: Option<String>,
    pub measured: Option<VariantMeasured>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariantMeasured {
    /// The median rates divide by.
    pub time_ms: f64,
    pub time_source: TimeSource,
    /// The row's bytes_moved / time_ms, in 10^9 bytes per second (what the op
    /// must move, whatever this implementation moves beyond it).
    pub gb_per_s: f64,
    /// gb_per_s as a percentage of the row's ceiling.
    pub pct_of_ceiling: f64,
    /// Candle's op's time over this one's (above 1: faster than Candle's);
    /// null without a measured Candle variant.
    pub speedup_vs_candle: Option<f64>,
    /// speedup_vs_candle's 95% bootstrap interval from the two variants'
    /// per-call samples, taken in turn (2.5); null with under 3 samples a
    /// side, or before 2.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_interval: Option<RatioInterval>,
    pub accuracy: KernelAccuracy,
    /// Calls timed together in one sample (2.4: time_ms is then the median
    /// sample less the clock's cost, over this; 1 in older files).
    #[serde(default = "one")]
    pub calls_per_sample: u64,
    /// Threads busy on average while the variant ran back to back for a
    /// window of its own (every thread's CPU time over the wall time): the
    /// matrix-vector rows'; null elsewhere and before 2.4.
    #[serde(default)]
    pub threads_held: Option<f64>,
    #[serde(flatten)]
    pub timed: Timed,
}

fn one() -> u64 {
    1
}

/// The output against an f64 computation of the same op from the same
/// (rounded) inputs, on the first rows, norm-wise: errors as a share of the
/// output's size, so that a softmax (its mass in a few entries) is judged as
/// a normal row is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KernelAccuracy {
    pub elements_checked: usize,
    /// max |got - want| / max |want|.
    pub max_rel_err: f64,
    /// mean |got - want| / mean |want|.
    pub mean_rel_err: f64,
}

impl MatvecRow {
    /// The variant of `implementation`, when measured.
    pub fn measured(&self, implementation: Implementation) -> Option<&VariantMeasured> {
        self.variants
            .iter()
            .find(|v| v.implementation == implementation)?
            .measured
            .as_ref()
    }
}

impl super::rows::Rows for KernelsResults {
    fn validate(&self) -> Result<()> {
        for row in &self.rows {
            if !self.cases.iter().any(|c| c.name == row.case) {
                bail!(
                    "kernels: row {} names no case '{}'",
                    row.op.name(),
                    row.case
                );
            }
            if row.bytes_moved != row.bytes_read + row.bytes_written {
                bail!(
                    "kernels {} {}: bytes_moved is not read + written",
                    row.op.name(),
                    row.case
                );
            }
            for v in &row.variants {
                match (v.status, &v.measured, &v.error) {
                    (RowStatus::Ok, Some(_), None) | (RowStatus::Error, None, Some(_)) => {}
                    _ => bail!(
                        "kernels {} {} {}: status {:?} disagrees with its measurements and error",
                        row.op.name(),
                        row.case,
                        v.implementation.name(),
                        v.status
                    ),
                }
            }
        }
        Ok(())
    }

    /// Per op, case and precision: its copy ceiling ("add large fp32
    /// ceiling"), then each implementation ("add large fp32 lab"), which can
    /// fail on its own and is held against the ceiling; then the same for
    /// each matrix-vector row ("matvec smollm2-135m q_o q8_0 t1 lab").
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let mut out = Vec::new();
        for row in &self.rows {
            let name = format!("{} {} {}", row.op.name(), row.case, row.precision);
            let mut ceiling = TimedRow::section(format!("{name} ceiling"), &row.ceiling.timed);
            ceiling.pairs = row.pairs();
            out.push(ceiling);
            let roof = row.roofline().0;
            out.extend(row.variants.iter().map(|v| {
                let pct = v
                    .measured
                    .as_ref()
                    .map(|m| m.pct_of_ceiling.max(100.0 * m.gb_per_s / roof));
                variant_row(&name, v, pct)
            }));
        }
        for row in &self.matvec {
            let name = format!(
                "matvec {} {} {} t{}",
                row.model, row.matrix, row.weights, row.tokens
            );
            out.push(TimedRow::section(
                format!("{name} ceiling"),
                &row.ceiling.timed,
            ));
            out.extend(
                row.variants
                    .iter()
                    .map(|v| variant_row(&name, v, v.measured.as_ref().map(|m| m.pct_of_ceiling))),
            );
        }
        out
    }
}

/// One implementation of the row `name`, held against the row's bound at
/// `pct` (its share of the ceiling, or of the roofline where that is lower).
fn variant_row<'a>(name: &str, v: &'a KernelVariant, pct: Option<f64>) -> TimedRow<'a> {
    let name = format!("{name} {}", v.implementation.name());
    let measured = v.measured.as_ref();
    let timed = measured.map(|m| Timing::new(name.clone(), Clock::of(&m.timed)));
    let what = format!("kernels {name}");
    TimedRow::ran(
        name,
        v.status,
        timed.into_iter().collect(),
        Vec::new(),
        measured.is_some(),
    )
    .bounded(what, pct)
}

impl KernelRow {
    /// What the row pairs with in another file, each op and case its own
    /// experiment: the file's own implementation (the suite's kernel, or
    /// PyTorch's op in the twin's file), then its copy ceiling, so that
    /// Candle's and PyTorch's files pair row by row. Listed on the row's
    /// first entry, its ceiling's: they are the row's, not one variant's.
    fn pairs(&self) -> Vec<Pairing<'_>> {
        let pairing = |what: &str, clock, calls_per_sample| Pairing {
            experiment: format!("kernels {what}{} {}", self.op.name(), self.case),
            size: self.elements,
            precision: self.precision.name().to_string(),
            stands_for: None,
            device: None,
            clock,
            calls_per_sample,
        };
        // Times per call: from 2.4 a sample is `calls_per_sample` calls, so
        // files of different K pair call with call.
        let own = self.variants.iter().find_map(|v| match v.implementation {
            Implementation::Lab | Implementation::Pytorch => v
                .measured
                .as_ref()
                .map(|m| pairing("", Clock::of(&m.timed), m.calls_per_sample.max(1))),
            _ => None,
        });
        // The ceiling is paired only before 2.4: from then on it is the
        // ladder's point (the twin copies Candle's), not a variant.
        let ceiling = self
            .ceiling
            .bound
            .is_none()
            .then(|| pairing("ceiling ", Clock::of(&self.ceiling.timed), 1));
        own.into_iter().chain(ceiling).collect()
    }

    /// The measured variant of `implementation`, if it ran.
    pub fn measured(&self, implementation: Implementation) -> Option<&VariantMeasured> {
        self.variants
            .iter()
            .find(|v| v.implementation == implementation)
            .and_then(|v| v.measured.as_ref())
    }
}
