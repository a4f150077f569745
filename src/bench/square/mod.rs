//! The square-matmul benchmark: the `matmul` experiment's measurement, which
//! `cpu_vs_gpu`, `sweep` and `memory` run too (shared here, below them, so
//! that no experiment's core imports another's): C = A x B for random n x n
//! matrices, timed per precision with
//! [`crate::clock::time_on_device`], with peak memory from
//! [`crate::memory::MemoryMeter`] and accuracy against an f64 reference.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use indicatif::ProgressBar;

use crate::bench::gemm_mode::GemmMode;
use crate::clock::{progress_bar, time_on_device, Plan, Sampling, StopRule};
pub use crate::formulas::{gflops, matmul_flops, matrix_bytes, payload_bytes, speedup};
use crate::memory::fits::Need;
use crate::memory::MemoryMeter;
pub use crate::precision::Precision;
use crate::schema::{fill_vs_fp32, Accuracy, DeviceKind, MatmulResults, Measured, Row, RowStatus};
use crate::stats::{relative_errors, summarize};
use crate::units::mib;

mod beside;

/// The reference lab's CPU plan for a GPU run of `gpu_iters`: one warm-up and
/// max(3, gpu_iters / 4) timed runs, since each CPU matmul is much slower.
pub fn cpu_plan(gpu_iters: usize) -> Plan {
    Plan {
        warmup: 1,
        iters: (gpu_iters / 4).max(3),
    }
}

impl Config {
    /// The fp32 CPU run that a GPU run is compared with: same size and inputs,
    /// the reference lab's [`cpu_plan`].
    pub fn cpu_fp32_comparison(&self) -> Config {
        Config {
            sampling: Sampling::Fixed(cpu_plan(self.sampling.least_samples())),
            precisions: vec![Precision::F32],
            ..self.clone()
        }
    }
}

/// What a run asks for, validated by the caller's argument parsing.
#[derive(Clone, Debug)]
pub struct Config {
    pub size: usize,
    /// How every row is sampled: the reference lab's fixed plan, or (the
    /// CPU's default) an adaptive one.
    pub sampling: Sampling,
    pub precisions: Vec<Precision>,
    /// Rows of C checked against the f64 reference.
    pub accuracy_rows: usize,
}

/// Random inputs and the f64 reference for some rows of their product, made
/// once on the host so every precision multiplies the same numbers.
pub struct Inputs {
    n: usize,
    a: Tensor,
    b: Tensor,
    rows: Vec<u32>,
    /// `rows` of A x B, computed in f64 on the CPU, row-major.
    reference: Vec<f64>,
}

impl Inputs {
    /// Standard-normal f32 matrices (never zeros: a GEMM on zeros can take
    /// shortcuts and says nothing about accuracy).
    pub fn random(n: usize, accuracy_rows: usize) -> Result<Self> {
        // At most n rows exist: say how many are checked, not how many were asked for.
        let k = accuracy_rows.clamp(1, n);
        crate::note!("inputs: two random {n}x{n} f32 matrices, f64 reference for {k} rows");
        let a = Tensor::randn(0f32, 1f32, (n, n), &Device::Cpu)?;
        let b = Tensor::randn(0f32, 1f32, (n, n), &Device::Cpu)?;
        let rows: Vec<u32> = (0..k).map(|i| (i * n / k) as u32).collect();
        let idx = Tensor::new(rows.as_slice(), &Device::Cpu)?;
        let reference = a
            .index_select(&idx, 0)?
            .to_dtype(DType::F64)?
            .matmul(&b.to_dtype(DType::F64)?)?
            .flatten_all()?
            .to_vec1::<f64>()?;
        Ok(Self {
            n,
            a,
            b,
            rows,
            reference,
        })
    }

    /// Side n of the n x n matrices.
    pub fn size(&self) -> usize {
        self.n
    }

