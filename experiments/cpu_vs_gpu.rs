//! CPU vs GPU: the same fp32 matmul, same inputs, on the CPU and on the GPU in
//! one run, and the speedup (CPU median over GPU median). Without a GPU the CPU
//! row is measured and the GPU row says why it was skipped. The measurement is
//! `candle_lab::bench::cpu_vs_gpu`.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::{cpu_vs_gpu, matmul};
use candle_lab::cli::{parse, result_file, BenchSize, Common};
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::precision::Precision;
use candle_lab::schema::Body;
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
    let cfg = matmul::Config {
        size: args.bench.n(),
        plan: args.bench.plan(),
        precisions: vec![Precision::F32],
        accuracy_rows: 16,
    };
    if args.common.dry_run {
        let plans = [cfg.clone(), cfg.cpu_fp32_comparison()];
        return args.common.dry_run("cpu_vs_gpu", &args, &plans);
    }
    let (device, info) = select(args.common.device)?;
    let host = args.bench.host.check();
    let cpu_cfg = cfg.cpu_fp32_comparison();
    fits::check(&Device::Cpu, &matmul::need(&Device::Cpu, &cpu_cfg), host)?;
    if device.is_cuda() {
        fits::check(&device, &matmul::need(&device, &cfg), host)?;
    }
    let outputs = args.common.outputs("cpu_vs_gpu", &info)?;
    args.common.wait_for_quiet()?;
    let gpu_name = device.is_cuda().then_some(info.name.as_str());
    let result = cpu_vs_gpu::run(&device, gpu_name, &cfg, &info.chosen_because)?;
    let done = Completion::of_rows(std::iter::once(&result.cpu).chain(&result.gpu));
    let file = result_file(info, Body::CpuVsGpu(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(done)
}
