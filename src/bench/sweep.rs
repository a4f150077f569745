//! The sweep: square matmul throughput across sizes x precisions, to see the
//! shape of performance (where caches stop helping, what an awkward size such
//! as 1023 or 1025 costs against 1024) rather than one point. Each point is
//! measured by [`crate::bench::matmul::measure_row`], the path `matmul` uses, under an
//! adaptive plan ([`plan`]): at least 10 samples, then until the median is known
//! to +-1% or the point's time runs out. [`run`] hands the results to its caller
//! after every point, so the caller can save them as it goes. The exporters
//! here ([`csv`], [`chart`], [`table`]) are pure: results in, text out.

use anyhow::{Context, Result};
use candle_core::Device;
use serde::Serialize;

use crate::bench::matmul::{self, measure_row, Inputs, RowRun};
use crate::clock::{clock_overhead, Adaptive, Plan, Sampling};
use crate::export::svg::{sweep_svg, SweepSeries};
use crate::export::table::Table;
use crate::memory::MemoryMeter;
use crate::precision::Precision;
use crate::schema::{DeviceInfo, DeviceKind, Environment, SweepPoint, SweepResults};

/// The CPU's default sizes: powers of two and the awkward 1000, 1023, 1025
/// and 3000. At the default precisions and `--max-seconds` the sweep takes a
/// few minutes at most on a 2-core CPU (README, "sweep").
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

    /// Refuses a sweep whose largest size does not fit, before anything is
    /// allocated (the need grows with n, so the largest decides).
    pub fn check_fits(&self, device: &Device) -> Result<()> {
        let Some(&n) = self.sizes.last() else {
            return Ok(());
        };
        let largest = matmul::Config {
            size: n,
            plan: Plan {
                warmup: 0,
                iters: 1,
            },
            precisions: self.precisions.clone(),
            accuracy_rows: ACCURACY_ROWS,
        };
        matmul::check_fits(device, &largest, matmul::HostCheck::Enforce)
            .context("--sizes: the largest size does not fit")
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
        for &p in &cfg.precisions {
            let label = format!("{p} {n}");
            let RowRun {
                row,
                stopped_by,
                sampling_s,
            } = measure_row(device, gpu_name, &cfg.sampling, &inputs, &meter, p, &label);
            let point = SweepPoint {
                size: n,
                row,
                stopped_by,
                sampling_s,
            };
            eprintln!("{}", point_line(&point));
            results.points.push(point);
            results.complete = results.points.len() == results.planned();
            on_point(&results)?;
        }
    }
    Ok(results)
}

/// One line per finished point, for stderr: progress that survives a log file.
fn point_line(p: &SweepPoint) -> String {
    let name = format!("{} {}", p.row.precision, p.size);
    match (&p.row.measured, p.stopped_by) {
        (Some(m), Some(rule)) => format!(
            "{name}: {:.3} ms, {:.1} GFLOP/s, {} samples, stopped by {}",
            m.median_ms,
            m.gflops,
            m.wall_ms.n,
            rule_name(rule)
        ),
        _ => format!(
            "{name}: {}",
            p.row.error.as_deref().unwrap_or("not measured")
        ),
    }
}

/// A stop rule's name as the JSON spells it ("noise_target").
pub fn rule_name(rule: crate::clock::StopRule) -> String {
    serde_json::to_value(rule)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// One CSV row: a point in long format.
#[derive(Serialize)]
struct CsvRow<'a> {
    machine: &'a str,
    experiment: &'static str,
    size: usize,
    precision: &'static str,
    status: &'static str,
    median_ms: Option<f64>,
    gflops: Option<f64>,
    n_samples: usize,
    stopped_by: Option<String>,
}

/// The points as long-format CSV, one row per point, with a header:
/// machine, experiment, size, precision, status, median_ms, gflops, n_samples,
/// stopped_by. A point that failed has empty numbers.
pub fn csv(machine: &str, results: &SweepResults) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for p in &results.points {
        let m = p.row.measured.as_ref();
        w.serialize(CsvRow {
            machine,
            experiment: "sweep",
            size: p.size,
            precision: p.row.precision.name(),
            status: if m.is_some() { "ok" } else { "error" },
            median_ms: m.map(|m| m.median_ms),
            gflops: m.map(|m| m.gflops),
            n_samples: m.map_or(0, |m| m.wall_ms.n),
            stopped_by: p.stopped_by.map(rule_name),
        })
        .context("writing a CSV row")?;
    }
    let bytes = w.into_inner().context("finishing the CSV")?;
    String::from_utf8(bytes).context("the CSV is not UTF-8")
}

/// The chart's title: "matmul sweep on AMD EPYC (cpu, 2 threads)".
pub fn title(device: &DeviceInfo, env: &Environment) -> String {
    let place = match device.kind {
        DeviceKind::Cpu => format!("cpu, {} threads", env.compute_threads),
        DeviceKind::Cuda => device.label.clone(),
    };
    format!(
        "matmul sweep on {} ({place}), median wall time",
        device.name
    )
}

/// GFLOP/s against n, one line per precision, with each precision's datasheet
/// peak (GPUs in `src/peaks.rs`) as a dashed line. Fails when no point has a
/// measurement yet.
pub fn chart(title: &str, results: &SweepResults) -> Result<String> {
    let series: Vec<SweepSeries> = results
        .precisions
        .iter()
        .map(|&p| {
            let of_p = || {
                results
                    .points
                    .iter()
                    .filter(move |pt| pt.row.precision == p)
            };
            SweepSeries {
                label: p.name().to_string(),
                points: of_p()
                    .filter_map(|pt| Some((pt.size, pt.gflops()?)))
                    .collect(),
                peak_gflops: of_p()
                    .find_map(|pt| pt.row.measured.as_ref()?.datasheet_tflops)
                    .map(|t| t * 1e3),
            }
        })
        .collect();
    sweep_svg(title, &series)
}

/// The terminal table: one row per point.
pub fn table(title: &str, results: &SweepResults) -> Table {
    let mut t = Table::new(
        title,
        &[
            "size",
            "precision",
            "median ms",
            "GFLOP/s",
            "IQR/median",
            "samples",
            "stopped by",
            "seconds",
        ],
    );
    for p in &results.points {
        let (Some(m), Some(rule)) = (&p.row.measured, p.stopped_by) else {
            t.row([
                p.size.to_string(),
                p.row.precision.to_string(),
                format!("error: {}", p.row.error.as_deref().unwrap_or("")),
            ]);
            continue;
        };
        t.row([
            p.size.to_string(),
            p.row.precision.to_string(),
            format!("{:.3}", m.median_ms),
            format!("{:.1}", m.gflops),
            format!("{:.1}%", 100.0 * m.wall_ms.iqr_over_median),
            m.wall_ms.n.to_string(),
            rule_name(rule),
            p.sampling_s.map_or("-".into(), |s| format!("{s:.1}")),
        ]);
    }
    t
}

#[cfg(test)]
pub(crate) mod tests;