    /// Host bytes this holds (A and B in f32) plus the f64 copy of B the
    /// reference needs while it is made.
    pub fn host_bytes(n: usize) -> u64 {
        2 * matrix_bytes(n, 4) + matrix_bytes(n, 8)
    }
}

/// Bytes one precision needs on `device` for an n x n matmul: the payload, and
/// on the CPU also f32 copies of all three matrices for formats narrower than
/// f32 (Candle's CPU bf16 matmul was measured at 288 MiB for 96 MiB of payload
/// at n = 4096: it works through f32 copies).
pub fn device_bytes(device: &Device, p: Precision, n: usize) -> u64 {
    let elem = p.dtype().size_in_bytes();
    let widened = if device.is_cpu() && elem < 4 {
        payload_bytes(n, 4)
    } else {
        0
    };
    payload_bytes(n, elem) + widened
}

/// What `cfg` needs on `device`, for [`crate::memory::fits::check`]: the
/// inputs on the host, and on the device the widest precision's matrices, or,
/// where fp32 is among the rows, the widest pair of a precision and fp32 (the
/// pass that times them in turn holds both: `beside`).
pub fn need(device: &Device, cfg: &Config) -> Need {
    let n = cfg.size;
    let bytes = |p| device_bytes(device, p, n);
    let fp32 = cfg.precisions.contains(&Precision::F32);
    let with_fp32 = |p| match p {
        Precision::F32 => bytes(p),
        _ if fp32 => bytes(p) + bytes(Precision::F32),
        _ => bytes(p),
    };
    Need {
        what: format!("--size {n}"),
        host_bytes: Inputs::host_bytes(n),
        device_bytes: cfg
            .precisions
            .iter()
            .map(|&p| with_fp32(p))
            .max()
            .unwrap_or(0),
    }
}

/// The `matmul` experiment: every precision of `cfg` on `device` (inputs made
/// once), then, on a GPU and when `compare_cpu`, the fp32 CPU comparison the
/// reference lab makes, as one result body. A failed row is kept with its error.
pub fn benchmark(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    compare_cpu: bool,
) -> Result<MatmulResults> {
    let n = cfg.size;
    let on_gpu = device.is_cuda();
    let inputs = Inputs::random(n, cfg.accuracy_rows)?;
    let rows = run(device, gpu_name, cfg, &inputs)?;
    let cpu_row = if on_gpu && compare_cpu {
        Some(run_cpu_fp32(cfg, &inputs)?)
    } else {
        None
    };
    let device_fp32 = rows.iter().find_map(Row::fp32_median_ms);
    let cpu_fp32_ms = if on_gpu {
        cpu_row.as_ref().and_then(Row::fp32_median_ms)
    } else {
        device_fp32
    };
    Ok(MatmulResults {
        size: n,
        warmup: cfg.sampling.warmup(),
        iters: cfg.sampling.least_samples(),
        sampling: Some(cfg.sampling),
        gpu_iters: on_gpu.then_some(cfg.sampling.least_samples()),
        // The CPU comparison's runs on a GPU; on a CPU run, the fp32 row's own.
        cpu_iters: match &cpu_row {
            Some(_) => Some(cfg.cpu_fp32_comparison().sampling.least_samples()),
            None if !on_gpu => device_fp32.map(|_| cfg.sampling.least_samples()),
            None => None,
        },
        device: if on_gpu {
            DeviceKind::Cuda
        } else {
            DeviceKind::Cpu
        },
        precisions: rows,
        cpu_fp32_ms,
        gpu_speedup_fp32: if on_gpu {
            cpu_fp32_ms.zip(device_fp32).map(|(c, g)| speedup(c, g))
        } else {
            None
        },
        cpu_fp32: cpu_row,
        flops_per_matmul: matmul_flops(n),
    })
}

/// What every row of one set of inputs is measured with: the device, the
/// GPU's name (`None` on the CPU; it looks up the datasheet peak), the sampling
/// plan, the inputs and the memory meter.
pub struct RowContext<'a> {
    pub device: &'a Device,
    pub gpu_name: Option<&'a str>,
    pub sampling: Sampling,
    pub inputs: &'a Inputs,
    pub meter: &'a MemoryMeter,
}

