//! The square-matmul benchmark behind the `matmul` and `cpu_vs_gpu` programs:
//! C = A x B for random n x n matrices, timed per precision with
//! [`crate::clock::time_on_device`], with peak memory from
//! [`crate::memory::MemoryMeter`] and accuracy against an f64 reference.

use std::sync::{Mutex, MutexGuard};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use indicatif::ProgressBar;

use crate::cli::Completion;
use crate::clock::{progress_bar, time_on_device, Plan, Sampling, StopRule};
use crate::export::table::{mib, Table};
use crate::memory::MemoryMeter;
pub use crate::precision::Precision;
use crate::schema::{fill_vs_fp32, Accuracy, Measured, Row, RowStatus};
use crate::stats::summarize;

/// Candle's three reduced-precision GEMM switches (f32 as TF32, f16, bf16), in
/// that order, as a row of precision `p` wants them: only its own mode on.
pub fn flags_for(p: Precision) -> [bool; 3] {
    [
        p == Precision::Tf32,
        p == Precision::F16Reduced,
        p == Precision::Bf16Reduced,
    ]
}

/// Guards Candle's GEMM switches: they are process-wide, so two threads (two
/// tests under cargo's parallel runner) setting them for their own rows would
/// make each other's GEMMs use the wrong mode.
static GEMM_SWITCHES: Mutex<()> = Mutex::new(());

/// Sets Candle's process-wide reduced-precision GEMM switches for one row and
/// puts them back when dropped, holding [`GEMM_SWITCHES`] all the while, so rows
/// that set the switches run one at a time. The switches change cuBLAS calls
/// only: CPU GEMMs ignore them (and Candle's CPU-build stubs always read true).
struct GemmMode {
    saved: [bool; 3],
    _lock: MutexGuard<'static, ()>,
}

impl GemmMode {
    fn set(precision: Precision) -> Self {
        // A test that panicked while holding the lock leaves the switches in a
        // state the next row overwrites anyway: poisoning is not an error here.
        let lock = GEMM_SWITCHES.lock().unwrap_or_else(|e| e.into_inner());
        let saved = read_switches();
        write_switches(flags_for(precision));
        Self { saved, _lock: lock }
    }

    /// Puts the switches back as they were before [`Self::set`].
    fn restore(&self) {
        write_switches(self.saved);
    }
}

impl Drop for GemmMode {
    // Runs before the fields are dropped: the switches are restored while the
    // lock is still held.
    fn drop(&mut self) {
        self.restore();
    }
}

fn read_switches() -> [bool; 3] {
    use candle_core::cuda as c;
    [
        c::gemm_reduced_precision_f32(),
        c::gemm_reduced_precision_f16(),
        c::gemm_reduced_precision_bf16(),
    ]
}

fn write_switches([tf32, f16_reduced, bf16_reduced]: [bool; 3]) {
    use candle_core::cuda as c;
    c::set_gemm_reduced_precision_f32(tf32);
    c::set_gemm_reduced_precision_f16(f16_reduced);
    c::set_gemm_reduced_precision_bf16(bf16_reduced);
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

/// Whether [`check_fits`] checks host memory (`--skip-host-memory-check` turns it off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostCheck {
    Enforce,
    Skip,
}

/// Refuses a size the host or the device cannot hold before anything is
/// allocated: a failed host allocation aborts the process instead of returning
/// an error, so it has to be caught here.
pub fn check_fits(device: &Device, cfg: &Config, host: HostCheck) -> Result<()> {
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
    if host == HostCheck::Enforce {
        let reserved = try_reserve_host(host_needed);
        if let Some(note) = host_verdict(n, host_needed, crate::env::host_memory(), reserved)? {
            eprintln!("note: {note}");
        }
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let (free, _) = crate::cuda::memory_info(dev)?;
        if on_device > free {
            bail!(
                "--size {n}: needs {} on the GPU, {} free; choose a smaller --size",
                crate::export::table::bytes(on_device),
                crate::export::table::bytes(free)
            );
        }
    }
    Ok(())
}

