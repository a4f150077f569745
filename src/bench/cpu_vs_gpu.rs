//! The `cpu_vs_gpu` experiment's core: the same fp32 matmul, on the same
//! inputs, on the CPU and on the GPU in one run, and the speedup. Its rows are
//! measured by [`crate::bench::square`]'s one row path.

use anyhow::Result;
use candle_core::Device;

use crate::bench::square::{self, Config, Inputs};
use crate::formulas::speedup;
use crate::precision::Precision;
use crate::schema::{CpuVsGpuResults, Row};

/// Times `cfg` (fp32) on `device` when it is a GPU, then the reference lab's
/// CPU plan on the CPU. Without a GPU the CPU row is measured and the GPU row
/// says why it was skipped (`no_gpu`).
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    no_gpu: &str,
) -> Result<CpuVsGpuResults> {
    let n = cfg.size;
    let cpu_cfg = cfg.cpu_fp32_comparison();
    let inputs = Inputs::random(n, cfg.accuracy_rows)?;
    let (gpu, gpu_skipped) = if device.is_cuda() {
        crate::note!("gpu fp32 {n}x{n}: {}", cfg.sampling);
        (square::run(device, gpu_name, cfg, &inputs)?.pop(), None)
    } else {
        (None, Some(format!("no CUDA device in use ({no_gpu})")))
    };
    let cpu = square::run_cpu_fp32(cfg, &inputs)?;
    let cpu_fp32_ms = cpu.fp32_median_ms();
    let gpu_fp32_ms = gpu.as_ref().and_then(Row::fp32_median_ms);
    Ok(CpuVsGpuResults {
        size: n,
        precision: Precision::F32,
        cpu_threads: candle_core::utils::get_num_threads(),
        cpu_warmup: cpu_cfg.sampling.warmup(),
        cpu_iters: cpu_cfg.sampling.least_samples(),
        gpu_warmup: cfg.sampling.warmup(),
        gpu_iters: cfg.sampling.least_samples(),
        cpu,
        gpu,
        gpu_skipped,
        cpu_fp32_ms,
        gpu_fp32_ms,
        gpu_speedup_fp32: cpu_fp32_ms.zip(gpu_fp32_ms).map(|(c, g)| speedup(c, g)),
    })
}
