//! The result schema: the plain data every experiment writes and every reader
//! (`compare`, the PyTorch reference's tests, reports) reads back, with the
//! same types for both directions. One envelope for every experiment
//! ([`ResultFile`]): schema version, experiment, time, command, environment,
//! device, then the body under one key named after the experiment
//! (`"matmul": {...}`), which keeps the reference lab's `matmul` object readable
//! field by field. [`read`] checks the version first and says in one line what
//! it cannot read. `schema/result.schema.json` is generated from these types
//! ([`json_schema`]) and a test keeps it up to date.
//!
//! Versioning: `schema_version` is "major.minor". A minor bump adds fields
//! (readers ignore fields they do not know; 2.1 added each matmul row's speed
//! and peak relative to fp32, null in files of 2.0); a major bump changes or
//! removes one. Files of schema 1 (the first release: a bare integer, bodies
//! other than `matmul` at the top level, Candle-only environment names) are
//! upgraded on read, so committed results stay readable.

mod availability;
mod basics;
mod block;
mod cpu;
mod cpu_vs_gpu;
mod generate;
mod kernels;
mod ladder;
mod matmul;
mod memory;
mod model;
mod overhead;
mod precision;
mod roofline;
mod rows;
mod sampling;
mod scaling;
mod sweep;
mod timed;

use std::path::Path;

use anyhow::{bail, Context, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use strum::{EnumDiscriminants, EnumIter, EnumProperty, IntoStaticStr};

pub use availability::{
    verdict, Availability, QuietReport, RowKind, Verdict, HELD_FRACTION_MIN,
    IDLE_SHARE_OF_SHORTFALL_MAX, MIN_JUDGED_WINDOW_S, OTHERS_SHARE_MAX, QUIET_OTHERS_PCT_MAX,
    QUIET_STEAL_PCT_MAX, STEAL_PCT_MAX, THREADS_HELD_MIN,
};
pub use basics::{
    BasicsResults, Broadcast, Described, Elementwise, Transfer, TransferStatus, View,
};
pub use block::{
    BlockAccuracy, BlockMeasured, BlockPart, BlockPhase, BlockResults, BlockRow, BlockShape,
    FusedOp, FusedRow, KernelChoice, OpClass, Phase,
};
pub use cpu::{same_generation, CpuIdentity};
pub use cpu_vs_gpu::CpuVsGpuResults;
pub use generate::{
    spans_too_costly, Answer, Fp32Beside, GenerateMeasured, GenerateResults, GenerateRow,
    ModelPath, PpRoofline, PromptInfo, TokenOpClass, TokenPart, VsFp32, LAB_SUFFIX,
    SPANS_MAX_SHARE,
};
pub use kernels::{
    ComputeRoof, Implementation, KernelAccuracy, KernelCase, KernelCeiling, KernelOp, KernelRow,
    KernelVariant, KernelsResults, MatvecRow, VariantMeasured, DRAM_CASE,
};
pub use ladder::{
    Bound, CacheLevel, Ladder, LadderKernel, LadderPoint, BEATEN_PCT, UNREPORTED_CACHE_RATIO,
};
pub use matmul::{fill_vs_fp32, Accuracy, MatmulResults, Measured, Row, RowStatus, SideBySide};
pub use memory::{
    BandwidthRow, Direction, HostMemory, MemoryResults, OomAttempt, OutOfMemory, Refusal, Roofline,
    RooflinePoint, TransferRow, Transfers,
};
pub use model::{ModelInfo, SlidingWindow, StoredType, WeightSource, RANDOM_NAME_PREFIX};
pub use overhead::{
    CacheRow, CacheSection, FirstCall, JitCache, LaunchMode, LaunchRow, OverheadResults,
};
pub use precision::{Accumulation, FormatLimits, Limits, PointOne, PrecisionResults, RoundTrip};
pub use rows::{Bounded, Clock, Pairing, TimedRow, Timing};
pub use timed::{GpuState, RatioInterval, SectionStatus, TelemetrySource, TimeSource, Timed};

pub use sampling::{Adaptive, ClockOverhead, Plan, Sampling, StopRule};
pub use scaling::{
    Axis, Capacity, KvCacheBytes, Ridge, ScalingMeasured, ScalingPoint, ScalingResults, ScalingRow,
    StepPart, StepParts, Test,
};
pub use sweep::{SweepPoint, SweepResults};

/// The version this build writes. 2.1 added the `sweep`, `memory` and
/// `overhead` bodies and the matmul rows' "x fp32" ratios; 2.2 the clock's
/// overhead beside `overhead`'s launch rows, and their cost net of it; 2.3
/// how `matmul`'s rows were sampled (fixed or adaptive), the rows' status
/// "unsupported" (a mode the GPU's library refused), `overhead`'s
/// `jit_cache`, the block's key/value heads (grouped-query attention), the
/// clock its tables read (`time_source`), the device's largest cache, and each
/// row's own copy ceiling of the row's footprint, the kernels a block ran
/// with, and the `kernels` and `generate` bodies; 2.4 the bandwidth ladder
/// (`ladder` in `memory`, `kernels`, `block` and `generate`) and each row's
/// `bound` from it, `kernels`' calls per sample, the intervals of the ratios
/// measured side by side, and the `kernels` body's matrix-vector rows
/// (`matvec`) and their variants' `threads_held`; 2.5 `kernels`' bounds timed
/// in turn with their rows (`side_by_side`) and the suite's speedups'
/// intervals (`speedup_interval`), and `generate`'s and `block`'s ratios to
/// fp32 measured side by side with their intervals; 2.6 `matmul`'s
/// (`vs_fp32_side_by_side`); 2.7 `kernels`' `freed_memory_kept` (its dram
/// case's outputs come from memory the process holds); 2.8 the ladder's
/// points timed by their fastest sample (`from_fastest_sample`); 2.9
/// `generate`'s model architecture, its quantization as llama.cpp names it,
/// its sliding window, and the further models a run measured (`more_models`);
/// 2.10 the `scaling` body (cost as depth, prompt length and batch grow);
/// 2.11 `scaling`'s tg points split by op class (`step_parts`); 2.12 the
/// ladder's copy and triad with each store kind (`copy_nt` and `triad_nt`
/// beside the ordinary `copy`, now the suite's own loop, and `triad`), and
/// `kernels` rows' compute roofline (`compute`); 2.13 a row's threads at
/// work beside its threads held (`threads_at_work`); 2.14 `generate`'s host
/// floor: one op's cost measured in the run (`op_cost`), and per row the ops
/// a token issues and the floor they set (`ops_per_token`, `host_floor_ms`).
pub const SCHEMA_VERSION: &str = "2.14";
/// The major version this build reads (and 1, upgraded).
const MAJOR: u64 = 2;

/// One result file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResultFile {
    /// "major.minor"; readers accept their own major and any minor.
    pub schema_version: String,
    /// The experiment's name; also the key its body is stored under.
    pub experiment: String,
    /// RFC 3339, UTC, seconds.
    pub created_utc: String,
    /// The command line, each argument shell-quoted where it needs it.
    pub command: String,
    pub environment: Environment,
    pub device: DeviceInfo,
    #[serde(flatten)]
    pub body: Body,
}

