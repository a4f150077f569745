//! The square-matmul benchmark behind the `matmul` and `cpu_vs_gpu` programs:
//! C = A x B for random n x n matrices, timed per precision with
//! [`crate::timing::time_on_device`], with peak memory from
//! [`crate::memory::MemoryMeter`] and accuracy against an f64 reference.

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use indicatif::ProgressBar;

use crate::memory::MemoryMeter;
pub use crate::precision::Precision;
use crate::report::{mib, Table};
use crate::schema::{Accuracy, Measured, Row, RowStatus};
use crate::stats::summarize;
use crate::timing::{progress_bar, time_on_device, Plan, Sampling, StopRule};

/// Sets Candle's process-wide reduced-precision GEMM switches for one row and
/// puts them back when dropped. They only change cuBLAS calls: CPU GEMMs ignore them.
struct GemmMode([bool; 3]);

impl GemmMode {
    fn set(precision: Precision) -> Self {
        use candle_core::cuda as c;
        let saved = [
            c::gemm_reduced_precision_f32(),
            c::gemm_reduced_precision_f16(),
            c::gemm_reduced_precision_bf16(),
        ];
        c::set_gemm_reduced_precision_f32(precision == Precision::Tf32);
        c::set_gemm_reduced_precision_f16(precision == Precision::F16Reduced);
        c::set_gemm_reduced_precision_bf16(precision == Precision::Bf16Reduced);
        Self(saved)
    }
}

impl Drop for GemmMode {
    fn drop(&mut self) {
        use candle_core::cuda as c;
        c::set_gemm_reduced_precision_f32(self.0[0]);
        c::set_gemm_reduced_precision_f16(self.0[1]);
        c::set_gemm_reduced_precision_bf16(self.0[2]);
    }
}

/// Floating-point operations of one n x n by n x n matmul: each of the n^2
/// outputs takes n multiplications and n - 1 additions, counted as 2n^3 by
/// convention (as BLAS benchmarks and the reference lab do).
pub fn matmul_flops(n: usize) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// Throughput in GFLOP/s of one n x n matmul that took `ms` milliseconds.
pub fn gflops(n: usize, ms: f64) -> f64 {
    matmul_flops(n) / (ms * 1e-3) / 1e9
}

/// Bytes of one n x n matrix at `elem_bytes` per element: n^2 x element size.
pub fn matrix_bytes(n: usize, elem_bytes: usize) -> u64 {
    (n as u64).pow(2) * elem_bytes as u64
}

/// Bytes of the three n x n matrices (A, B and C) at `elem_bytes` per element.
pub fn payload_bytes(n: usize, elem_bytes: usize) -> u64 {
    3 * matrix_bytes(n, elem_bytes)
}

/// Error of `got` against `want`, each element's |got - want| divided by the
/// root-mean-square of `want` (a relative error that does not explode where an
/// output happens to be near zero). Returns (max, mean).
pub fn relative_errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
    let errs: Vec<f64> = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / rms)
        .collect();
    let max = errs.iter().copied().fold(0.0, f64::max);
    (max, crate::stats::mean(&errs))
}

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
            plan: cpu_plan(self.plan.iters),
            precisions: vec![Precision::F32],
            ..self.clone()
        }
    }
}

/// How many times faster the GPU was: CPU median over GPU median.
pub fn speedup(cpu_ms: f64, gpu_ms: f64) -> f64 {
    cpu_ms / gpu_ms
}

