//! CPU versus GPU: the same fp32 square matmul, same inputs, timed on the CPU
//! and on the GPU in one run, and the speedup (CPU median over GPU median).
//! The CPU follows the reference lab's plan: one warm-up, max(3, iters/4) timed
//! runs. Without a GPU the CPU row is still measured, the GPU row says why it
//! was skipped, and the speedup is null.

use anyhow::Result;
use candle_core::Device;
use candle_lab::cli::{finish, parse, save, BenchSize, Common, Completion};
use candle_lab::device::select;
use candle_lab::matmul::{self, check_fits, rows_table, speedup, Config, Inputs, Precision, Row};
use candle_lab::memory::CountingAlloc;
use candle_lab::report::{print_tables, Report};
use clap::Parser;
use serde::Serialize;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The same fp32 matmul on the CPU and on the GPU, and the speedup.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// `--device` names the GPU side; the CPU side is always the CPU.
    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    bench: BenchSize,
}

#[derive(Serialize)]
struct CpuVsGpu {
    size: usize,
    precision: &'static str,
    /// Threads Candle's CPU matmul ran on.
    cpu_threads: usize,
    cpu_warmup: usize,
    cpu_iters: usize,
    gpu_warmup: usize,
    gpu_iters: usize,
    cpu: Row,
    gpu: Option<Row>,
    /// Why there is no GPU row.
    gpu_skipped: Option<String>,
    cpu_fp32_ms: Option<f64>,
    gpu_fp32_ms: Option<f64>,
    gpu_speedup_fp32: Option<f64>,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

/// A failed row (CPU or GPU) is kept with its error; the exit code says so.
fn run(args: Args) -> Result<Completion> {
    let (device, info) = select(args.common.device)?;
    let n = args.bench.n();
    let gpu_cfg = Config {
        size: n,
        plan: args.bench.plan(),
        precisions: vec![Precision::F32],
        accuracy_rows: 16,
    };
    let cpu_cfg = gpu_cfg.cpu_fp32_comparison();
    let host = args.bench.host_check();
    check_fits(&Device::Cpu, &cpu_cfg, host)?;
    if device.is_cuda() {
        check_fits(&device, &gpu_cfg, host)?;
    }
    let output = args.common.output_path("cpu_vs_gpu", &info)?;
    let inputs = Inputs::random(n, gpu_cfg.accuracy_rows)?;

    let (gpu, gpu_skipped) = if device.is_cuda() {
        eprintln!(
            "gpu fp32 {n}x{n}: warmup {}, iters {}",
            gpu_cfg.plan.warmup, gpu_cfg.plan.iters
        );
        (
            matmul::run(&device, Some(&info.name), &gpu_cfg, &inputs)?.pop(),
            None,
        )
    } else {
        let why = format!("no CUDA device in use ({})", info.chosen_because);
        println!("GPU row skipped: {why}");
        (None, Some(why))
    };
    let cpu = matmul::run_cpu_fp32(&gpu_cfg, &inputs)?;

    let cpu_fp32_ms = cpu.fp32_median_ms();
    let gpu_fp32_ms = gpu.as_ref().and_then(Row::fp32_median_ms);
    let result = CpuVsGpu {
        size: n,
        precision: Precision::F32.name(),
        cpu_threads: candle_core::utils::get_num_threads(),
        cpu_warmup: cpu_cfg.plan.warmup,
        cpu_iters: cpu_cfg.plan.iters,
        gpu_warmup: gpu_cfg.plan.warmup,
        gpu_iters: gpu_cfg.plan.iters,
        cpu,
        gpu,
        gpu_skipped,
        cpu_fp32_ms,
        gpu_fp32_ms,
        gpu_speedup_fp32: cpu_fp32_ms.zip(gpu_fp32_ms).map(|(c, g)| speedup(c, g)),
    };

    let mut tables = vec![rows_table(
        &format!(
            "fp32 {n}x{n} on the CPU ({}, {} threads)",
            candle_lab::env::cpu_model(),
            result.cpu_threads
        ),
        std::slice::from_ref(&result.cpu),
    )];
    if let Some(gpu) = &result.gpu {
        tables.push(rows_table(
            &format!("fp32 {n}x{n} on {} ({})", info.label, info.name),
            std::slice::from_ref(gpu),
        ));
    }
    print_tables(&tables);
    match result.gpu_speedup_fp32 {
        Some(s) => println!(
            "GPU is {s:.1}x faster than the CPU at fp32 (median wall time, device synchronized)"
        ),
        None => println!("speedup: n/a (no GPU row)"),
    }
    let done = matmul::completion(std::iter::once(&result.cpu).chain(&result.gpu));
    save(output.as_ref(), &Report::new("cpu_vs_gpu", info, result))?;
    Ok(done)
}
