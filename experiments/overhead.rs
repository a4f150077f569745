//! Overhead: what a call costs beyond its arithmetic. Opening the device and
//! the first matmul and add of a fresh process (on a GPU: context creation,
//! module loading and PTX compilation, cuBLAS's first-use setup) against the
//! warm median; the smallest operations (a one-element add, a 64x64 matmul) per
//! call and per second, synchronized and queued; and matmuls with the cache
//! flushed before each sample against back-to-back ones.

use anyhow::Result;
use candle_lab::bench::overhead::{self, time_once, Config};
use candle_lab::cli::{parse, result_file, Common, HostMemoryFlag, RunCounts, MAX_SIZE};
use candle_lab::clock::Plan;
use candle_lab::device::select;
use candle_lab::export;
use candle_lab::memory::{fits, CountingAlloc};
use candle_lab::outcome::{finish, Completion};
use candle_lab::schema::Body;
use candle_lab::telemetry::{self, Telemetry};
use clap::Parser;

/// Warm-up and timed runs per row unless --warmup and --iters say otherwise.
const DEFAULT_PLAN: Plan = Plan {
    warmup: 3,
    iters: 20,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// First call against warm, launch overhead of the smallest operations, and
/// cold against hot cache.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: Common,

    /// Runs per row (defaults: 20 timed, for queued launch samples, warm and
    /// cache samples; 3 warm-up).
    #[command(flatten)]
    counts: RunCounts,

    /// Side of the n x n f32 matmul and add whose first call is timed.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    first_size: u64,

    /// Calls per queued launch sample; also the samples of a synchronized
    /// launch row (one call each).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    calls: u64,

    /// Sides of the f32 matmuls timed with a cold and a hot cache.
    #[arg(long, value_delimiter = ',', default_values_t = [256u64, 1024], value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    cache_sizes: Vec<u64>,

    /// MiB written before each cold sample (default: 3 x the largest cache).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    flush_mib: Option<u64>,

    #[command(flatten)]
    host: HostMemoryFlag,
}

fn main() -> std::process::ExitCode {
    finish(run(parse()))
}

fn run(args: Args) -> Result<Completion> {
    let cfg = Config {
        plan: args.counts.plan(DEFAULT_PLAN),
        first_size: args.first_size as usize,
        calls: args.calls as usize,
        cache_sizes: args.cache_sizes.iter().map(|&n| n as usize).collect(),
        flush_bytes: args.flush_mib.map(|m| m << 20),
    };
    if args.common.dry_run {
        return args.common.dry_run("overhead", &args, &cfg);
    }
    // Opening the device is the first thing this process does with it, so its
    // time is the context creation's own.
    let (open_ms, (device, info)) = time_once(|| select(args.common.device))?;
    fits::check_all(&device, &overhead::needs(&device, &cfg)?, args.host.check())?;
    let outputs = args.common.outputs("overhead", &info)?;
    args.common.wait_for_quiet()?;
    let telemetry = Telemetry::open(&device);
    candle_lab::note!("{}", telemetry::line(&telemetry.source()));
    let result = overhead::run(&device, open_ms, &cfg, &telemetry)?;
    let file = result_file(info, Body::Overhead(result));
    outputs.save_all(&file)?;
    export::show(&file, &[], outputs.screen())?;
    Ok(Completion::Complete)
}
