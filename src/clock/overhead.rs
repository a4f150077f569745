//! What the clock itself adds to a sample: an empty work item timed through
//! the same path.

use anyhow::{Context, Result};
use candle_core::Device;
use indicatif::ProgressBar;

use super::{sample, Clock, WallClock};
use crate::schema::{ClockOverhead, Plan};

/// The plan [`clock_overhead`] uses: empty runs are cheap, so many.
pub const OVERHEAD_PLAN: Plan = Plan {
    warmup: 10,
    iters: 200,
};

/// Measures the clock's own overhead on `device` with the host clock.
pub fn clock_overhead(device: &Device) -> Result<ClockOverhead> {
    clock_overhead_on(&WallClock::new(), device, OVERHEAD_PLAN)
}

/// [`clock_overhead`] on any clock and plan.
pub fn clock_overhead_on<C: Clock + ?Sized>(
    clock: &C,
    device: &Device,
    plan: Plan,
) -> Result<ClockOverhead> {
    let s = sample(
        clock,
        device,
        &plan.into(),
        &ProgressBar::hidden(),
        || Ok(()),
        || Ok(()),
    )?;
    let (wall_median_ms, wall_iqr_ms) =
        median_and_iqr(&s.wall_ms).context("no overhead samples")?;
    let gpu = median_and_iqr(&s.gpu_ms);
    Ok(ClockOverhead {
        samples: s.wall_ms.len(),
        wall_median_ms,
        wall_iqr_ms,
        gpu_median_ms: gpu.map(|g| g.0),
        gpu_iqr_ms: gpu.map(|g| g.1),
    })
}

fn median_and_iqr(samples: &[f64]) -> Option<(f64, f64)> {
    let s = crate::stats::summarize(samples)?;
    Some((s.median, s.p75 - s.p25))
}