/// Runs every precision of `cfg` on `device`, then times each beside fp32 (`beside`). A row that fails (out of memory,
/// anything) is recorded with its error, one whose GEMM mode cuBLAS refuses as
/// unsupported is recorded so, and the next row runs; only a failure before
/// any row (no memory meter) is an error of the run.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    inputs: &Inputs,
) -> Result<Vec<Row>> {
    let meter = MemoryMeter::for_device(device)?;
    let ctx = RowContext {
        device,
        gpu_name,
        sampling: cfg.sampling,
        inputs,
        meter: &meter,
    };
    let mut rows = run_rows(&cfg.precisions, meter.source(), |p| {
        sample_row(&ctx, p, p.name()).map(|(m, _)| m)
    });
    fill_vs_fp32(&mut rows);
    // Each row's x fp32 again, timed in turn with fp32's (none without fp32).
    beside::fill(&ctx, &mut rows);
    Ok(rows)
}

/// One row per precision, each from `measure_row`: a row whose measurement
/// fails gets status "error" and the error's line, and the loop goes on, so one
/// failure costs one row, never the others or the report.
pub fn run_rows(
    precisions: &[Precision],
    memory_source: &'static str,
    mut measure_row: impl FnMut(Precision) -> Result<Measured>,
) -> Vec<Row> {
    precisions
        .iter()
        .map(|&p| row_of(p, memory_source, p.name(), measure_row(p)))
        .collect()
}

/// A row, and how its sampling ended (`None` when the row failed).
pub struct RowRun {
    pub row: Row,
    pub stopped_by: Option<StopRule>,
    /// Wall-clock seconds of the sampling, warm-up included.
    pub sampling_s: Option<f64>,
}

/// Measures precision `p` in `ctx`, with a progress bar labelled `label`: the
/// one row-measuring path of `matmul`, `cpu_vs_gpu` and `sweep`. A failure
/// (out of memory, anything) is that row's, recorded with its error, and a GEMM
/// mode cuBLAS refuses as unsupported is recorded so ([`row_of`]).
pub fn measure_row(ctx: &RowContext, p: Precision, label: &str) -> RowRun {
    let outcome = sample_row(ctx, p, label);
    let sampled = outcome.as_ref().ok().map(|(_, s)| *s);
    RowRun {
        row: row_of(p, ctx.meter.source(), label, outcome.map(|(m, _)| m)),
        stopped_by: sampled.map(|s| s.0),
        sampling_s: sampled.map(|s| s.1),
    }
}

/// [`measure`] under a progress bar labelled `label`.
fn sample_row(ctx: &RowContext, p: Precision, label: &str) -> Result<(Measured, (StopRule, f64))> {
    let bar = progress_bar(&ctx.sampling, label);
    let outcome = measure(ctx, p, &bar);
    bar.finish_and_clear();
    outcome
}

/// The row of precision `p`: measured, refused by the GPU's library as
/// unsupported, or failed, the last two with their error's one line.
fn row_of(p: Precision, memory_source: &str, label: &str, outcome: Result<Measured>) -> Row {
    let (status, error, measured) = match outcome {
        Ok(m) => (RowStatus::Ok, None, Some(m)),
        Err(e) if crate::error::is_unsupported(&e) => {
            let why = crate::error::error_line(&e);
            crate::note!("{label}: unsupported here, recorded so, not as a failure ({why})");
            (RowStatus::Unsupported, Some(why), None)
        }
        Err(e) => {
            let why = crate::error::error_line(&e);
            crate::note!("{label}: row failed, recorded with its error ({why})");
            (RowStatus::Error, Some(why), None)
        }
    };
    Row {
        precision: p,
        dtype: p.dtype().as_str().to_string(),
        element_bytes: p.dtype().size_in_bytes(),
        gemm_reduced_precision: p.reduced_gemm(),
        memory_source: memory_source.to_string(),
        status,
        error,
        measured,
    }
}