/// What a run asks for, validated by the caller's argument parsing.
#[derive(Clone, Debug)]
pub struct Config {
    pub size: usize,
    pub plan: Plan,
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
        eprintln!("inputs: two random {n}x{n} f32 matrices, f64 reference for {k} rows");
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

/// Refuses a size the device cannot hold before anything is allocated: a
/// failed CPU allocation aborts the process instead of returning an error.
pub fn check_fits(device: &Device, cfg: &Config) -> Result<()> {
    let n = cfg.size;
    let on_device = cfg
        .precisions
        .iter()
        .map(|&p| device_bytes(device, p, n))
        .max()
        .unwrap_or(0);
    let mut host_needed = Inputs::host_bytes(n);
    if device.is_cpu() {
        host_needed += on_device;
    }
    if let Some(free) = crate::env::host_memory_available_bytes() {
        if host_needed > free {
            bail!(
                "--size {n}: needs {} of host memory, {} available; choose a smaller --size",
                crate::report::bytes(host_needed),
                crate::report::bytes(free)
            );
        }
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let (free, _) = crate::cuda::memory_info(dev)?;
        if on_device > free {
            bail!(
                "--size {n}: needs {} on the GPU, {} free; choose a smaller --size",
                crate::report::bytes(on_device),
                crate::report::bytes(free)
            );
        }
    }
    Ok(())
}

/// Runs every precision of `cfg` on `device`. `gpu_name` (the driver's name of
/// the GPU, `None` on the CPU) looks up the datasheet peak. A CUDA out-of-memory
/// error ends that row only; any other error ends the run.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    inputs: &Inputs,
) -> Result<Vec<Row>> {
    let meter = MemoryMeter::for_device(device)?;
    let sampling = Sampling::Fixed(cfg.plan);
    let mut rows = Vec::new();
    for &p in &cfg.precisions {
        let ran = measure_row(device, gpu_name, &sampling, inputs, &meter, p, p.name())?;
        rows.push(ran.row);
    }
    Ok(rows)
}

/// A row, and how its sampling ended (`None` when the row failed).
pub struct RowRun {
    pub row: Row,
    pub stopped_by: Option<StopRule>,
    /// Wall-clock seconds of the sampling, warm-up included.
    pub sampling_s: Option<f64>,
}

/// Measures one precision on `inputs` (their size) under `sampling`, with a
/// progress bar labelled `label`: the one row-measuring path of `matmul`,
/// `cpu_vs_gpu` and `sweep`. A CUDA out-of-memory error ends that row only (the
/// row says why); any other error ends the run. `meter` reads peak memory on
/// `device`.
pub fn measure_row(
    device: &Device,
    gpu_name: Option<&str>,
    sampling: &Sampling,
    inputs: &Inputs,
    meter: &MemoryMeter,
    p: Precision,
    label: &str,
) -> Result<RowRun> {
    let bar = progress_bar(sampling, label);
    let outcome = measure(device, gpu_name, sampling, inputs, meter, p, &bar);
    bar.finish_and_clear();
    let (status, error, measured, sampled) = match outcome {
        Ok((m, sampled)) => (RowStatus::Ok, None, Some(m), Some(sampled)),
        Err(e) if is_out_of_memory(&e) => {
            let why = crate::error::error_line(&e);
            eprintln!("{label}: out of device memory, skipped ({why})");
            (RowStatus::Error, Some(why), None, None)
        }
        Err(e) => return Err(e.context(format!("{label} matmul"))),
    };
    Ok(RowRun {
        row: Row {
            precision: p,
            dtype: p.dtype().as_str().to_string(),
            element_bytes: p.dtype().size_in_bytes(),
            gemm_reduced_precision: p.reduced_gemm(),
            memory_source: meter.source().to_string(),
            status,
            error,
            measured,
        },
        stopped_by: sampled.map(|s| s.0),
        sampling_s: sampled.map(|s| s.1),
    })
}

/// Runs [`Config::cpu_fp32_comparison`] of `cfg` on the CPU: its one row.
pub fn run_cpu_fp32(cfg: &Config, inputs: &Inputs) -> Result<Row> {
    let cpu = cfg.cpu_fp32_comparison();
    let n = cpu.size;
    eprintln!(
        "cpu fp32 {n}x{n}: warmup {}, iters {}",
        cpu.plan.warmup, cpu.plan.iters
    );
    run(&Device::Cpu, None, &cpu, inputs)?
        .pop()
        .context("the CPU fp32 row did not run")
}

