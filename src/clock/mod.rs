//! The clock: the one place that reads a timer, synchronizes for timing, records
//! CUDA events and decides when to stop sampling. GPU work is queued, not done,
//! when a Candle call returns, so a clock read without synchronizing times the
//! queueing. This module warms up first, drains the queue before each sample,
//! and stops the clock only after the device has finished. How many samples to
//! take is a [`Sampling`] plan: a fixed count ([`Plan`], the reference lab's
//! method) or [`Adaptive`] (until the median is known well enough, or a time or
//! sample budget runs out); [`Samples::stopped_by`] says which rule ended it.
//! The time source is a [`Clock`], so tests drive the rules with a fake one, and
//! [`clock_overhead`] times an empty work item through the same path.

mod events;
mod interleave;
mod overhead;
mod progress;
mod rules;
pub mod spans;

use std::time::{Duration, Instant};

use anyhow::Result;
use candle_core::Device;
use indicatif::ProgressBar;

use crate::availability::{between, held_over_own_samples, Snapshot};
use crate::device::sync;
pub use crate::schema::{Adaptive, ClockOverhead, Plan, Sampling, StopRule};
use crate::schema::{Availability, RowKind};
use events::EventClock;
pub use interleave::{time_interleaved, Work};
pub use overhead::{clock_overhead, clock_overhead_on, OVERHEAD_PLAN};
pub use progress::progress_bar;
use rules::Rules;

/// Raw samples, in milliseconds, one per timed run, and why sampling stopped.
#[derive(Clone, Debug)]
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
    pub stopped_by: StopRule,
    /// Wall-clock time of the whole call (warm-up, setup and synchronization
    /// included), as the time budget counts it.
    pub elapsed_s: f64,
    /// What the OS counted just before the first timed sample and just after
    /// the last ([`Samples::availability`] judges it).
    pub window: Option<(Snapshot, Snapshot)>,
    /// Whether the work ran on a GPU (its host threads then mostly wait).
    pub on_gpu: bool,
    /// For a work timed in turn with others: this process's CPU seconds
    /// over its own samples, and their wall seconds (the window is all the
    /// works'); `None` for a work timed alone, or where /proc cannot say.
    pub held: Option<Held>,
}

/// CPU time in a work's own samples, and the wall time they took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Held {
    pub cpu_s: f64,
    pub wall_s: f64,
    /// The suite's kernels' work counters over the same samples.
    pub work: crate::kernels::work::Totals,
}

impl Samples {
    /// Whether the machine was ours while these samples were taken, for work
    /// that could compute with `threads` host threads (1 for a GPU's launches).
    pub fn availability(&self, threads: usize) -> Option<Availability> {
        let kind = if self.on_gpu {
            RowKind::Gpu
        } else {
            RowKind::Cpu
        };
        let (before, after) = self.window.as_ref()?;
        let window = between(before, after, threads, kind);
        let mut a = match self.held {
            Some(h) => Availability {
                threads_at_work: h.work.threads_at_work().filter(|_| kind == RowKind::Cpu),
                hand_offs: h.work.hand_offs().filter(|_| kind == RowKind::Cpu),
                ..held_over_own_samples(window, h.cpu_s, h.wall_s)
            },
            None => window,
        };
        // Wall time counts a thread the OS took mid-task as at work: never
        // more than held.
        a.threads_at_work = a.threads_at_work.zip(a.threads_held).map(|(w, h)| w.min(h));
        Some(a)
    }
}

#[cfg(test)]
impl Samples {
    /// Samples as a fixed plan of `wall_ms.len()` runs would leave them, for
    /// tests of what is built from samples.
    pub(crate) fn from_ms(wall_ms: Vec<f64>, gpu_ms: Vec<f64>) -> Self {
        Self {
            wall_ms,
            gpu_ms,
            stopped_by: StopRule::FixedCount,
            elapsed_s: 0.0,
            window: None,
            on_gpu: false,
            held: None,
        }
    }
}