/// Asks the allocator for `bytes` at once and gives them back untouched (no
/// page is written, so nothing is used). It fails where the real allocations
/// would: under a process limit (`ulimit -v`) or beyond what the kernel agrees
/// to commit.
fn try_reserve_host(bytes: u64) -> bool {
    let Ok(bytes) = usize::try_from(bytes) else {
        return false;
    };
    Vec::<u8>::new().try_reserve_exact(bytes).is_ok()
}

/// The host-memory decision, from what was measured: `needed` bytes for
/// `--size n`, `/proc/meminfo` (when there is one) and whether a trial
/// reservation of `needed` succeeded. Refuses what cannot fit: a reservation the
/// system refused, or more than the machine's memory and swap. Less
/// `MemAvailable` than needed is a note, not a refusal: the kernel can free
/// caches, and a VM whose memory grows on demand can take more than it reports.
pub fn host_verdict(
    n: usize,
    needed: u64,
    memory: Option<crate::env::HostMemory>,
    reserved: bool,
) -> Result<Option<String>> {
    let need = crate::export::table::bytes(needed);
    if !reserved {
        bail!(
            "--size {n}: needs {need} of host memory and the allocator refused to reserve it \
             (a process limit such as `ulimit -v`, or more than the system will commit); \
             choose a smaller --size"
        );
    }
    let Some(mem) = memory else {
        return Ok(None);
    };
    let most = mem.total_bytes.saturating_add(mem.swap_bytes);
    if needed > most {
        bail!(
            "--size {n}: needs {need} of host memory, more than this machine's {} of memory \
             and swap; choose a smaller --size (or, where memory grows on demand, \
             --skip-host-memory-check)",
            crate::export::table::bytes(most)
        );
    }
    Ok((needed > mem.available_bytes).then(|| {
        format!(
            "--size {n} needs {need} of host memory and {} is available now; trying anyway",
            crate::export::table::bytes(mem.available_bytes)
        )
    }))
}

