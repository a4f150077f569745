//! What `memory` and `overhead` share: one timed measurement ([`Timed`]: the
//! clock's samples, their summaries, and the GPU's state read just before and
//! just after them), the GPU state itself ([`GpuState`], from NVML), where that
//! state came from or why there is none ([`TelemetrySource`]), and whether an
//! optional section ran ([`SectionStatus`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Availability;
use crate::stats::Summary;

/// One row's samples from the clock (`clock::time_on_device`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timed {
    /// Median wall time per sample, device synchronized.
    pub median_ms: f64,
    /// Median CUDA-event time per sample (null on the CPU).
    pub gpu_median_ms: Option<f64>,
    pub wall_ms: Summary,
    pub gpu_ms: Option<Summary>,
    pub samples_wall_ms: Vec<f64>,
    pub samples_gpu_ms: Vec<f64>,
    /// The GPU's clocks, power, temperature and throttle reasons just before the
    /// first sample (warm-up included) and just after the last; null where they
    /// are not read (see the body's `telemetry`).
    pub gpu_before: Option<GpuState>,
    pub gpu_after: Option<GpuState>,
    /// Whether the machine was this run's while the row was timed (2.2; null
    /// in older files).
    #[serde(default)]
    pub availability: Option<Availability>,
}

impl Timed {
    /// The time rates are computed from: the CUDA-event median on a GPU (the
    /// device's own time for the work), else the wall median.
    pub fn rate_ms(&self) -> (f64, TimeSource) {
        match self.gpu_median_ms {
            Some(ms) => (ms, TimeSource::GpuMedianMs),
            None => (self.median_ms, TimeSource::MedianMs),
        }
    }

    /// The fastest of [`Self::samples_ms`] (the median where no sample is
    /// kept): what a bound reads, as STREAM's "Best Rate".
    pub fn fastest_ms(&self) -> f64 {
        let fastest = self
            .samples_ms()
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        if fastest.is_finite() {
            fastest
        } else {
            self.rate_ms().0
        }
    }

    /// The samples [`Self::rate_ms`]'s median is of: CUDA events' on a GPU,
    /// else the wall clock's.
    pub fn samples_ms(&self) -> &[f64] {
        if self.samples_gpu_ms.is_empty() {
            &self.samples_wall_ms
        } else {
            &self.samples_gpu_ms
        }
    }
}

/// A ratio's 95% percentile-bootstrap interval (compare's method,
/// `stats::bootstrap_ratio`, 2.4): both ends of median(B) / median(A) over
/// resamples of each side's samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RatioInterval {
    pub lo: f64,
    pub hi: f64,
}

impl RatioInterval {
    /// The interval of median(b) / median(a), or `None` with too few samples
    /// on a side (then a ratio shows its direction only).
    pub fn of(a: &[f64], b: &[f64]) -> Option<Self> {
        crate::stats::bootstrap_ratio(a, b).map(|i| Self { lo: i.lo, hi: i.hi })
    }

    /// Whether 1 lies inside: no difference shown.
    pub fn holds_one(&self) -> bool {
        self.lo <= 1.0 && 1.0 <= self.hi
    }
}

/// Which median a row's rates divide by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimeSource {
    /// `gpu_median_ms`: CUDA events (GPU runs).
    GpuMedianMs,
    /// `median_ms`: the wall clock (CPU runs).
    MedianMs,
}

impl TimeSource {
    /// The clock in words, for a table's title: "CUDA events", "the wall clock".
    pub fn describe(self) -> &'static str {
        match self {
            Self::GpuMedianMs => "CUDA events",
            Self::MedianMs => "the wall clock",
        }
    }
}

/// A GPU's state at one moment, as NVML reports it. A field the GPU or driver
/// does not report is null.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuState {
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    /// Board power draw (NVML reports milliwatts).
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
    /// Why clocks are below their maximum right now (NVML's clock throttle
    /// reasons: "GPU_IDLE", "SW_POWER_CAP", "HW_THERMAL_SLOWDOWN", ...); empty
    /// when nothing holds them back.
    pub throttle_reasons: Option<Vec<String>>,
}

/// Where the `gpu_before` / `gpu_after` states come from, or why there are none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TelemetrySource {
    /// E.g. "NVML (libnvidia-ml, via nvml-wrapper), GPU-<uuid>"; null when not read.
    pub source: Option<String>,
    /// Why no state was read: the device is the CPU, or NVML could not be loaded.
    pub unavailable_reason: Option<String>,
}

/// Whether an optional section ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SectionStatus {
    Ok,
    Skipped,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fastest_sample_is_of_the_rates_clock() {
        let wall = crate::telemetry::timed_at(&[3.0, 1.5, 2.0], &[]);
        assert_eq!((wall.fastest_ms(), wall.rate_ms().0), (1.5, 2.0));
        // On a GPU the events' samples, not the wall clock's.
        let gpu = crate::telemetry::timed_at(&[3.0, 1.0, 2.0], &[2.5, 2.25, 4.0]);
        assert_eq!(gpu.fastest_ms(), 2.25);
        let mut none = wall.clone();
        none.samples_wall_ms.clear();
        assert_eq!(none.fastest_ms(), 2.0, "no samples kept: the median");
    }
}
