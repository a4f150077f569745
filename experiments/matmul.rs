//! Matmul: how precision changes the speed and memory of one square matrix
//! multiply. Times C = A x B per precision on the selected device (warm-up,
//! synchronized samples, CUDA events on a GPU), with peak memory, GFLOP/s, the
//! share of the datasheet peak, and accuracy against f64. On a GPU it also times
//! fp32 on the CPU, as the reference lab does, for the speedup. The JSON keeps
//! the reference's field names. The measurement is `candle_lab::bench::matmul`.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::matmul::{self, Config};
use candle_lab::cli::{parse, result_file, BenchSize, Common, Dtypes};
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Square matmul per precision: median time, GFLOP/s, peak memory, accuracy.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    #[command(flatten)]
    bench: BenchSize,

    #[command(flatten)]
    dtypes: Dtypes,

    /// Rows of the result checked against an f64 reference on the CPU.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    accuracy_rows: u64,

    /// On a GPU, skip the fp32 CPU comparison (max(3, iters/4) CPU runs).
    #[arg(long)]
    no_cpu: bool,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

/// The benchmark the flags ask for, checked (a cuBLAS mode needs a GPU).
fn config(args: &Args, on_cuda: bool) -> Result<Config> {
    Ok(Config {
        size: args.bench.n(),
        plan: args.bench.plan(),
        precisions: args.dtypes.for_device(on_cuda)?,
        accuracy_rows: args.accuracy_rows as usize,
    })
}

/// A failed row does not end the run: its error is in its row, the report is
/// written, and the exit code says that rows failed.
fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        let cfg = config(&args, args.common.device.expects_cuda())?;
        return args.common.dry_run("matmul", &args, &cfg);
    }
    let (device, info) = select(args.common.device)?;
    let cfg = config(&args, device.is_cuda())?;
    // On a GPU, the reference lab also times fp32 on the CPU.
    let compare_cpu = device.is_cuda() && !args.no_cpu;
    let host = args.bench.host.check();
    fits::check(&device, &matmul::need(&device, &cfg), host)?;
    if compare_cpu {
        let cpu = cfg.cpu_fp32_comparison();
        fits::check(&Device::Cpu, &matmul::need(&Device::Cpu, &cpu), host)?;
    }
    let outputs = args.common.outputs("matmul", &info)?;
    args.common.wait_for_quiet()?;
    let n = cfg.size;
    candle_lab::note!(
        "matmul {n}x{n}, warmup {}, iters {}, on {}",
        cfg.plan.warmup,
        cfg.plan.iters,
        info.label
    );
    let gpu_name = device.is_cuda().then_some(info.name.as_str());
    let result = matmul::benchmark(&device, gpu_name, &cfg, compare_cpu)?;
    let done = Completion::of_rows(result.precisions.iter().chain(&result.cpu_fp32));
    let file = result_file(info, Body::Matmul(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(done)
}
