//! Overhead: what a call costs beyond its arithmetic. Opening the device and
//! the first matmul and add of a fresh process (on a GPU: context creation,
//! module loading and PTX compilation, cuBLAS's first-use setup) against the
//! warm median; the smallest operations (a one-element add, a 64x64 matmul) per
//! call and per second, synchronized and queued; and matmuls with the cache
//! flushed before each sample against back-to-back ones.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::overhead::{self, Config, DEFAULT_PLAN};
use candle_lab::cli::{RunCounts, MAX_SIZE};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Overhead;

#[derive(clap::Args, Debug)]
struct Flags {
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
}

impl Experiment for Overhead {
    const KIND: Kind = Kind::Overhead;
    const ABOUT: &'static str = "First call against warm, launch overhead of the smallest \
        operations, and cold against hot cache.";
    const SMALL: &'static [&'static str] = &[
        "--first-size",
        "128",
        "--calls",
        "20",
        "--cache-sizes",
        "64,128",
        "--flush-mib",
        "4",
        "--iters",
        "3",
        "--warmup",
        "1",
    ];
    type Flags = Flags;
    type Config = Config;

    fn config(f: &Flags, _: bool) -> Result<Config> {
        Ok(Config {
            plan: f.counts.plan(DEFAULT_PLAN),
            first_size: f.first_size as usize,
            calls: f.calls as usize,
            cache_sizes: f.cache_sizes.iter().map(|&n| n as usize).collect(),
            flush_bytes: f.flush_mib.map(|m| m << 20),
        })
    }

    fn needs(cfg: &Config, device: &Device) -> Result<Vec<Need>> {
        overhead::needs(device, cfg)
    }

    /// The device's opening, timed by the runner as the process's first use
    /// of it, is the first-call table's first row.
    fn run(cfg: &Config, s: &Session) -> Result<Body> {
        let result = overhead::run(&s.device, s.open_ms, cfg, s.telemetry())?;
        Ok(Body::Overhead(result))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Overhead>()
}