/// An experiment's own results, stored under the key named after it.
///
/// This enum is the registry of experiments: a variant here is an experiment.
/// [`Kind`] (derived from it) lists them without their data, and every list
/// of experiments in the suite is derived from [`Kind::iter`] or checked
/// against it (`tests/registry.rs`); every reader that handles bodies matches
/// on this enum, so the compiler names each place a new one must be handled.
/// Each variant also says which files its result writes beside the JSON
/// (`records`: a CSV; `chart`: an SVG), as [`Kind::writes`] reads them, because
/// those paths are checked before a run has a body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema, EnumDiscriminants)]
#[serde(rename_all = "snake_case")]
#[strum_discriminants(
    name(Kind),
    derive(EnumIter, IntoStaticStr, EnumProperty, Hash, PartialOrd, Ord),
    strum(serialize_all = "snake_case")
)]
// One body per file and process: boxing the larger variants would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Body {
    #[strum_discriminants(strum(props(records = false, chart = false)))]
    Basics(BasicsResults),
    #[strum_discriminants(strum(props(records = false, chart = false)))]
    Precision(PrecisionResults),
    #[strum_discriminants(strum(props(records = true, chart = false)))]
    Matmul(MatmulResults),
    #[strum_discriminants(strum(props(records = true, chart = false)))]
    CpuVsGpu(CpuVsGpuResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Memory(MemoryResults),
    #[strum_discriminants(strum(props(records = true, chart = false)))]
    Overhead(OverheadResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Sweep(SweepResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Block(BlockResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Generate(GenerateResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Kernels(KernelsResults),
    #[strum_discriminants(strum(props(records = true, chart = true)))]
    Scaling(ScalingResults),
}

impl Body {
    /// The experiment's name: the key the body is stored under.
    pub fn experiment(&self) -> &'static str {
        Kind::from(self).name()
    }
}

impl Kind {
    /// The experiment's name ("cpu_vs_gpu"): its program, its result file's
    /// stem and its body's key, the same string serde writes.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every experiment, in the order the enum declares them.
    pub fn all() -> impl Iterator<Item = Kind> {
        <Kind as strum::IntoEnumIterator>::iter()
    }

    /// The experiment called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Kind> {
        Self::all().find(|k| k.name() == name)
    }

    /// What results of this kind write beside the JSON, as its variant of
    /// [`Body`] declares it: known before the run, so that those paths are
    /// checked then (its view's records and chart give them; a test holds
    /// the two together, another that every variant declares both).
    pub fn writes(self) -> Writes {
        Writes {
            records: self.get_bool("records").unwrap_or(false),
            chart: self.get_bool("chart").unwrap_or(false),
        }
    }
}

/// What an experiment writes beside its JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Writes {
    /// A CSV of its records.
    pub records: bool,
    /// An SVG chart.
    pub chart: bool,
}

/// The framework, build and machine a result came from, so that numbers from
/// two machines (or from Candle and PyTorch) are compared knowing what made them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    /// "candle" or "pytorch".
    pub framework: String,
    pub framework_version: String,
    /// candle-lab's version.
    pub suite_version: String,
    /// `git rev-parse --short=12 HEAD` at build time, "-dirty" when the tree had
    /// uncommitted changes; null outside a git checkout.
    pub git_commit: Option<String>,
    pub os: String,
    pub arch: String,
    pub cpu_model: String,
    /// What CPU this is beyond its name: vendor, family/model, instruction sets,
    /// ISA level, cores (2.2; null in older files; PyTorch's reads the `flags`
    /// line alone, without the run-time CPUID check).
    #[serde(default)]
    pub cpu: Option<CpuIdentity>,
    /// Logical CPUs the OS offers this process.
    pub cpu_threads_available: usize,
    /// Threads the framework's CPU kernels use.
    pub compute_threads: usize,
    /// Cargo features the binary was built with (PyTorch: empty).
    pub build_features: Vec<String>,
    /// CPU instruction sets compiled in (PyTorch: empty).
    pub target_features: Vec<String>,
    /// "release" or "debug" (PyTorch: null).
    pub profile: Option<String>,
    /// CUDA version the binaries were built against; null without CUDA.
    pub cuda_build_version: Option<String>,
    /// OpenMP's wait policy the run set and checked ("active", "passive"):
    /// the PyTorch kernels twin's (2.4; absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omp_wait_policy: Option<String>,
}