/// Runs [`Config::cpu_fp32_comparison`] of `cfg` on the CPU: its one row.
pub fn run_cpu_fp32(cfg: &Config, inputs: &Inputs) -> Result<Row> {
    let cpu = cfg.cpu_fp32_comparison();
    let n = cpu.size;
    crate::note!("cpu fp32 {n}x{n}: {}", cpu.sampling);
    run(&Device::Cpu, None, &cpu, inputs)?
        .pop()
        .context("the CPU fp32 row did not run")
}

/// Host threads an n x n matmul computes with: on the CPU, every thread of
/// Candle's pool once the `gemm` crate splits the work (it splits above about
/// 48 x 48 x 256 multiply-adds; from n = 256 it always does), one below that;
/// on a GPU, the one launching thread.
pub fn gemm_threads(device: &Device, n: usize) -> usize {
    if device.is_cpu() && n >= 256 {
        candle_core::utils::get_num_threads()
    } else {
        1
    }
}

/// `host` as `dtype` on `device`, in storage of its own, so the peak counts it
/// (`to_dtype`/`to_device` return the same storage when nothing changes).
fn owned_on(host: &Tensor, dtype: DType, device: &Device) -> Result<Tensor> {
    let t = host.to_dtype(dtype)?.to_device(device)?;
    let shares = device.is_cpu() && dtype == host.dtype();
    Ok(if shares { t.copy()? } else { t })
}

