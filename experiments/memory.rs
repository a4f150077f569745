//! Memory: how fast data moves, and what happens when it does not fit. Host <->
//! device transfers (pageable, pinned, Candle's `to_device`); a plain copy as the
//! device's measured bandwidth ceiling, and Candle's memory-bound operations
//! (copy, add, multiply-add, transpose, casts, sum) against it per dtype, with
//! their bytes stated; a request larger than memory; and the points of a
//! roofline. Transfers and the GPU out-of-memory demonstration need a GPU and
//! say so on the CPU.

use anyhow::Result;
use candle_core::DType;
use candle_lab::bench::memory::{
    self, check_fits, default_matmul_size, default_mib, default_plan, Config,
};
use candle_lab::cli::{finish, parse, result_file, Common, Completion, MAX_SIZE};
use candle_lab::clock::Plan;
use candle_lab::device::select;
use candle_lab::export::table::print_tables;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::Body;
use candle_lab::telemetry::{self, Telemetry};
use clap::Parser;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Transfers, Candle's memory-bound operations against the measured copy
/// ceiling, out of memory, and roofline points.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Size of one f32 tensor in MiB (default: 32 on the CPU, 1024 on a GPU).
    /// Tensors that fit in the cache measure the cache, not memory.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    mib: Option<u64>,

    /// Timed runs per row (default: 5 on the CPU, 20 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    iters: Option<u64>,

    /// Untimed runs before timing, per row (default: 1 on the CPU, 3 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    warmup: Option<u64>,

    /// Dtypes the operations run in, comma-separated: f64, f32, f16, bf16.
    /// Casts go from f32 to each of the others.
    #[arg(long, value_delimiter = ',', default_values = ["f32", "f16", "bf16"], value_parser = parse_dtype)]
    dtypes: Vec<DType>,

    /// Side of the matmuls that give the roofline its compute points
    /// (default: 1024 on the CPU, 8192 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    matmul_size: Option<u64>,

    /// Largest host <-> device transfer in MiB (GPU only); sizes go 1, 4, 16...
    /// up to it.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    transfer_max_mib: u64,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "f64" | "fp64" => Ok(DType::F64),
        "f32" | "fp32" => Ok(DType::F32),
        "f16" | "fp16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(format!(
            "unknown dtype '{s}': expected one of f64, f32, f16, bf16"
        )),
    }
}

/// What the flags ask for, with the device's defaults where a flag is absent.
fn config(args: &Args, on_cuda: bool) -> Config {
    let mut dtypes: Vec<DType> = Vec::new();
    for &d in &args.dtypes {
        if !dtypes.contains(&d) {
            dtypes.push(d);
        }
    }
    let plan = default_plan(on_cuda);
    Config {
        mib: args.mib.unwrap_or_else(|| default_mib(on_cuda)),
        plan: Plan {
            warmup: args.warmup.map_or(plan.warmup, |n| n as usize),
            iters: args.iters.map_or(plan.iters, |n| n as usize),
        },
        dtypes,
        matmul_size: args
            .matmul_size
            .map_or_else(|| default_matmul_size(on_cuda), |n| n as usize),
        transfer_max_mib: args.transfer_max_mib,
    }
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<Completion> {
    if args.common.dry_run {
        let cfg = config(&args, args.common.device.expects_cuda());
        return args.common.dry_run("memory", &args, &cfg);
    }
    let (device, info) = select(args.common.device)?;
    let cfg = config(&args, device.is_cuda());
    check_fits(&device, &cfg)?;
    let output = args.common.output("memory", &info)?;
    let telemetry = Telemetry::open(&device);
    eprintln!("{}", telemetry::line(&telemetry.source()));
    eprintln!(
        "memory: {} MiB f32 tensors, warmup {}, iters {}, on {}",
        cfg.mib, cfg.plan.warmup, cfg.plan.iters, info.label
    );

    let gpu_name = device.is_cuda().then_some(info.name.as_str());
    let result = memory::run(&device, gpu_name, &cfg, &telemetry)?;

    let tables = memory::tables(&result, &info.label);
    let notes = memory::notes(&result);
    output.save(&result_file(info, Body::Memory(result)))?;
    print_tables(&tables, &notes, output.screen())?;
    Ok(Completion::Complete)
}
