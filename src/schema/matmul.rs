//! The bodies of `matmul` and `cpu_vs_gpu`: one [`Row`] per precision that was
//! asked for, measured or with the reason it was not. Field names follow the
//! reference lab's `matmul` object (`median_ms`, `gflops`, `peak_mib`), with
//! more beside them; units are in the names.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Sampling;

use super::rows::{Clock, Pairing, TimedRow, Timing};
use super::{Availability, DeviceKind, RatioInterval, TimeSource, Timed};
use crate::precision::Precision;
use crate::stats::Summary;

/// The reference lab's `matmul` object, extended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MatmulResults {
    /// Side n of the n x n matrices.
    pub size: usize,
    pub warmup: usize,
    /// Timed runs per row: the fixed plan's, or an adaptive plan's least
    /// (each row's own count is its samples' length).
    pub iters: usize,
    /// How every row was sampled: the reference lab's fixed plan or an
    /// adaptive one (2.3; null in older files, which sampled `warmup` and
    /// `iters` fixed).
    #[serde(default)]
    pub sampling: Option<Sampling>,
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

/// Whether a row ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    Ok,
    Error,
    /// The GPU's library refused the row's mode as unsupported (cuBLAS's
    /// CUBLAS_STATUS_NOT_SUPPORTED, `crate::error::is_unsupported`): neither
    /// failed nor measured, `error` keeping the reason (2.3).
    Unsupported,
}

impl RowStatus {
    /// The status as the JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Unsupported => "unsupported",
        }
    }
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
    /// "ok" with the measurements beside it, "error" with `error` saying why,
    /// or "unsupported" with the library's refusal in `error`.
    pub status: RowStatus,
    pub error: Option<String>,
    #[serde(flatten)]
    pub measured: Option<Measured>,
}

impl super::rows::Rows for MatmulResults {
    fn validate(&self) -> Result<()> {
        self.precisions
            .iter()
            .chain(&self.cpu_fp32)
            .try_for_each(Row::validate)
    }

    /// Each precision on the run's device, then the GPU run's CPU fp32 row:
    /// each named by its precision.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let on = |row: &Row| row.precision.to_string();
        let rows = self.precisions.iter().map(|r| (r, self.device));
        rows.chain(self.cpu_fp32.iter().map(|r| (r, DeviceKind::Cpu)))
            .map(|(r, device)| r.timed_row(on(r), on(r), "matmul", self.size, device))
            .collect()
    }
}

impl Row {
    /// The row as the readers walk it: `name` for a failure, `judged` for its
    /// clock's availability, paired as `experiment` at `size` on `device`.
    pub(super) fn timed_row(
        &self,
        name: String,
        judged: String,
        experiment: &str,
        size: usize,
        device: DeviceKind,
    ) -> TimedRow<'_> {
        let clock = self.measured.as_ref().map(|m| Clock {
            median_ms: m.median_ms,
            samples_wall_ms: &m.samples_wall_ms,
            availability: m.availability.as_ref(),
        });
        let pairs = clock.map(|clock| Pairing {
            experiment: experiment.to_string(),
            size: size as u64,
            precision: self.precision.name().to_string(),
            stands_for: None,
            device: Some(device),
            clock,
            calls_per_sample: 1,
        });
        let timings = clock.map(|c| Timing::new(judged, c));
        let measured = clock.is_some();
        TimedRow::ran(
            name,
            self.status,
            timings.into_iter().collect(),
            pairs.into_iter().collect(),
            measured,
        )
    }

    /// The measured fp32 median, if this row is a plain fp32 row that ran.
    pub fn fp32_median_ms(&self) -> Option<f64> {
        (self.precision == Precision::F32).then_some(self.measured.as_ref()?.median_ms)
    }

    /// What a row without measurements shows in a table cell: "error: why" or
    /// "unsupported: why".
    pub fn not_measured(&self) -> String {
        let why = self.error.as_deref().unwrap_or("no reason recorded");
        format!("{}: {why}", self.status.name())
    }

    /// A status of "ok" comes with measurements and no error, "error" and
    /// "unsupported" with an error and none.
    pub(super) fn validate(&self) -> Result<()> {
        match (self.status, &self.measured, &self.error) {
            (RowStatus::Ok, Some(_), None)
            | (RowStatus::Error | RowStatus::Unsupported, None, Some(_)) => Ok(()),
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
    /// How many times faster than the plain fp32 row of the same run, from
    /// wall medians: fp32's median_ms over this row's (above 1 is faster).
    /// Null when no fp32 row ran.
    pub speedup_vs_fp32_wall: Option<f64>,
    /// The same from GPU-event medians (gpu_median_ms); null on the CPU.
    pub speedup_vs_fp32_gpu: Option<f64>,
    /// This row and the fp32 row timed in turn (A B A B), in one more pass
    /// after every row's own sampling: the ratio to fp32 measured side by
    /// side, with its interval (2.6; null in older files, on the fp32 row, and
    /// where fp32's row or the pass failed).
    #[serde(default)]
    pub vs_fp32_side_by_side: Option<SideBySide>,
    /// This row's peak_bytes over the fp32 row's (below 1 is smaller); null
    /// when either has no peak.
    pub peak_vs_fp32: Option<f64>,
    pub wall_ms: Summary,
    pub gpu_ms: Option<Summary>,
    pub samples_wall_ms: Vec<f64>,
    pub samples_gpu_ms: Vec<f64>,
    pub accuracy: Accuracy,
    /// Whether the machine was this run's while the row was timed (2.2; null
    /// in older files, and where /proc cannot be read).
    #[serde(default)]
    pub availability: Option<Availability>,
}

/// Fills each measured row's `speedup_vs_fp32_*` and `peak_vs_fp32` from the
/// plain fp32 row among `rows` (the same run, so the same size and inputs);
/// sets them to null when there is no measured fp32 row.
pub fn fill_vs_fp32(rows: &mut [Row]) {
    let fp32 = rows
        .iter()
        .find(|r| r.precision == Precision::F32)
        .and_then(|r| r.measured.as_ref())
        .map(|m| (m.median_ms, m.gpu_median_ms, m.peak_bytes));
    let (wall, gpu, peak) = match fp32 {
        Some((wall, gpu, peak)) => (Some(wall), gpu, peak.map(|p| p as f64)),
        None => (None, None, None),
    };
    // num / den where both exist and den is positive.
    let ratio = |num: Option<f64>, den: Option<f64>| {
        num.zip(den).filter(|&(_, d)| d > 0.0).map(|(n, d)| n / d)
    };
    for m in rows.iter_mut().filter_map(|r| r.measured.as_mut()) {
        m.speedup_vs_fp32_wall = ratio(wall, Some(m.median_ms));
        m.speedup_vs_fp32_gpu = ratio(gpu, m.gpu_median_ms);
        m.peak_vs_fp32 = ratio(m.peak_bytes.map(|p| p as f64), peak);
    }
}

/// A row's ratio to fp32 from samples taken in turn with fp32's (2.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SideBySide {
    /// fp32's median over the row's, both from this pass, on `time_source`'s
    /// clock (above 1 is faster).
    pub speedup: f64,
    /// Its 95% bootstrap interval (compare's method); null with under 3
    /// samples a side: the ratio's direction only.
    pub interval: Option<RatioInterval>,
    /// CUDA events' medians on a GPU, else the wall clock's.
    pub time_source: TimeSource,
    /// The row's samples in the pass, and fp32's.
    pub row: Timed,
    pub fp32: Timed,
}