/// One precision's measurements, with the rule that ended sampling and the
/// seconds it took.
fn measure(
    ctx: &RowContext,
    p: Precision,
    bar: &ProgressBar,
) -> Result<(Measured, (StopRule, f64))> {
    let RowContext {
        device,
        gpu_name,
        sampling,
        inputs,
        meter,
    } = *ctx;
    let n = inputs.size();
    let dtype = p.dtype();
    let _mode = GemmMode::set(p);

    // Peak = inputs + whatever the matmuls add, above the use before the inputs.
    // (The meter synchronizes the device before each reading and the reset.)
    let base = meter.used_bytes()?;
    let a = owned_on(&inputs.a, dtype, device).context("moving A to the device")?;
    let b = owned_on(&inputs.b, dtype, device).context("moving B to the device")?;
    meter.reset_peak()?;

    let samples = time_on_device(device, sampling, bar, || Ok(a.matmul(&b)?))?;
    let peak_bytes = match (base, meter.peak_bytes()?) {
        (Some(base), Some(peak)) => Some(peak.saturating_sub(base)),
        _ => None,
    };

    // Accuracy from one more, untimed, matmul.
    let idx = Tensor::new(inputs.rows.as_slice(), device)?;
    let got = a
        .matmul(&b)?
        .index_select(&idx, 0)?
        .to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    let (max_rel_err, mean_rel_err) = relative_errors(&got, &inputs.reference);

    let wall_ms = summarize(&samples.wall_ms).context("no timed samples")?;
    let gpu_ms = summarize(&samples.gpu_ms);
    let gpu_gflops = gpu_ms.as_ref().map(|s| gflops(n, s.median));
    let datasheet_tflops = gpu_name.and_then(|name| crate::peaks::datasheet_tflops(name, p));
    let payload = payload_bytes(n, dtype.size_in_bytes());
    let sampled = (samples.stopped_by, samples.elapsed_s);
    let availability = samples.availability(gemm_threads(device, n));
    let measured = Measured {
        median_ms: wall_ms.median,
        gflops: gflops(n, wall_ms.median),
        peak_mib: peak_bytes.map(mib),
        peak_bytes,
        payload_mib: mib(payload),
        payload_bytes: payload,
        gpu_median_ms: gpu_ms.as_ref().map(|s| s.median),
        gpu_gflops,
        datasheet_tflops,
        pct_of_datasheet: datasheet_tflops
            .zip(gpu_gflops)
            .map(|(t, g)| 100.0 * g / (t * 1e3)),
        // Relative to the fp32 row: filled by `run` once every row ran.
        speedup_vs_fp32_wall: None,
        speedup_vs_fp32_gpu: None,
        vs_fp32_side_by_side: None,
        peak_vs_fp32: None,
        wall_ms,
        gpu_ms,
        samples_wall_ms: samples.wall_ms,
        samples_gpu_ms: samples.gpu_ms,
        accuracy: Accuracy {
            rows_checked: inputs.rows.len(),
            max_rel_err,
            mean_rel_err,
        },
        availability,
    };
    Ok((measured, sampled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fits::{self, HostCheck};
    use crate::outcome::Completion;
    use anyhow::bail;

    #[test]
    fn narrow_formats_on_the_cpu_count_their_f32_copies() {
        let mib_on = |d: &Device, p| mib(device_bytes(d, p, 4096));
        assert_eq!(mib_on(&Device::Cpu, Precision::F32), 192.0);
        assert_eq!(mib_on(&Device::Cpu, Precision::Bf16), 96.0 + 192.0);
        assert_eq!(mib_on(&Device::Cpu, Precision::F64), 384.0);
    }

    #[test]
    fn cpu_plan_follows_the_reference() {
        let cfg = small(vec![Precision::Bf16, Precision::F16]);
        let cpu = Config {
            sampling: Plan {
                warmup: 5,
                iters: 20,
            }
            .into(),
            ..cfg
        }
        .cpu_fp32_comparison();
        assert_eq!(
            cpu.sampling,
            Sampling::Fixed(Plan {
                warmup: 1,
                iters: 5
            })
        );
        assert_eq!(cpu.precisions, [Precision::F32]);
        assert_eq!(cpu_plan(20).iters, 5);
        assert_eq!(cpu_plan(4).iters, 3);
        assert_eq!(cpu_plan(20).warmup, 1);
        assert_eq!(speedup(168.281, 7.44), 168.281 / 7.44);
    }

    #[test]
    fn relative_error_is_scaled_by_the_reference_rms() {
        let (max, mean) = relative_errors(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]);
        assert_eq!((max, mean), (0.0, 0.0));
        // rms([3, 4]) = sqrt(12.5); errors 0 and 1.
        let (max, mean) = relative_errors(&[3.0, 5.0], &[3.0, 4.0]);
        assert!((max - 1.0 / 12.5f64.sqrt()).abs() < 1e-15);
        assert!((mean - 0.5 / 12.5f64.sqrt()).abs() < 1e-15);
    }

    fn small(precisions: Vec<Precision>) -> Config {
        Config {
            size: 64,
            sampling: Plan {
                warmup: 1,
                iters: 3,
            }
            .into(),
            precisions,
            accuracy_rows: 8,
        }
    }

    fn bench_rows(device: &Device) {
        let cfg = small(vec![
            Precision::F64,
            Precision::F32,
            Precision::F16,
            Precision::Bf16,
        ]);
        let inputs = Inputs::random(cfg.size, cfg.accuracy_rows).unwrap();
        fits::check(device, &need(device, &cfg), HostCheck::Enforce).unwrap();
        let rows = run(device, None, &cfg, &inputs).unwrap();
        assert_eq!(rows.len(), 4);
        let err = |i: usize| rows[i].measured.as_ref().unwrap().accuracy.max_rel_err;
        // Each format's error sits near its own eps: fp64 ~1e-16, fp32 ~1e-7,
        // fp16 ~1e-3 and bf16 ~1e-2 (inputs rounded to 8 significant bits).
        assert!(err(0) < 1e-12, "fp64 {}", err(0));
        assert!(err(1) < 1e-5, "fp32 {}", err(1));
        assert!((1e-5..2e-2).contains(&err(2)), "fp16 {}", err(2));
        assert!((1e-4..1e-1).contains(&err(3)), "bf16 {}", err(3));
        assert!(err(1) < err(2) && err(2) < err(3));
        for row in &rows {
            let m = row.measured.as_ref().unwrap();
            assert_eq!(m.samples_wall_ms.len(), 3);
            assert_eq!(m.payload_bytes, payload_bytes(64, row.element_bytes));
            assert!(m.median_ms > 0.0 && m.gflops > 0.0);
        }
    }

    #[test]
    fn bench_rows_cpu() {
        bench_rows(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn bench_rows_cuda() {
        bench_rows(&Device::new_cuda(0).unwrap());
    }

    /// Every row but fp32's gets its ratio to fp32 again from a pass timed in
    /// turn: as many samples a side as the plan's, the speedup fp32's median
    /// over the row's on the rate clock, with an interval; none without fp32.
    fn beside_fp32(device: &Device) {
        let cfg = small(vec![Precision::F32, Precision::F16, Precision::Bf16]);
        let with = benchmark(device, None, &cfg, false).unwrap();
        for row in &with.precisions {
            let m = row.measured.as_ref().unwrap();
            let Some(s) = &m.vs_fp32_side_by_side else {
                assert_eq!(row.precision, Precision::F32);
                continue;
            };
            assert_ne!(row.precision, Precision::F32);
            assert_eq!(s.row.samples_ms().len(), 3);
            assert_eq!(s.fp32.samples_ms().len(), 3);
            let want = s.fp32.rate_ms().0 / s.row.rate_ms().0;
            assert!((s.speedup - want).abs() < 1e-12 * want);
            assert_eq!(s.time_source, s.row.rate_ms().1);
            let i = s.interval.unwrap();
            assert!(i.lo <= i.hi && i.lo > 0.0);
        }
        let alone = benchmark(device, None, &small(vec![Precision::F16]), false).unwrap();
        assert!(alone.precisions[0]
            .measured
            .as_ref()
            .unwrap()
            .vs_fp32_side_by_side
            .is_none());
        // The pass holds a precision's matrices and fp32's at once.
        let f16 = device_bytes(device, Precision::F16, 64);
        let f32 = device_bytes(device, Precision::F32, 64);
        assert_eq!(
            need(device, &cfg).device_bytes,
            f16.max(device_bytes(device, Precision::Bf16, 64)) + f32
        );
        assert_eq!(need(device, &small(vec![Precision::F16])).device_bytes, f16);
    }

    #[test]
    fn beside_fp32_cpu() {
        beside_fp32(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn beside_fp32_cuda() {
        beside_fp32(&Device::new_cuda(0).unwrap());
    }

    #[test]
    fn sizes_beyond_memory_are_refused_before_allocating() {
        let cfg = small(vec![Precision::F32]);
        let huge = Config {
            size: 200_000,
            ..cfg
        };
        let err = fits::check(&Device::Cpu, &need(&Device::Cpu, &huge), HostCheck::Enforce)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--size 200000") && err.contains("host memory"),
            "{err}"
        );
        // Skipped on request (nothing is allocated by the check itself).
        fits::check(&Device::Cpu, &need(&Device::Cpu, &huge), HostCheck::Skip).unwrap();
    }

    #[test]
    fn a_failed_row_keeps_the_others_and_the_report() {
        let cfg = small(vec![
            Precision::F32,
            Precision::F16,
            Precision::Bf16Reduced,
            Precision::Bf16,
        ]);
        let inputs = Inputs::random(cfg.size, cfg.accuracy_rows).unwrap();
        let meter = MemoryMeter::for_device(&Device::Cpu).unwrap();
        let bar = ProgressBar::hidden();
        let ctx = RowContext {
            device: &Device::Cpu,
            gpu_name: None,
            sampling: cfg.sampling,
            inputs: &inputs,
            meter: &meter,
        };
        // Planted, as a GPU would give them: fp16 fails (not out of memory), and
        // cuBLAS refuses bf16-reduced's mode as unsupported, in cudarc's words.
        let refusal = "CublasError(CUBLAS_STATUS_NOT_SUPPORTED)";
        let rows = run_rows(&cfg.precisions, meter.source(), |p| match p {
            Precision::F16 => bail!("CublasError(CUBLAS_STATUS_EXECUTION_FAILED) (planted)"),
            Precision::Bf16Reduced => {
                Err(anyhow::anyhow!("{refusal}").context("bf16-reduced gemm (planted)"))
            }
            _ => measure(&ctx, p, &bar).map(|(m, _)| m),
        });
        let status: Vec<_> = rows.iter().map(|r| (r.precision, r.status)).collect();
        use crate::schema::RowStatus::{Error, Ok as Ran, Unsupported};
        assert_eq!(
            status,
            [
                (Precision::F32, Ran),
                (Precision::F16, Error),
                (Precision::Bf16Reduced, Unsupported),
                (Precision::Bf16, Ran)
            ]
        );
        assert!(rows[1].measured.is_none() && rows[2].measured.is_none());
        assert!(rows[1]
            .error
            .as_deref()
            .unwrap()
            .contains("CUBLAS_STATUS_EXECUTION_FAILED"));
        // The reason is kept, whole.
        assert_eq!(
            rows[2].error.as_deref(),
            Some(format!("bf16-reduced gemm (planted): {refusal}").as_str())
        );
        assert_eq!(rows[3].measured.as_ref().unwrap().samples_wall_ms.len(), 3);

        // The report is written with every row and reads back whole.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("matmul.json");
        let (_, info) = crate::device::select(crate::device::DeviceArg::Cpu).unwrap();
        let body = crate::schema::MatmulResults {
            size: cfg.size,
            warmup: 1,
            iters: 3,
            sampling: Some(cfg.sampling),
            gpu_iters: None,
            cpu_iters: None,
            device: crate::schema::DeviceKind::Cpu,
            precisions: rows.clone(),
            cpu_fp32_ms: None,
            gpu_speedup_fp32: None,
            cpu_fp32: None,
            flops_per_matmul: matmul_flops(cfg.size),
        };
        crate::export::output::prepare(&path)
            .unwrap()
            .save(&crate::experiment::result_file(
                info,
                crate::schema::Body::Matmul(body),
            ))
            .unwrap();
        let back = crate::schema::read(&path).unwrap();
        let crate::schema::Body::Matmul(back) = back.body else {
            panic!("not a matmul file")
        };
        assert_eq!(back.precisions, rows);
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["matmul"]["precisions"][2]["status"], "unsupported");

        // Shown so in the table and the CSV.
        let table = crate::export::views::matmul::rows_table("t", &back.precisions).to_string();
        assert!(
            table.contains(&format!(
                "unsupported: bf16-reduced gemm (planted): {refusal}"
            )),
            "{table}"
        );
        let csv = crate::export::views::matmul::records("m", "matmul", cfg.size, &back.precisions);
        let statuses: Vec<&str> = csv.rows.iter().map(|r| r[5].as_str()).collect();
        assert_eq!(statuses, ["ok", "error", "unsupported", "ok"]);

        // Only the failure fails the run: the unsupported row is neither failed
        // nor measured, and alone it leaves the exit code 0.
        let done = Completion::of_rows(&rows);
        assert_eq!(
            done,
            Completion::RowsFailed {
                failed: vec!["fp16".into()],
                total: 4
            }
        );
        assert_eq!(
            crate::outcome::exit_code(Ok(done)).0,
            crate::outcome::EXIT_ROWS_FAILED
        );
        let without_the_failure = [&rows[0], &rows[2], &rows[3]];
        let done = Completion::of_rows(without_the_failure);
        assert_eq!(done, Completion::Complete);
        assert_eq!(crate::outcome::exit_code(Ok(done)), (0, None));
    }
}
