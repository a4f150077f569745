//! Memory: how fast data moves, and what happens when it does not fit. Host <->
//! device transfers (pageable, pinned, Candle's `to_device`); a plain copy as the
//! device's measured bandwidth ceiling, and Candle's memory-bound operations
//! (copy, add, multiply-add, transpose, casts, sum) against it per dtype, with
//! their bytes stated; a request larger than memory; and the points of a
//! roofline. Transfers and the GPU out-of-memory demonstration need a GPU and
//! say so on the CPU.

use anyhow::Result;
use candle_core::DType;
use candle_lab::bench::memory::{self, default_matmul_size, default_mib, default_plan, Config};
use candle_lab::cli::{parse, result_file, Common, HostMemoryFlag, RunCounts, MAX_SIZE};
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::precision::plain_dtype;
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

    /// Runs per row (defaults: 5 timed and 1 warm-up on the CPU, 20 and 3 on a GPU).
    #[command(flatten)]
    counts: RunCounts,

    /// Dtypes the operations run in, comma-separated: f64, f32, f16, bf16.
    /// Casts go from f32 to each of the others.
    #[arg(long, value_delimiter = ',', default_values = ["f32", "f16", "bf16"], value_parser = plain_dtype)]
    dtypes: Vec<DType>,

    /// Side of the matmuls that give the roofline its compute points
    /// (default: 1024 on the CPU, 8192 on a GPU).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    matmul_size: Option<u64>,

    /// Largest host <-> device transfer in MiB (GPU only); sizes go 1, 4, 16...
    /// up to it.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    transfer_max_mib: u64,

    #[command(flatten)]
    host: HostMemoryFlag,
}

/// What the flags ask for, with the device's defaults where a flag is absent.
fn config(args: &Args, on_cuda: bool) -> Config {
    let mut dtypes: Vec<DType> = Vec::new();
    for &d in &args.dtypes {
        if !dtypes.contains(&d) {
            dtypes.push(d);
        }
    }
    Config {
        mib: args.mib.unwrap_or_else(|| default_mib(on_cuda)),
        plan: args.counts.plan(default_plan(on_cuda)),
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
    fits::check_all(&device, &memory::needs(&device, &cfg), args.host.check())?;
    let outputs = args.common.outputs("memory", &info)?;
    args.common.wait_for_quiet()?;
    let telemetry = Telemetry::open(&device);
    candle_lab::note!("{}", telemetry::line(&telemetry.source()));
    candle_lab::note!(
        "memory: {} MiB f32 tensors, warmup {}, iters {}, on {}",
        cfg.mib,
        cfg.plan.warmup,
        cfg.plan.iters,
        info.label
    );
    let gpu_name = device.is_cuda().then_some(info.name.as_str());
    let result = memory::run(&device, gpu_name, &cfg, &telemetry)?;
    let file = result_file(info, Body::Memory(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(Completion::Complete)
}
