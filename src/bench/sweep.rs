//! The sweep: square matmul throughput across sizes x precisions, to see the
//! shape of performance (where caches stop helping, what an awkward size such
//! as 1023 or 1025 costs against 1024) rather than one point. Each point is
//! measured by [`crate::bench::square::measure_row`], the path `matmul` uses, under an
//! adaptive plan ([`plan`]): at least 10 samples, then until the median is known
//! to +-1% or the point's time runs out. [`run`] hands the results to its caller
//! after every point, so the caller can save and show them as it goes.

use anyhow::{Context, Result};
use candle_core::Device;

use crate::bench::square::{self, measure_row, Inputs, RowContext, RowRun};
use crate::clock::{clock_overhead, Adaptive, Plan, Sampling};
use crate::memory::MemoryMeter;
use crate::precision::Precision;
use crate::schema::{DeviceKind, SweepPoint, SweepResults};

/// The CPU's default sizes: powers of two and the awkward 1000, 1023, 1025
/// and 3000. At the default precisions and `--max-seconds` the sweep takes a
/// few minutes at most on a 2-core CPU (docs/experiments.md, "sweep").
pub const CPU_SIZES: [usize; 10] = [64, 128, 256, 512, 1000, 1023, 1024, 1025, 2048, 3000];

/// A GPU's default sizes: 256 to 16384, with the same awkward sizes.
pub const GPU_SIZES: [usize; 11] = [
    256, 512, 1000, 1023, 1024, 1025, 2048, 3000, 4096, 8192, 16384,
];

/// Default sampling time per point, in seconds.
pub const DEFAULT_MAX_SECONDS: f64 = 2.0;
/// Bounds of `--max-seconds`.
pub const MAX_SECONDS_RANGE: (f64, f64) = (0.01, 3600.0);
/// Rows of C checked against the f64 reference at every point.
pub const ACCURACY_ROWS: usize = 16;

/// The default sizes on a GPU or on the CPU.
pub fn default_sizes(on_cuda: bool) -> Vec<usize> {
    if on_cuda {
        GPU_SIZES.to_vec()
    } else {
        CPU_SIZES.to_vec()
    }
}

/// A point's adaptive plan: two warm-up runs, at least 10 samples and 0.1 s
/// (or `max_seconds`, if less) of measured time, then until the median's 95%
/// interval is within +-1%, or `max_seconds` of wall time, or 10,000 samples.
pub fn plan(max_seconds: f64) -> Sampling {
    Sampling::Adaptive(Adaptive {
        warmup: 2,
        min_samples: 10,
        max_samples: 10_000,
        min_time_s: 0.1f64.min(max_seconds),
        max_time_s: max_seconds,
        target_rel_spread: 0.01,
    })
}

/// What a sweep runs: sizes in ascending order, each once, and precisions.
#[derive(Clone, Debug)]
pub struct Config {
    pub sizes: Vec<usize>,
    pub precisions: Vec<Precision>,
    pub sampling: Sampling,
}

impl Config {
    /// Sorts and de-duplicates `sizes` (a sweep is drawn against n) and checks
    /// the plan.
    pub fn new(
        mut sizes: Vec<usize>,
        precisions: Vec<Precision>,
        sampling: Sampling,
    ) -> Result<Self> {
        sizes.sort_unstable();
        sizes.dedup();
        sampling.validate()?;
        Ok(Self {
            sizes,
            precisions,
            sampling,
        })
    }

    /// What must fit: the largest size's matmul, every precision of it (the
    /// sizes run in ascending order, one at a time).
    pub fn needs(&self, device: &Device) -> Vec<crate::memory::fits::Need> {
        let Some(&n) = self.sizes.last() else {
            return Vec::new();
        };
        let largest = square::Config {
            size: n,
            sampling: Plan {
                warmup: 0,
                iters: 1,
            }
            .into(),
            precisions: self.precisions.clone(),
            accuracy_rows: ACCURACY_ROWS,
        };
        vec![crate::memory::fits::Need {
            what: format!("--sizes (largest {n})"),
            ..square::need(device, &largest)
        }]
    }
}

/// Runs every size at every precision on `device`, sizes outer (one set of
/// inputs per size), and calls `on_point` with the results so far after every
/// point. The clock's overhead is measured first. `gpu_name` looks up the
/// datasheet peak. A point that runs out of device memory records why and the
/// sweep goes on; any other error, or one from `on_point`, ends it.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    mut on_point: impl FnMut(&SweepResults) -> Result<()>,
) -> Result<SweepResults> {
    let overhead = clock_overhead(device).context("measuring the clock's overhead")?;
    let meter = MemoryMeter::for_device(device)?;
    let mut results = SweepResults {
        device: if device.is_cuda() {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        },
        sizes: cfg.sizes.clone(),
        precisions: cfg.precisions.clone(),
        sampling: cfg.sampling,
        clock_overhead: overhead,
        complete: false,
        points: Vec::new(),
    };
    for &n in &cfg.sizes {
        let inputs = Inputs::random(n, ACCURACY_ROWS)?;
        let ctx = RowContext {
            device,
            gpu_name,
            sampling: cfg.sampling,
            inputs: &inputs,
            meter: &meter,
        };
        for &p in &cfg.precisions {
            let label = format!("{p} {n}");
            let RowRun {
                row,
                stopped_by,
                sampling_s,
            } = measure_row(&ctx, p, &label);
            let point = SweepPoint {
                size: n,
                row,
                stopped_by,
                sampling_s,
            };
            results.points.push(point);
            results.complete = results.points.len() == results.planned();
            on_point(&results)?;
        }
    }
    Ok(results)
}

#[cfg(test)]
pub(crate) mod tests;
