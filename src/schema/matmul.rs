//! The bodies of `matmul` and `cpu_vs_gpu`: one [`Row`] per precision that was
//! asked for, measured or with the reason it was not. Field names follow the
//! reference lab's `matmul` object (`median_ms`, `gflops`, `peak_mib`), with
//! more beside them; units are in the names.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::DeviceKind;
use crate::precision::Precision;
use crate::stats::Summary;

/// The reference lab's `matmul` object, extended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MatmulResults {
    /// Side n of the n x n matrices.
    pub size: usize,
    pub warmup: usize,
    pub iters: usize,
    /// `iters` when the device is a GPU (the reference's name), else null.
    pub gpu_iters: Option<usize>,
    /// Timed CPU fp32 runs behind `cpu_fp32_ms`.
    pub cpu_iters: Option<usize>,
    pub device: DeviceKind,
    pub precisions: Vec<Row>,
    /// Median CPU fp32 time: the CPU comparison on a GPU run, the fp32 row on a CPU run.
    pub cpu_fp32_ms: Option<f64>,
    /// cpu_fp32_ms over the GPU fp32 row's median_ms.
    pub gpu_speedup_fp32: Option<f64>,
    /// The CPU fp32 comparison in full, on a GPU run.
    pub cpu_fp32: Option<Row>,
    /// 2 n^3.
    pub flops_per_matmul: f64,
}

/// The same fp32 matmul on the CPU and the GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuVsGpuResults {
    pub size: usize,
    pub precision: Precision,
    /// Threads the CPU matmul ran on.
    pub cpu_threads: usize,
    pub cpu_warmup: usize,
    pub cpu_iters: usize,
    pub gpu_warmup: usize,
    pub gpu_iters: usize,
    pub cpu: Row,
    pub gpu: Option<Row>,
    /// Why there is no GPU row.
    pub gpu_skipped: Option<String>,
    pub cpu_fp32_ms: Option<f64>,
    pub gpu_fp32_ms: Option<f64>,
    pub gpu_speedup_fp32: Option<f64>,
}

/// Whether a row ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    Ok,
    Error,
}

/// One precision's outcome: measured, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    pub precision: Precision,
    /// The tensors' dtype, Candle's spelling ("f32", "bf16").
    pub dtype: String,
    pub element_bytes: usize,
    /// The framework's reduced-precision GEMM switch for this dtype was on.
    pub gemm_reduced_precision: bool,
    /// What `peak_bytes` was read from (host allocator, CUDA pool, PyTorch's
    /// allocator statistics), or why there is no peak.
    pub memory_source: String,
    /// "ok" with the measurements beside it, or "error" with `error` saying why.
    pub status: RowStatus,
    pub error: Option<String>,
    #[serde(flatten)]
    pub measured: Option<Measured>,
}

impl Row {
    /// The measured fp32 median, if this row is a plain fp32 row that ran.
    pub fn fp32_median_ms(&self) -> Option<f64> {
        (self.precision == Precision::F32).then_some(self.measured.as_ref()?.median_ms)
    }

    /// A status of "ok" comes with measurements and no error, "error" with an
    /// error and none.
    pub(super) fn validate(&self) -> Result<()> {
        match (self.status, &self.measured, &self.error) {
            (RowStatus::Ok, Some(_), None) | (RowStatus::Error, None, Some(_)) => Ok(()),
            (status, m, e) => bail!(
                "row {}: status {status:?} with measurements {} and error {}",
                self.precision,
                if m.is_some() { "present" } else { "absent" },
                if e.is_some() { "present" } else { "absent" },
            ),
        }
    }
}

/// Timings and memory of one precision that ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Measured {
    /// Median wall time per matmul, device synchronized: the reference's `median_ms`.
    pub median_ms: f64,
    /// 2n^3 / median_ms.
    pub gflops: f64,
    /// Peak bytes allocated during the run (inputs on the device included) above
    /// what was in use before it, in MiB (1 MiB = 2^20 bytes).
    pub peak_mib: Option<f64>,
    pub peak_bytes: Option<u64>,
    /// A, B and C: 3 n^2 x element size.
    pub payload_mib: f64,
    pub payload_bytes: u64,
    /// Median GPU time from CUDA events (null on the CPU).
    pub gpu_median_ms: Option<f64>,
    pub gpu_gflops: Option<f64>,
    /// Datasheet dense peak for this GPU and precision, when known.
    pub datasheet_tflops: Option<f64>,
    /// GPU-event GFLOP/s as a percentage of `datasheet_tflops`.
    pub pct_of_datasheet: Option<f64>,
    pub wall_ms: Summary,
    pub gpu_ms: Option<Summary>,
    pub samples_wall_ms: Vec<f64>,
    pub samples_gpu_ms: Vec<f64>,
    pub accuracy: Accuracy,
}

/// How accurate one precision's C is, on the sampled rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accuracy {
    pub rows_checked: usize,
    /// Largest |C - C_f64| / rms(C_f64) over the checked rows.
    pub max_rel_err: f64,
    pub mean_rel_err: f64,
}
