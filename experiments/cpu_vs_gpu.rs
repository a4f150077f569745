//! CPU vs GPU: the same fp32 matmul, same inputs, on the CPU and on the GPU in
//! one run, and the speedup (CPU median over GPU median). Without a GPU the CPU
//! row is measured and the GPU row says why it was skipped. The measurement is
//! `candle_lab::bench::cpu_vs_gpu`.

use anyhow::Result;
use candle_core::Device;
use candle_lab::bench::{cpu_vs_gpu, square};
use candle_lab::cli::BenchSize;
use candle_lab::experiment::{self, Experiment, Session};
use candle_lab::memory::fits::Need;
use candle_lab::memory::CountingAlloc;
use candle_lab::precision::Precision;
use candle_lab::schema::{Body, Kind};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

struct CpuVsGpu;

/// `--device` names the GPU side; the CPU side is always the CPU.
#[derive(clap::Args, Debug)]
struct Flags {
    #[command(flatten)]
    bench: BenchSize,
}

/// The GPU side's plan and the CPU side's (the reference lab's CPU runs).
#[derive(Debug)]
struct Plan {
    gpu: square::Config,
    cpu: square::Config,
}

impl Experiment for CpuVsGpu {
    const KIND: Kind = Kind::CpuVsGpu;
    const ABOUT: &'static str = "The same fp32 matmul on the CPU and on the GPU, and the speedup.";
    const SMALL: &'static [&'static str] = &["--size", "128", "--iters", "3", "--warmup", "1"];
    type Flags = Flags;
    type Config = Plan;

    fn config(f: &Flags, _: bool) -> Result<Plan> {
        let gpu = square::Config {
            size: f.bench.n(),
            sampling: f.bench.plan().into(),
            precisions: vec![Precision::F32],
            accuracy_rows: 16,
        };
        let cpu = gpu.cpu_fp32_comparison();
        Ok(Plan { gpu, cpu })
    }

    fn needs(p: &Plan, device: &Device) -> Result<Vec<Need>> {
        let mut needs = vec![square::need(&Device::Cpu, &p.cpu).on_host()];
        if device.is_cuda() {
            needs.push(square::need(device, &p.gpu));
        }
        Ok(needs)
    }

    /// A failed row (CPU or GPU) is kept with its error.
    fn run(p: &Plan, s: &Session) -> Result<Body> {
        let result = cpu_vs_gpu::run(&s.device, s.gpu_name(), &p.gpu, &s.info.chosen_because)?;
        Ok(Body::CpuVsGpu(result))
    }
}

fn main() -> std::process::ExitCode {
    experiment::main::<CpuVsGpu>()
}
