//! Memory: how fast data moves, and what happens when it does not fit. Host <->
//! device transfers (pageable, pinned, Candle's `to_device`); a plain copy as the
//! device's measured bandwidth ceiling, and Candle's memory-bound operations
//! (copy, add, multiply-add, transpose, casts, sum) against it per dtype, with
//! their bytes stated; a request larger than memory; and the points of a
//! roofline. Transfers and the GPU out-of-memory demonstration need a GPU and
//! say so on the CPU.

use anyhow::Result;
use candle_core::{DType, Device};
use candle_lab::bench::memory::{self, default_matmul_size, default_mib, default_plan, Config};
use candle_lab::cli::{LadderFlags, RunCounts, MAX_SIZE};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::precision::plain_dtype;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Memory;

#[derive(clap::Args, Debug)]
struct Flags {
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
    ladder: LadderFlags,
}

impl Experiment for Memory {
    const KIND: Kind = Kind::Memory;
    const ABOUT: &'static str = "Transfers, Candle's memory-bound operations against the \
        measured copy ceiling, out of memory, and roofline points.";
    const SMALL: &'static [&'static str] = &[
        "--ladder-max-mib",
        "8",
        "--mib",
        "1",
        "--matmul-size",
        "128",
        "--transfer-max-mib",
        "1",
        "--iters",
        "2",
        "--warmup",
        "1",
    ];
    type Flags = Flags;
    type Config = Config;

    fn config(f: &Flags, on_cuda: bool) -> Result<Config> {
        Ok(config(f, on_cuda))
    }

    fn needs(cfg: &Config, device: &Device) -> Result<Vec<Need>> {
        Ok(memory::needs(device, cfg))
    }

    fn run(cfg: &Config, s: &Session) -> Result<Body> {
        let telemetry = s.telemetry();
        candle_lab::note!(
            "memory: {} MiB f32 tensors, warmup {}, iters {}, on {}",
            cfg.mib,
            cfg.plan.warmup,
            cfg.plan.iters,
            s.info.label
        );
        let result = memory::run(&s.device, s.gpu_name(), cfg, telemetry)?;
        Ok(Body::Memory(result))
    }
}

/// What the flags ask for, with the device's defaults where a flag is absent.
fn config(args: &Flags, on_cuda: bool) -> Config {
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
        ladder_max: args.ladder.max_bytes(),
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Memory>()
}
