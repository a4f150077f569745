//! The body of `overhead`: what a call costs beyond its arithmetic. The first
//! call in a fresh process against the warm median, the smallest operations'
//! time per call and calls per second, and matmuls with a cold cache against
//! back-to-back ones.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::TimedRow;
use super::timed::{SectionStatus, TelemetrySource, Timed};
use super::ClockOverhead;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverheadResults {
    pub warmup: usize,
    pub iters: usize,
    pub telemetry: TelemetrySource,
    /// Wall time to open the device, timed once, first thing in the process.
    pub device_open_ms: f64,
    /// What opening the device did.
    pub device_open_includes: String,
    pub first_calls: Vec<FirstCall>,
    /// The CUDA driver's JIT cache as the first calls found it (2.3; null on
    /// the CPU, which compiles nothing, and in older files).
    #[serde(default)]
    pub jit_cache: Option<JitCache>,
    /// The clock's own cost per sample (an empty item through the same path:
    /// synchronizations, events, two clock reads), measured before the launch
    /// rows; their `_net` figures take it out. Null in files before 2.2.
    #[serde(default)]
    pub clock_overhead: Option<ClockOverhead>,
    pub launch: Vec<LaunchRow>,
    pub cache: CacheSection,
}

impl super::rows::Rows for OverheadResults {
    fn validate(&self) -> anyhow::Result<()> {
        let c = &self.cache;
        super::section(c.status, c.reason.as_deref(), c.rows.len())
    }

    /// Each launch row by op and mode ("add Sync"), then each cache row's hot
    /// time ("matmul 512 hot"): none fails on its own.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let launch = self
            .launch
            .iter()
            .map(|l| TimedRow::section(format!("{} {:?}", l.op, l.mode), &l.timed));
        let cache = self
            .cache
            .rows
            .iter()
            .map(|c| TimedRow::section(format!("matmul {} hot", c.size), &c.hot));
        launch.chain(cache).collect()
    }
}

/// One operation's first call in this process against its warm median.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FirstCall {
    pub op: String,
    pub call: String,
    /// Side n of the n x n f32 inputs.
    pub size: usize,
    /// Wall time of the first call, device synchronized.
    pub first_ms: f64,
    /// CUDA-event time of the first call (null on the CPU).
    pub first_gpu_ms: Option<f64>,
    /// The same call afterwards, warmed up.
    pub warm: Timed,
    /// first_ms / warm.median_ms.
    pub first_over_warm: f64,
}

/// The CUDA driver's cache of compiled kernels. Candle's kernels are PTX, which
/// the driver compiles for the GPU when a module first loads and keeps in this
/// folder; a first call that finds its module there loads it without compiling.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JitCache {
    /// The folder: `CUDA_CACHE_PATH`, else the driver's default
    /// `$HOME/.nv/ComputeCache` (null with neither).
    pub path: Option<String>,
    /// Whether `CUDA_CACHE_PATH` named the folder.
    pub from_env: bool,
    /// `CUDA_CACHE_DISABLE=1`: the driver keeps nothing, every load compiles.
    pub disabled: bool,
    /// Files in the folder and its subfolders just before the first calls:
    /// what earlier processes left (0 when it is missing).
    pub files_before: u64,
    /// Not disabled and `files_before` > 0: the first calls may have loaded
    /// kernels compiled by an earlier process rather than compiling them. Which
    /// modules the files hold, the driver does not say.
    pub warm: bool,
}

/// How the calls of a launch row were issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaunchMode {
    /// One call per sample, the device synchronized around it: the latency a
    /// caller who waits for each result sees.
    Synchronized,
    /// `calls_per_sample` calls queued back to back, one synchronization at
    /// the end: the rate at which calls can be issued.
    Queued,
}

/// One of the smallest operations, where the time is all overhead.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LaunchRow {
    pub op: String,
    pub call: String,
    pub mode: LaunchMode,
    pub calls_per_sample: usize,
    /// Median sample wall time / calls_per_sample, in microseconds.
    pub per_call_us: f64,
    /// The same from CUDA events (null on the CPU).
    pub per_call_gpu_us: Option<f64>,
    /// 10^6 / per_call_us.
    pub calls_per_s: f64,
    /// per_call_us less the clock's own cost, shared among the sample's calls
    /// (the median sample minus the clock overhead's median, over
    /// calls_per_sample; 0 when the clock costs as much). Null before 2.2.
    #[serde(default)]
    pub per_call_net_us: Option<f64>,
    /// The same from CUDA events and the clock overhead's event median.
    #[serde(default)]
    pub per_call_gpu_net_us: Option<f64>,
    #[serde(flatten)]
    pub timed: Timed,
}

/// Matmuls after the cache was flushed, against back-to-back ones, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheSection {
    pub status: SectionStatus,
    pub reason: Option<String>,
    /// "L3 (CPU, last level)" or "L2 (GPU)".
    pub cache: Option<String>,
    pub cache_bytes: Option<u64>,
    /// Bytes written before each cold sample, evicting the matmul's inputs.
    pub flush_bytes: Option<u64>,
    pub rows: Vec<CacheRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheRow {
    /// Side n of the n x n f32 matmul.
    pub size: usize,
    /// A, B and C: 3 n^2 x 4 bytes.
    pub working_set_bytes: u64,
    pub fits_in_cache: bool,
    /// Samples back to back: the inputs stay in cache when they fit.
    pub hot: Timed,
    /// One sample after each flush.
    pub cold: Timed,
    /// cold.median_ms / hot.median_ms.
    pub cold_over_hot: f64,
}
