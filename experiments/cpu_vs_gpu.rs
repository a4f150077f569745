//! CPU versus GPU: the same fp32 square matmul, same inputs, timed on the CPU
//! and on the GPU in one run, and the speedup (CPU median over GPU median).
//! The CPU follows the reference lab's plan: one warm-up, max(3, iters/4) timed
//! runs. Without a GPU the CPU row is still measured, the GPU row says why it
//! was skipped, and the speedup is null.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::matmul::{self, check_fits, rows_table, speedup, Config, Inputs, Precision};
use candle_lab::cli::{finish, parse, result_file, BenchSize, Common, Completion};
use candle_lab::device::select;
use candle_lab::export::table::print_tables;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, CpuVsGpuResults, Row};
use clap::Parser;

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

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

/// A failed row (CPU or GPU) is kept with its error; the exit code says so.
fn run(args: Args) -> Result<Completion> {
    let n = args.bench.n();
    let gpu_cfg = Config {
        size: n,
        plan: args.bench.plan(),
        precisions: vec![Precision::F32],
        accuracy_rows: 16,
    };
    if args.common.dry_run {
        let plans = [gpu_cfg.clone(), gpu_cfg.cpu_fp32_comparison()];
        return args.common.dry_run("cpu_vs_gpu", &args, &plans);
    }
    let (device, info) = select(args.common.device)?;
    let cpu_cfg = gpu_cfg.cpu_fp32_comparison();
    let host = args.bench.host_check();
    check_fits(&Device::Cpu, &cpu_cfg, host)?;
    if device.is_cuda() {
        check_fits(&device, &gpu_cfg, host)?;
    }
    let output = args.common.output("cpu_vs_gpu", &info)?;
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
        (None, Some(why))
    };
    let cpu = matmul::run_cpu_fp32(&gpu_cfg, &inputs)?;

    let cpu_fp32_ms = cpu.fp32_median_ms();
    let gpu_fp32_ms = gpu.as_ref().and_then(Row::fp32_median_ms);
    let result = CpuVsGpuResults {
        size: n,
        precision: Precision::F32,
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
    let mut notes: Vec<String> = result
        .gpu_skipped
        .iter()
        .map(|why| format!("GPU row skipped: {why}"))
        .collect();
    notes.push(match result.gpu_speedup_fp32 {
        Some(s) => format!(
            "GPU is {s:.1}x faster than the CPU at fp32 (median wall time, device synchronized)"
        ),
        None => "speedup: n/a (no GPU row)".to_string(),
    });
    let done = matmul::completion(std::iter::once(&result.cpu).chain(&result.gpu));
    output.save(&result_file(info, Body::CpuVsGpu(result)))?;
    print_tables(&tables, &notes, output.screen())?;
    Ok(done)
}
