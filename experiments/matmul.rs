//! Matmul: how precision changes the speed and memory of one square matrix
//! multiply. Times C = A x B per precision on the selected device (warm-up,
//! synchronized samples, CUDA events on a GPU), with peak memory, GFLOP/s, the
//! share of the datasheet peak, and accuracy against f64. On a GPU it also times
//! fp32 on the CPU, as the reference lab does, for the speedup. The JSON keeps
//! the reference's field names. The measurement is `candle_lab::bench::square`.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::matmul;
use candle_lab::cli::{BenchSize, Dtypes};
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct Matmul;

#[derive(clap::Args, Debug)]
struct Flags {
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

/// The benchmark, and whether the reference lab's fp32 CPU comparison runs
/// beside it (on a GPU, unless --no-cpu).
#[derive(Debug)]
struct Plan {
    bench: matmul::Config,
    compare_cpu: bool,
}

impl Experiment for Matmul {
    const KIND: Kind = Kind::Matmul;
    const ABOUT: &'static str = "Square matmul per precision: median time, GFLOP/s, peak memory, \
        accuracy. Sampled as the reference lab does (5 warm-up runs, 20 timed) on a GPU or when \
        --iters or --warmup is given; on the CPU otherwise adaptively (1 warm-up, at least 5 \
        samples, then until the median is known to +-1% or 3 s have passed).";
    const SMALL: &'static [&'static str] = &["--size", "128", "--iters", "3", "--warmup", "1"];
    type Flags = Flags;
    type Config = Plan;

    /// A cuBLAS mode needs a GPU.
    fn config(f: &Flags, on_cuda: bool) -> Result<Plan> {
        Ok(Plan {
            bench: matmul::Config {
                size: f.bench.n(),
                sampling: f.bench.sampling(on_cuda),
                precisions: f.dtypes.for_device(on_cuda)?,
                accuracy_rows: f.accuracy_rows as usize,
            },
            compare_cpu: on_cuda && !f.no_cpu,
        })
    }

    fn needs(p: &Plan, device: &Device) -> Result<Vec<Need>> {
        let mut needs = vec![matmul::need(device, &p.bench)];
        if p.compare_cpu {
            let cpu = p.bench.cpu_fp32_comparison();
            needs.push(matmul::need(&Device::Cpu, &cpu).on_host());
        }
        Ok(needs)
    }

    /// A failed row does not end the run: its error is in its row.
    fn run(p: &Plan, s: &Session) -> Result<Body> {
        let cfg = &p.bench;
        let n = cfg.size;
        candle_lab::note!("matmul {n}x{n}, {}, on {}", cfg.sampling, s.info.label);
        let result = matmul::benchmark(&s.device, s.gpu_name(), cfg, p.compare_cpu)?;
        Ok(Body::Matmul(result))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<Matmul>()
}