/// How accurate one precision's C is, on the sampled rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accuracy {
    pub rows_checked: usize,
    /// Largest |C - C_f64| / rms(C_f64) over the checked rows.
    pub max_rel_err: f64,
    pub mean_rel_err: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    fn row(precision: Precision, wall_ms: f64, gpu_ms: Option<f64>, peak: Option<u64>) -> Row {
        let wall = summarize(&[wall_ms]).unwrap();
        Row {
            precision,
            dtype: precision.dtype().as_str().into(),
            element_bytes: precision.dtype().size_in_bytes(),
            gemm_reduced_precision: precision.reduced_gemm(),
            memory_source: "test".into(),
            status: RowStatus::Ok,
            error: None,
            measured: Some(Measured {
                median_ms: wall_ms,
                gflops: 1.0,
                peak_mib: None,
                peak_bytes: peak,
                payload_mib: 1.0,
                payload_bytes: 1,
                gpu_median_ms: gpu_ms,
                gpu_gflops: None,
                datasheet_tflops: None,
                pct_of_datasheet: None,
                speedup_vs_fp32_wall: Some(-1.0),
                speedup_vs_fp32_gpu: Some(-1.0),
                vs_fp32_side_by_side: None,
                peak_vs_fp32: Some(-1.0),
                wall_ms: wall,
                gpu_ms: gpu_ms.and_then(|g| summarize(&[g])),
                samples_wall_ms: vec![wall_ms],
                samples_gpu_ms: gpu_ms.into_iter().collect(),
                accuracy: Accuracy {
                    rows_checked: 1,
                    max_rel_err: 0.0,
                    mean_rel_err: 0.0,
                },
                availability: None,
            }),
        }
    }

    fn ratios(r: &Row) -> (Option<f64>, Option<f64>, Option<f64>) {
        let m = r.measured.as_ref().unwrap();
        (
            m.speedup_vs_fp32_wall,
            m.speedup_vs_fp32_gpu,
            m.peak_vs_fp32,
        )
    }

    #[test]
    fn ratios_to_fp32_are_ratios_of_the_medians_and_peaks() {
        // The reference lab's GB10 medians and peaks (ms, bytes), wall and event.
        let mib = 1 << 20;
        let mut rows = vec![
            row(Precision::F16, 1.548, Some(1.5), Some(128 * mib)),
            row(Precision::F32, 7.44, Some(7.2), Some(224 * mib)),
            row(Precision::Bf16, 1.576, None, None),
        ];
        fill_vs_fp32(&mut rows);
        assert_eq!(
            ratios(&rows[0]),
            (Some(7.44 / 1.548), Some(7.2 / 1.5), Some(128.0 / 224.0))
        );
        assert_eq!(ratios(&rows[1]), (Some(1.0), Some(1.0), Some(1.0)));
        // No event time or peak on this row: only the wall ratio.
        assert_eq!(ratios(&rows[2]), (Some(7.44 / 1.576), None, None));
        assert!(
            (ratios(&rows[0]).0.unwrap() - 4.806).abs() < 1e-3,
            "the lab's 4.8x"
        );
    }

    #[test]
    fn without_a_measured_fp32_row_every_ratio_is_null() {
        let mut failed = row(Precision::F32, 1.0, None, None);
        failed.status = RowStatus::Error;
        failed.error = Some("out of memory".into());
        failed.measured = None;
        // tf32 is f32 data but not the plain fp32 row.
        let mut rows = vec![
            failed,
            row(Precision::Tf32, 2.0, Some(2.0), Some(4)),
            row(Precision::F16, 1.0, Some(1.0), Some(2)),
        ];
        fill_vs_fp32(&mut rows);
        assert_eq!(ratios(&rows[1]), (None, None, None));
        assert_eq!(ratios(&rows[2]), (None, None, None));
        assert!(rows[0].measured.is_none());
    }
}
