//! The clock: one function, [`time_on_device`], that every benchmark uses.
//! GPU work is queued, not done, when a Candle call returns, so a clock read
//! without synchronizing times the queueing. This module warms up first, drains
//! the queue before each sample, and stops the clock only after the device has
//! finished.

use std::time::Instant;

use anyhow::Result;
use candle_core::Device;
use indicatif::ProgressBar;

use crate::device::sync;

/// How many untimed and timed runs to make.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub warmup: usize,
    pub iters: usize,
}

/// Raw samples, in milliseconds, one per timed run.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Host wall clock around the work plus the device synchronization: what a
    /// caller waits for.
    pub wall_ms: Vec<f64>,
    /// CUDA events on Candle's stream: device-side time from the start event to
    /// the end of the work. The stream is idle when the start event is recorded,
    /// so this includes the time the GPU waits while the host launches the work
    /// (allocation, cuBLAS dispatch), but not the host's wait for completion.
    /// Empty on the CPU.
    pub gpu_ms: Vec<f64>,
}

/// Runs `work` `plan.warmup` times untimed, then `plan.iters` times timed.
///
/// Timing model, per sample:
/// 1. the device is synchronized, so no earlier work is still running;
/// 2. on CUDA a start event is recorded on Candle's stream;
/// 3. the host clock (`Instant`) starts, `work()` runs, an end event is recorded;
/// 4. the device is synchronized, then the host clock stops.
///
/// So `wall_ms` covers launching the work, running it, and the synchronization
/// that waits for it; `gpu_ms` covers the stream from start event to end event
/// (launch and run, without the host noticing completion).
/// Whatever `work` returns (the output tensor) is dropped after the clock stops,
/// so freeing it is not timed. Inputs must be made, and moved to the device, by
/// the caller before this is called. The warm-up runs pay one-time costs
/// (kernel loading, cuBLAS heuristics, page faults on first touch) off the clock.
/// `progress` advances once per run, warm-up included.
pub fn time_on_device<R>(
    device: &Device,
    plan: Plan,
    progress: &ProgressBar,
    mut work: impl FnMut() -> Result<R>,
) -> Result<Samples> {
    for _ in 0..plan.warmup {
        let out = work()?;
        sync(device)?;
        drop(out);
        progress.inc(1);
    }
    let events = EventClock::new(device)?;
    let mut samples = Samples::default();
    for _ in 0..plan.iters {
        sync(device)?;
        events.start()?;
        let t0 = Instant::now();
        let out = work()?;
        events.stop()?;
        sync(device)?;
        let wall = t0.elapsed();
        drop(out);
        samples.wall_ms.push(wall.as_secs_f64() * 1e3);
        if let Some(ms) = events.elapsed_ms()? {
            samples.gpu_ms.push(ms);
        }
        progress.inc(1);
    }
    Ok(samples)
}

/// CUDA events when the device is a GPU, nothing on the CPU.
enum EventClock {
    None,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::EventTimer),
}

impl EventClock {
    fn new(device: &Device) -> Result<Self> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => Ok(Self::Cuda(crate::cuda::EventTimer::new(dev)?)),
            _ => Ok(Self::None),
        }
    }

    fn start(&self) -> Result<()> {
        match self {
            Self::None => Ok(()),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.record_start(),
        }
    }

    fn stop(&self) -> Result<()> {
        match self {
            Self::None => Ok(()),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.record_stop(),
        }
    }

    fn elapsed_ms(&self) -> Result<Option<f64>> {
        match self {
            Self::None => Ok(None),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.elapsed_ms().map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_warmup_and_iters_and_times_each_sample() {
        let mut calls = 0;
        let bar = ProgressBar::hidden();
        let plan = Plan {
            warmup: 2,
            iters: 3,
        };
        let s = time_on_device(&Device::Cpu, plan, &bar, || {
            calls += 1;
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 5);
        assert_eq!(bar.position(), 5);
        assert_eq!(s.wall_ms.len(), 3);
        assert!(s.gpu_ms.is_empty(), "no GPU clock on the CPU");
        assert!(s.wall_ms.iter().all(|&ms| ms >= 2.0), "{:?}", s.wall_ms);
    }

    #[test]
    fn an_error_in_the_work_stops_the_run() {
        let plan = Plan {
            warmup: 1,
            iters: 3,
        };
        let r = time_on_device(
            &Device::Cpu,
            plan,
            &ProgressBar::hidden(),
            || -> Result<()> { anyhow::bail!("boom") },
        );
        assert_eq!(r.unwrap_err().to_string(), "boom");
    }
}