/// "cpu" or "cuda".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

impl DeviceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        }
    }
}

/// The device a run used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceInfo {
    pub kind: DeviceKind,
    /// Where tensors lived: "cpu", "cuda:0".
    pub label: String,
    pub ordinal: Option<usize>,
    /// CPU model, or the GPU's name as the driver reports it.
    pub name: String,
    /// Why this device was chosen (the line printed at start).
    pub chosen_because: String,
    pub compute_capability: Option<String>,
    pub sm_count: Option<u32>,
    pub total_memory_bytes: Option<u64>,
    pub free_memory_bytes_at_start: Option<u64>,
    /// Newest CUDA version the driver supports.
    pub driver_cuda_version: Option<String>,
    /// Whether CUDA allocations come from a stream-ordered pool.
    pub memory_pool: Option<bool>,
}

/// An f64 that may be infinite or NaN, which JSON cannot hold as a number
/// (serde_json would write null): finite values are JSON numbers, the others
/// the strings "inf", "-inf" and "NaN".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JsonF64(pub f64);

impl Serialize for JsonF64 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            v if v.is_finite() => s.serialize_f64(v),
            v if v.is_nan() => s.serialize_str("NaN"),
            v if v > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }
}

impl<'de> Deserialize<'de> for JsonF64 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(f64),
            Text(String),
        }
        match Either::deserialize(d)? {
            Either::Number(v) => Ok(Self(v)),
            Either::Text(t) => match t.as_str() {
                "inf" => Ok(Self(f64::INFINITY)),
                "-inf" => Ok(Self(f64::NEG_INFINITY)),
                "NaN" => Ok(Self(f64::NAN)),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, \"inf\", \"-inf\" or \"NaN\", found \"{other}\""
                ))),
            },
        }
    }
}