/// Runs every precision of `cfg` on `device`. `gpu_name` (the driver's name of
/// the GPU, `None` on the CPU) looks up the datasheet peak. A row that fails
/// (out of memory, a GEMM mode cuBLAS refuses, anything) is recorded with its
/// error and the next row runs; only a failure before any row (no memory
/// meter) is an error of the run.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    inputs: &Inputs,
) -> Result<Vec<Row>> {
    let meter = MemoryMeter::for_device(device)?;
    let sampling = Sampling::Fixed(cfg.plan);
    let mut rows = run_rows(&cfg.precisions, meter.source(), |p| {
        sample_row(device, gpu_name, &sampling, inputs, &meter, p, p.name()).map(|(m, _)| m)
    });
    fill_vs_fp32(&mut rows);
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

/// Measures one precision on `inputs` (their size) under `sampling`, with a
/// progress bar labelled `label`: the one row-measuring path of `matmul`,
/// `cpu_vs_gpu` and `sweep`. A failure (out of memory, a GEMM mode cuBLAS
/// refuses, anything) is that row's, recorded with its error. `meter` reads
/// peak memory on `device`.
pub fn measure_row(
    device: &Device,
    gpu_name: Option<&str>,
    sampling: &Sampling,
    inputs: &Inputs,
    meter: &MemoryMeter,
    p: Precision,
    label: &str,
) -> RowRun {
    let outcome = sample_row(device, gpu_name, sampling, inputs, meter, p, label);
    let sampled = outcome.as_ref().ok().map(|(_, s)| *s);
    RowRun {
        row: row_of(p, meter.source(), label, outcome.map(|(m, _)| m)),
        stopped_by: sampled.map(|s| s.0),
        sampling_s: sampled.map(|s| s.1),
    }
}

/// [`measure`] under a progress bar labelled `label`.
fn sample_row(
    device: &Device,
    gpu_name: Option<&str>,
    sampling: &Sampling,
    inputs: &Inputs,
    meter: &MemoryMeter,
    p: Precision,
    label: &str,
) -> Result<(Measured, (StopRule, f64))> {
    let bar = progress_bar(sampling, label);
    let outcome = measure(device, gpu_name, sampling, inputs, meter, p, &bar);
    bar.finish_and_clear();
    outcome
}

/// The row of precision `p`: measured, or failed with its error's one line.
fn row_of(p: Precision, memory_source: &str, label: &str, outcome: Result<Measured>) -> Row {
    let (status, error, measured) = match outcome {
        Ok(m) => (RowStatus::Ok, None, Some(m)),
        Err(e) => {
            let why = crate::error::error_line(&e);
            eprintln!("{label}: row failed, recorded with its error ({why})");
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

/// [`Completion::RowsFailed`] naming every row that failed, else complete.
pub fn completion<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Completion {
    let mut total = 0;
    let mut failed = Vec::new();
    for row in rows {
        total += 1;
        if row.measured.is_none() {
            failed.push(row.precision.to_string());
        }
    }
    if failed.is_empty() {
        Completion::Complete
    } else {
        Completion::RowsFailed { failed, total }
    }
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
            "x fp32",
            "IQR/median",
            "GPU ms",
            "GPU x fp32",
            "% datasheet",
            "peak MiB",
            "peak x fp32",
            "payload MiB",
            "max rel err",
        ],
    );
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    // Against the fp32 row: speed (2.00x is twice as fast), peak (0.50x is half).
    let times = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
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
            times(m.speedup_vs_fp32_wall),
            spread,
            opt(m.gpu_median_ms, 3),
            times(m.speedup_vs_fp32_gpu),
            opt(m.pct_of_datasheet, 1),
            opt(m.peak_mib, 1),
            times(m.peak_vs_fp32),
            format!("{:.1}", m.payload_mib),
            crate::bench::floats::sci(m.accuracy.max_rel_err, 2),
        ]);
    }
    t
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
        // Relative to the fp32 row: filled by `run` once every row ran.
        speedup_vs_fp32_wall: None,
        speedup_vs_fp32_gpu: None,
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
    fn each_row_turns_on_only_its_own_gemm_switch() {
        assert_eq!(flags_for(Precision::Tf32), [true, false, false]);
        assert_eq!(flags_for(Precision::F16Reduced), [false, true, false]);
        assert_eq!(flags_for(Precision::Bf16Reduced), [false, false, true]);
        for p in Precision::ALL {
            let on = flags_for(p).iter().filter(|&&f| f).count();
            assert_eq!(on, usize::from(p.reduced_gemm()), "{p}");
        }
    }

    #[test]
    fn gemm_mode_holds_the_switches_lock_while_it_lives() {
        let mode = GemmMode::set(Precision::F32);
        assert!(
            GEMM_SWITCHES.try_lock().is_err(),
            "no other row or test can set the switches meanwhile"
        );
        drop(mode);
    }

    // Candle's CPU-build switches are stubs (they read true, set nothing), so
    // what the switches hold is checked on CUDA builds only.
    #[cfg(feature = "cuda")]
    #[test]
    fn gemm_mode_is_set_for_one_row_then_restored() {
        let mode = GemmMode::set(Precision::Tf32);
        assert_eq!(read_switches(), [true, false, false]);
        assert_eq!(
            mode.saved, [false; 3],
            "rows leave Candle's defaults behind"
        );
        // Restored while the lock is still held, so no other test interferes.
        mode.restore();
        assert_eq!(read_switches(), mode.saved);
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
        check_fits(device, &cfg, HostCheck::Enforce).unwrap();
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
        let err = check_fits(&Device::Cpu, &huge, HostCheck::Enforce)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--size 200000") && err.contains("host memory"),
            "{err}"
        );
        // Skipped on request (nothing is allocated by the check itself).
        check_fits(&Device::Cpu, &huge, HostCheck::Skip).unwrap();
    }

    #[test]
    fn host_memory_refuses_what_cannot_fit_not_what_is_not_free_now() {
        use crate::env::HostMemory;
        const GIB: u64 = 1 << 30;
        let mem = HostMemory {
            total_bytes: 16 * GIB,
            swap_bytes: 4 * GIB,
            available_bytes: 2 * GIB,
        };
        // Within what is available: nothing to say.
        assert_eq!(host_verdict(8192, GIB, Some(mem), true).unwrap(), None);
        // More than is available now (a VM that grows, caches to free): a note.
        let note = host_verdict(8192, 3 * GIB, Some(mem), true)
            .unwrap()
            .unwrap();
        assert!(note.contains("trying anyway"), "{note}");
        // More than memory and swap together: refused.
        let err = host_verdict(8192, 21 * GIB, Some(mem), true).unwrap_err();
        assert!(err.to_string().contains("memory and swap"), "{err}");
        // A refused reservation (a process limit) is refused whatever meminfo says.
        let err = host_verdict(8192, GIB, Some(mem), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ulimit -v") && err.contains("--size 8192"),
            "{err}"
        );
        // No /proc/meminfo: only the reservation decides.
        assert_eq!(host_verdict(8192, 100 * GIB, None, true).unwrap(), None);
    }

    #[test]
    fn a_reservation_beyond_the_address_space_fails() {
        assert!(try_reserve_host(1 << 20));
        assert!(!try_reserve_host(u64::MAX));
    }

    #[test]
    fn a_failed_row_keeps_the_others_and_the_report() {
        let cfg = small(vec![Precision::F32, Precision::F16, Precision::Bf16]);
        let inputs = Inputs::random(cfg.size, cfg.accuracy_rows).unwrap();
        let meter = MemoryMeter::for_device(&Device::Cpu).unwrap();
        let bar = ProgressBar::hidden();
        // The middle row fails as cuBLAS refusing a mode would: not out of memory.
        let rows = run_rows(&cfg.precisions, meter.source(), |p| {
            if p == Precision::F16 {
                bail!("cuBLAS: CUBLAS_STATUS_NOT_SUPPORTED (injected)");
            }
            measure(
                &Device::Cpu,
                None,
                &Sampling::Fixed(cfg.plan),
                &inputs,
                &meter,
                p,
                &bar,
            )
            .map(|(m, _)| m)
        });
        let status: Vec<_> = rows.iter().map(|r| (r.precision, r.status)).collect();
        use crate::schema::RowStatus::{Error, Ok as Ran};
        assert_eq!(
            status,
            [
                (Precision::F32, Ran),
                (Precision::F16, Error),
                (Precision::Bf16, Ran)
            ]
        );
        assert!(rows[1].measured.is_none());
        assert!(rows[1]
            .error
            .as_deref()
            .unwrap()
            .contains("CUBLAS_STATUS_NOT_SUPPORTED"));
        assert_eq!(rows[2].measured.as_ref().unwrap().samples_wall_ms.len(), 3);

        // The report is written with every row and reads back whole.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("matmul.json");
        let (_, info) = crate::device::select(crate::device::DeviceArg::Cpu).unwrap();
        let body = crate::schema::MatmulResults {
            size: cfg.size,
            warmup: 1,
            iters: 3,
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
            .save(&crate::cli::result_file(
                info,
                crate::schema::Body::Matmul(body),
            ))
            .unwrap();
        let back = crate::schema::read(&path).unwrap();
        let crate::schema::Body::Matmul(back) = back.body else {
            panic!("not a matmul file")
        };
        assert_eq!(back.precisions, rows);
        let done = completion(&rows);
        assert_eq!(
            done,
            Completion::RowsFailed {
                failed: vec!["fp16".into()],
                total: 3
            }
        );
        assert_eq!(
            crate::cli::exit_code(Ok(done)).0,
            crate::cli::EXIT_ROWS_FAILED
        );
        assert_eq!(completion(&rows[..1]), Completion::Complete);
    }
}