/// A monotonic time source. [`WallClock`] is the real one; tests pass a fake
/// one to drive the sampling rules deterministically.
pub trait Clock {
    /// Time since a fixed origin of this clock's choosing.
    fn now(&self) -> Duration;
}

/// The host's monotonic clock ([`Instant`]).
#[derive(Clone, Copy, Debug)]
pub struct WallClock(Instant);

impl WallClock {
    pub fn new() -> Self {
        Self(Instant::now())
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for WallClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// Times `work` on `device` under `sampling` with the host clock and no setup
/// step: [`sample`] with [`WallClock`].
pub fn time_on_device<R>(
    device: &Device,
    sampling: impl Into<Sampling>,
    progress: &ProgressBar,
    work: impl FnMut() -> Result<R>,
) -> Result<Samples> {
    time_with_setup(device, sampling, progress, || Ok(()), work)
}

/// [`time_on_device`] with an untimed `setup` before every run (to flush a
/// cache, or make fresh inputs).
pub fn time_with_setup<R>(
    device: &Device,
    sampling: impl Into<Sampling>,
    progress: &ProgressBar,
    setup: impl FnMut() -> Result<()>,
    work: impl FnMut() -> Result<R>,
) -> Result<Samples> {
    sample(
        &WallClock::new(),
        device,
        &sampling.into(),
        progress,
        setup,
        work,
    )
}

/// Runs `work` `sampling.warmup()` times untimed, then timed until the plan
/// stops it (see [`Adaptive`] for the rules; a [`Plan`] stops after `iters`).
///
/// Timing model, per run:
/// 1. `setup()` runs (off the clock);
/// 2. the device is synchronized, so neither setup nor earlier work is still
///    running;
/// 3. on CUDA a start event is recorded on Candle's stream;
/// 4. `clock` is read, `work()` runs, an end event is recorded;
/// 5. the device is synchronized, then `clock` is read again.
///
/// So `wall_ms` covers launching the work, running it, and the synchronization
/// that waits for it; `gpu_ms` covers the stream from start event to end event
/// (launch and run, without the host noticing completion). Neither covers the
/// setup. Whatever `work` returns (the output tensor) is dropped after the clock
/// stops, so freeing it is not timed. Inputs must be made, and moved to the
/// device, by the caller before this is called. The warm-up runs (setup
/// included) pay one-time costs (kernel loading, cuBLAS heuristics, page faults
/// on first touch) off the clock. [`clock_overhead`] measures what this path
/// adds to an empty `work`. `progress` advances once per run, warm-up included;
/// on an adaptive plan its message shows the spread against the target.
pub fn sample<R, C: Clock + ?Sized>(
    clock: &C,
    device: &Device,
    sampling: &Sampling,
    progress: &ProgressBar,
    mut setup: impl FnMut() -> Result<()>,
    mut work: impl FnMut() -> Result<R>,
) -> Result<Samples> {
    sampling.validate()?;
    let began = clock.now();
    for _ in 0..sampling.warmup() {
        setup()?;
        sync(device)?;
        let out = work()?;
        sync(device)?;
        drop(out);
        progress.inc(1);
    }
    let events = EventClock::new(device)?;
    let mut samples = Samples {
        wall_ms: Vec::new(),
        gpu_ms: Vec::new(),
        stopped_by: StopRule::FixedCount,
        elapsed_s: 0.0,
        window: None,
        on_gpu: device.is_cuda(),
        held: None,
    };
    // The machine's counters around the timed samples (off the clock).
    let opened = Snapshot::take();
    let mut rules = Rules::new(*sampling);
    loop {
        let elapsed = clock.now().saturating_sub(began);
        if let Some(rule) = rules.check(elapsed, progress) {
            samples.stopped_by = rule;
            samples.elapsed_s = elapsed.as_secs_f64();
            samples.window = Some((opened, Snapshot::take()));
            return Ok(samples);
        }
        setup()?;
        sync(device)?;
        events.start()?;
        let t0 = clock.now();
        let out = work()?;
        events.stop()?;
        sync(device)?;
        let wall = clock.now().saturating_sub(t0);
        drop(out);
        let gpu_ms = events.elapsed_ms()?;
        samples.wall_ms.push(wall.as_secs_f64() * 1e3);
        samples.gpu_ms.extend(gpu_ms);
        rules.record(wall, gpu_ms);
        progress.inc(1);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// A clock that moves only when told to.
    #[derive(Default)]
    struct FakeClock(Cell<Duration>);

    impl FakeClock {
        fn advance_ms(&self, ms: f64) {
            // Whole nanoseconds, so sums of samples are exact.
            self.0
                .set(self.0.get() + Duration::from_nanos((ms * 1e6).round() as u64));
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            self.0.get()
        }
    }

    fn close(got: &[f64], want: &[f64]) -> bool {
        got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9)
    }

    /// Samples on the fake clock, each run taking the next of `ms` (cycled).
    fn run_fake(sampling: Sampling, ms: &[f64]) -> Samples {
        let clock = FakeClock::default();
        let mut i = 0;
        sample(
            &clock,
            &Device::Cpu,
            &sampling,
            &ProgressBar::hidden(),
            || Ok(()),
            || {
                clock.advance_ms(ms[i % ms.len()]);
                i += 1;
                Ok(())
            },
        )
        .unwrap()
    }

    fn adaptive() -> Adaptive {
        Adaptive {
            warmup: 0,
            min_samples: 5,
            max_samples: 1000,
            min_time_s: 0.0,
            max_time_s: 1.0,
            target_rel_spread: 0.01,
        }
    }

    #[test]
    fn stops_on_noise_when_the_median_is_steady() {
        // +-0.1% around 10 ms: at min_samples the whole range is within 1%.
        let s = run_fake(adaptive().into(), &[10.0, 10.02, 9.98]);
        assert_eq!(s.stopped_by, StopRule::NoiseTarget);
        assert_eq!(s.wall_ms.len(), 5);
        assert!((s.wall_ms[1] - 10.02).abs() < 1e-9, "{:?}", s.wall_ms);
        assert!((s.elapsed_s - 0.05002).abs() < 1e-12, "{}", s.elapsed_s);
    }

    #[test]
    fn a_wider_spread_needs_more_samples_before_the_noise_target() {
        // 10 ms +-5% (quartiles at +-2.5%): the median's interval narrows like
        // 1/sqrt(n), so the target is met, but only after many samples.
        let ms = [9.5, 9.75, 10.0, 10.25, 10.5];
        let target = Adaptive {
            max_time_s: 100.0,
            ..adaptive()
        };
        let s = run_fake(target.into(), &ms);
        assert_eq!(s.stopped_by, StopRule::NoiseTarget);
        // About 100: the interval must fit inside the middle fifth (10.0).
        let n = s.wall_ms.len();
        assert!((80..=150).contains(&n), "{n} samples");
        assert!(s.elapsed_s < 2.0, "{}", s.elapsed_s);
    }

    #[test]
    fn stops_on_time_when_samples_stay_noisy() {
        // 5 or 15 ms: the median's interval spans both values for ever.
        let s = run_fake(adaptive().into(), &[5.0, 15.0]);
        assert_eq!(s.stopped_by, StopRule::MaxTime);
        // 100 samples of 10 ms on average fill the 1 s budget exactly.
        assert_eq!(s.wall_ms.len(), 100);
        assert!((s.elapsed_s - 1.0).abs() < 1e-9, "{}", s.elapsed_s);
    }

    #[test]
    fn stops_at_max_samples_when_time_allows() {
        let plan = Adaptive {
            max_samples: 30,
            max_time_s: 1e6,
            ..adaptive()
        };
        let s = run_fake(plan.into(), &[5.0, 15.0]);
        assert_eq!((s.stopped_by, s.wall_ms.len()), (StopRule::MaxSamples, 30));
    }

    #[test]
    fn respects_minimum_samples_even_past_the_time_budget() {
        let steady = Adaptive {
            min_samples: 20,
            ..adaptive()
        };
        let s = run_fake(steady.into(), &[10.0]);
        assert_eq!((s.stopped_by, s.wall_ms.len()), (StopRule::NoiseTarget, 20));

        // 7 samples of 1 s against a 0.5 s budget: the floor wins, then time.
        let late = Adaptive {
            min_samples: 7,
            max_time_s: 0.5,
            ..adaptive()
        };
        let s = run_fake(late.into(), &[1000.0, 3000.0]);
        assert_eq!((s.stopped_by, s.wall_ms.len()), (StopRule::MaxTime, 7));
    }

    #[test]
    fn respects_minimum_time() {
        // Steady from the start, but 0.5 s of 10 ms samples is 50 of them.
        let plan = Adaptive {
            min_time_s: 0.5,
            ..adaptive()
        };
        let s = run_fake(plan.into(), &[10.0]);
        assert_eq!((s.stopped_by, s.wall_ms.len()), (StopRule::NoiseTarget, 50));
    }

    #[test]
    fn setup_runs_untimed_before_each_run() {
        let clock = FakeClock::default();
        let log = RefCell::new(Vec::new());
        let plan = Plan {
            warmup: 2,
            iters: 3,
        };
        let s = sample(
            &clock,
            &Device::Cpu,
            &plan.into(),
            &ProgressBar::hidden(),
            || {
                log.borrow_mut().push("setup");
                clock.advance_ms(100.0);
                Ok(())
            },
            || {
                log.borrow_mut().push("work");
                clock.advance_ms(1.0);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(log.into_inner(), ["setup", "work"].repeat(5));
        assert!(
            close(&s.wall_ms, &[1.0; 3]),
            "setup is off the clock: {s:?}"
        );
        assert!((s.elapsed_s - 0.505).abs() < 1e-9, "but inside the budget");
    }

    #[test]
    fn setup_time_counts_against_the_adaptive_budget() {
        let clock = FakeClock::default();
        let mut runs = 0;
        let plan = Adaptive {
            min_samples: 1,
            ..adaptive()
        };
        let s = sample(
            &clock,
            &Device::Cpu,
            &plan.into(),
            &ProgressBar::hidden(),
            || {
                clock.advance_ms(300.0);
                Ok(())
            },
            || {
                // 1 or 3 ms: too noisy for the target.
                runs += 1;
                clock.advance_ms(if runs % 2 == 0 { 3.0 } else { 1.0 });
                Ok(())
            },
        )
        .unwrap();
        // Three runs take 905 ms, four 1208 ms: setup counts against the budget.
        assert_eq!((s.stopped_by, s.wall_ms.len()), (StopRule::MaxTime, 4));
    }

    #[test]
    fn fixed_plan_runs_warmup_and_iters_on_the_fake_clock() {
        let bar = ProgressBar::hidden();
        let clock = FakeClock::default();
        let mut calls = 0;
        let plan = Plan {
            warmup: 2,
            iters: 3,
        };
        let s = sample(
            &clock,
            &Device::Cpu,
            &plan.into(),
            &bar,
            || Ok(()),
            || {
                calls += 1;
                clock.advance_ms(f64::from(calls));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(calls, 5);
        assert_eq!(bar.position(), 5);
        assert!(
            close(&s.wall_ms, &[3.0, 4.0, 5.0]),
            "warm-up is untimed: {s:?}"
        );
        assert_eq!(s.stopped_by, StopRule::FixedCount);
    }

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
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 5);
        assert_eq!(bar.position(), 5);
        assert_eq!(s.wall_ms.len(), 3);
        assert!(s.gpu_ms.is_empty(), "no GPU clock on the CPU");
        assert!(s.wall_ms.iter().all(|&ms| ms >= 2.0), "{:?}", s.wall_ms);
        assert_eq!(s.stopped_by, StopRule::FixedCount);
    }

    #[test]
    fn an_error_in_the_work_or_setup_stops_the_run() {
        let plan = Plan {
            warmup: 1,
            iters: 3,
        };
        let bar = ProgressBar::hidden();
        let r = time_on_device(&Device::Cpu, plan, &bar, || -> Result<()> {
            anyhow::bail!("boom")
        });
        assert_eq!(r.unwrap_err().to_string(), "boom");
        let r = time_with_setup(
            &Device::Cpu,
            plan,
            &bar,
            || anyhow::bail!("flush failed"),
            || Ok(()),
        );
        assert_eq!(r.unwrap_err().to_string(), "flush failed");
    }

    #[test]
    fn contradictory_adaptive_plans_are_refused() {
        let bad = [
            Adaptive {
                min_samples: 0,
                ..adaptive()
            },
            Adaptive {
                max_samples: 4,
                ..adaptive()
            },
            Adaptive {
                min_time_s: 2.0,
                ..adaptive()
            },
            Adaptive {
                max_time_s: f64::NAN,
                ..adaptive()
            },
            Adaptive {
                target_rel_spread: 0.0,
                ..adaptive()
            },
        ];
        for plan in bad {
            let r = time_on_device(&Device::Cpu, plan, &ProgressBar::hidden(), || Ok(()));
            assert!(r.is_err(), "{plan:?} accepted");
        }
        assert!(Sampling::from(Adaptive::default()).validate().is_ok());
    }

    #[test]
    fn the_plan_shapes_the_progress_bar() {
        let fixed = Sampling::from(Plan {
            warmup: 5,
            iters: 20,
        });
        assert_eq!(progress_bar(&fixed, "fp32").length(), Some(25));
        assert_eq!(
            progress_bar(&Adaptive::default().into(), "fp32").length(),
            None
        );
    }

    #[test]
    fn plans_serialize_with_their_mode_and_stop_rules_in_snake_case() {
        let fixed = Sampling::from(Plan {
            warmup: 5,
            iters: 20,
        });
        let json = serde_json::to_string(&fixed).unwrap();
        assert_eq!(json, r#"{"mode":"fixed","warmup":5,"iters":20}"#);
        let adaptive = Sampling::from(Adaptive::default());
        let back: Sampling =
            serde_json::from_str(&serde_json::to_string(&adaptive).unwrap()).unwrap();
        assert_eq!(back, adaptive);
        let rules = [
            StopRule::FixedCount,
            StopRule::NoiseTarget,
            StopRule::MaxTime,
            StopRule::MaxSamples,
        ];
        let names = serde_json::to_string(&rules).unwrap();
        assert_eq!(
            names,
            r#"["fixed_count","noise_target","max_time","max_samples"]"#
        );
    }

    /// A clock that ticks 1 us every time it is read.
    struct TickingClock(Cell<u64>);

    impl Clock for TickingClock {
        fn now(&self) -> Duration {
            self.0.set(self.0.get() + 1);
            Duration::from_micros(self.0.get())
        }
    }

    #[test]
    fn overhead_is_what_the_path_adds_to_nothing() {
        // Between the two clock reads of a sample, nothing else reads the
        // clock: an empty work item costs exactly one tick.
        let clock = TickingClock(Cell::new(0));
        let o = clock_overhead_on(&clock, &Device::Cpu, OVERHEAD_PLAN).unwrap();
        assert_eq!(o.samples, OVERHEAD_PLAN.iters);
        assert!((o.wall_median_ms - 1e-3).abs() < 1e-12, "{o:?}");
        assert_eq!(o.wall_iqr_ms, 0.0);
        assert_eq!((o.gpu_median_ms, o.gpu_iqr_ms), (None, None));
    }

    /// One body for every device: the real overhead is small, finite and
    /// positive (no time is asserted beyond "under a second").
    fn overhead_on(device: &Device) {
        let o = clock_overhead(device).unwrap();
        assert_eq!(o.samples, OVERHEAD_PLAN.iters);
        assert!(o.wall_median_ms >= 0.0 && o.wall_median_ms < 1e3, "{o:?}");
        assert!(o.wall_iqr_ms.is_finite() && o.wall_iqr_ms >= 0.0, "{o:?}");
        assert_eq!(o.gpu_median_ms.is_some(), device.is_cuda(), "{o:?}");
    }

    #[test]
    fn overhead_on_cpu() {
        overhead_on(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn overhead_on_cuda() {
        overhead_on(&Device::new_cuda(0).unwrap());
    }
}