impl JsonSchema for JsonF64 {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonF64".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A float. Finite values are JSON numbers; infinity and NaN, which JSON numbers cannot hold, are the strings \"inf\", \"-inf\" and \"NaN\".",
            "anyOf": [
                { "type": "number" },
                { "type": "string", "enum": ["inf", "-inf", "NaN"] }
            ]
        })
    }
}

impl ResultFile {
    /// Checks what the types cannot: the experiment names its body, and a row's
    /// status agrees with whether it has measurements.
    fn validate(&self) -> Result<()> {
        if self.experiment != self.body.experiment() {
            bail!(
                "experiment \"{}\" but its body is \"{}\"",
                self.experiment,
                self.body.experiment()
            );
        }
        self.body.validate()
    }
}

/// A skipped section says why and has no rows; a section that ran has no reason.
pub(crate) fn section(status: SectionStatus, reason: Option<&str>, rows: usize) -> Result<()> {
    let consistent = match status {
        SectionStatus::Ok => reason.is_none(),
        SectionStatus::Skipped => reason.is_some() && rows == 0,
    };
    if !consistent {
        bail!("a section with status {status:?} has {rows} rows and reason {reason:?}");
    }
    Ok(())
}

/// Reads a result file, checking its schema version first.
pub fn read(path: &Path) -> Result<ResultFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    from_json(&text).with_context(|| format!("cannot read {}", path.display()))
}

/// Parses a result file's text: schema 2.x as is, schema 1 upgraded; anything
/// else is refused with the version it has.
pub fn from_json(text: &str) -> Result<ResultFile> {
    let mut value: Value = serde_json::from_str(text).context("not JSON")?;
    let version = value.get("schema_version").cloned();
    match &version {
        Some(Value::String(v)) if major(v) == Some(MAJOR) => {}
        Some(Value::Number(n)) if n.as_u64() == Some(1) => upgrade_v1(&mut value)?,
        Some(v) => bail!("schema_version {v}: this build reads {MAJOR}.x (and 1)"),
        None => bail!("no schema_version: not a candle-lab result file"),
    }
    let file: ResultFile = serde_json::from_value(value).context("does not match the schema")?;
    file.validate()?;
    Ok(file)
}

fn major(version: &str) -> Option<u64> {
    let (major, minor) = version.split_once('.')?;
    minor.parse::<u64>().ok()?;
    major.parse().ok()
}

/// Schema 1 -> 2.0: the version becomes a string, the environment's
/// Candle-only names become framework-neutral ones, and a body that stood at the
/// top level moves under the key named after its experiment.
fn upgrade_v1(value: &mut Value) -> Result<()> {
    const ENVELOPE: [&str; 6] = [
        "schema_version",
        "experiment",
        "created_utc",
        "command",
        "environment",
        "device",
    ];
    let obj = value.as_object_mut().context("not a JSON object")?;
    let experiment = obj
        .get("experiment")
        .and_then(Value::as_str)
        .context("no experiment")?
        .to_string();
    obj.insert("schema_version".into(), SCHEMA_VERSION.into());
    if let Some(Value::Object(env)) = obj.get_mut("environment") {
        for (old, new) in [
            ("candle_lab_version", "suite_version"),
            ("candle_version", "framework_version"),
            ("candle_cpu_threads", "compute_threads"),
            ("cargo_features", "build_features"),
        ] {
            if let Some(v) = env.remove(old) {
                env.insert(new.into(), v);
            }
        }
        env.insert("framework".into(), "candle".into());
        env.entry("cuda_build_version").or_insert(Value::Null);
    }
    if !obj.contains_key(&experiment) {
        let body: Map<String, Value> = obj
            .keys()
            .filter(|k| !ENVELOPE.contains(&k.as_str()))
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
            .filter_map(|k| obj.remove(&k).map(|v| (k, v)))
            .collect();
        obj.insert(experiment, Value::Object(body));
    }
    Ok(())
}

/// The JSON Schema of [`ResultFile`], pretty-printed with a final newline: the
/// text of the committed `schema/result.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ResultFile);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
pub(crate) mod tests;
