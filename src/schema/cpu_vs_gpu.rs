//! The body of `cpu_vs_gpu`: the same fp32 matmul on the CPU and on the GPU,
//! one [`Row`] each, and the speedup.

use anyhow::Result;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::TimedRow;
use super::{DeviceKind, Row};
use crate::precision::Precision;

/// The same fp32 matmul on the CPU and the GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CpuVsGpuResults {
    pub size: usize,
    pub precision: Precision,
    /// Threads the CPU matmul ran on.
    pub cpu_threads: usize,
    pub cpu_warmup: usize,
    pub cpu_iters: usize,
    pub gpu_warmup: usize,
    pub gpu_iters: usize,
    pub cpu: Row,
    pub gpu: Option<Row>,
    /// Why there is no GPU row.
    pub gpu_skipped: Option<String>,
    pub cpu_fp32_ms: Option<f64>,
    pub gpu_fp32_ms: Option<f64>,
    pub gpu_speedup_fp32: Option<f64>,
}

impl super::rows::Rows for CpuVsGpuResults {
    fn validate(&self) -> Result<()> {
        std::iter::once(&self.cpu)
            .chain(&self.gpu)
            .try_for_each(Row::validate)
    }

    /// The CPU row, then the GPU's: a failure named by the precision alone,
    /// a clock by its side ("cpu fp32").
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let sides = [(&self.cpu, "cpu", DeviceKind::Cpu)];
        let gpu = self.gpu.as_ref().map(|g| (g, "gpu", DeviceKind::Cuda));
        sides
            .into_iter()
            .chain(gpu)
            .map(|(row, side, device)| {
                let name = row.precision.to_string();
                row.timed_row(
                    name,
                    format!("{side} fp32"),
                    "cpu_vs_gpu",
                    self.size,
                    device,
                )
            })
            .collect()
    }
}