/// The terminal table of benchmark rows.
pub fn rows_table(title: &str, rows: &[Row]) -> Table {
    let mut t = Table::new(
        title,
        &[
            "precision",
            "median ms",
            "GFLOP/s",
            "IQR/median",
            "GPU ms",
            "% datasheet",
            "peak MiB",
            "payload MiB",
            "max rel err",
        ],
    );
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for r in rows {
        let Some(m) = &r.measured else {
            t.row([
                r.precision.to_string(),
                format!("error: {}", r.error.as_deref().unwrap_or("")),
            ]);
            continue;
        };
        let spread = format!(
            "{:.1}%{}",
            100.0 * m.wall_ms.iqr_over_median,
            if m.wall_ms.noisy { " noisy" } else { "" }
        );
        t.row([
            r.precision.to_string(),
            format!("{:.3}", m.median_ms),
            format!("{:.1}", m.gflops),
            spread,
            opt(m.gpu_median_ms, 3),
            opt(m.pct_of_datasheet, 1),
            opt(m.peak_mib, 1),
            format!("{:.1}", m.payload_mib),
            crate::formats::sci(m.accuracy.max_rel_err, 2),
        ]);
    }
    t
}

fn is_out_of_memory(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}").to_ascii_uppercase();
    text.contains("OUT_OF_MEMORY") || text.contains("OUT OF MEMORY")
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
    device: &Device,
    gpu_name: Option<&str>,
    sampling: &Sampling,
    inputs: &Inputs,
    meter: &MemoryMeter,
    p: Precision,
    bar: &ProgressBar,
) -> Result<(Measured, (StopRule, f64))> {
    let n = inputs.size();
    let dtype = p.dtype();
    let _mode = GemmMode::set(p);

    // Peak = inputs + whatever the matmuls add, above the use before the inputs.
    // (The meter synchronizes the device before each reading and the reset.)
    let base = meter.used_bytes()?;
    let a = owned_on(&inputs.a, dtype, device).context("moving A to the device")?;
    let b = owned_on(&inputs.b, dtype, device).context("moving B to the device")?;
    meter.reset_peak()?;

    let samples = time_on_device(device, *sampling, bar, || Ok(a.matmul(&b)?))?;
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
        wall_ms,
        gpu_ms,
        samples_wall_ms: samples.wall_ms,
        samples_gpu_ms: samples.gpu_ms,
        accuracy: Accuracy {
            rows_checked: inputs.rows.len(),
            max_rel_err,
            mean_rel_err,
        },
    };
    Ok((measured, sampled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_and_bytes_follow_their_formulas() {
        assert_eq!(matmul_flops(4096), 2.0 * 4096f64.powi(3));
        // The reference: 4096 at 7.44 ms is 18473.0 GFLOP/s.
        assert!((gflops(4096, 7.44) - 18473.0).abs() < 0.1);
        // The reference's payload: 192 MiB at fp32, 96 MiB at fp16.
        assert_eq!(mib(payload_bytes(4096, 4)), 192.0);
        assert_eq!(mib(payload_bytes(4096, 2)), 96.0);
    }

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
            plan: Plan {
                warmup: 5,
                iters: 20,
            },
            ..cfg
        }
        .cpu_fp32_comparison();
        assert_eq!((cpu.plan.warmup, cpu.plan.iters), (1, 5));
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

    #[test]
    fn gemm_mode_is_set_for_one_row_then_restored() {
        use candle_core::cuda as c;
        let flags = || {
            [
                c::gemm_reduced_precision_f32(),
                c::gemm_reduced_precision_f16(),
                c::gemm_reduced_precision_bf16(),
            ]
        };
        let before = flags();
        {
            let _mode = GemmMode::set(Precision::Tf32);
            // Without the `cuda` feature Candle's switches are stubs that read true.
            #[cfg(feature = "cuda")]
            assert_eq!(flags(), [true, false, false]);
        }
        assert_eq!(flags(), before);
    }

    fn small(precisions: Vec<Precision>) -> Config {
        Config {
            size: 64,
            plan: Plan {
                warmup: 1,
                iters: 3,
            },
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
        check_fits(device, &cfg).unwrap();
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

    #[test]
    fn sizes_beyond_memory_are_refused_before_allocating() {
        let cfg = small(vec![Precision::F32]);
        let huge = Config {
            size: 200_000,
            ..cfg
        };
        let err = check_fits(&Device::Cpu, &huge).unwrap_err().to_string();
        assert!(
            err.contains("--size 200000") && err.contains("available"),
            "{err}"
        );
    }
}
