//! Works compared with each other, timed in turn: A B A B ... under one
//! fixed plan, so that whatever drifts while they run (a neighbour's load,
//! the clock's boost, heat) falls on both alike, and their ratio is measured
//! side by side rather than one after the other. Each sample is the clock's
//! usual one ([`super::sample`]'s timing model: synchronize, start event and
//! clock, the work, end event, synchronize, clock); warm-up runs go in turn
//! too. Each work's threads held are its own samples' (this process's CPU
//! time read around each of them, off the clock), not the shared window's.

use anyhow::Result;
use candle_core::Device;
use indicatif::ProgressBar;

use std::time::Instant;

use super::events::EventClock;
use super::{Clock, Held, Samples, WallClock};
use crate::availability::{Snapshot, ThreadClocks};
use crate::device::sync;
use crate::kernels::work::Totals;
use crate::schema::{Plan, StopRule};

/// One work of a comparison: called once per sample.
pub type Work<'a> = &'a mut dyn FnMut() -> Result<()>;

/// Times `works` in turn under `plan` (`plan.warmup` rounds untimed, then
/// `plan.iters` rounds, each timing every work once, in order); returns each
/// work's samples, in the order given. The clock covers each work and the
/// device's synchronization after it, as [`super::sample`]'s does.
pub fn time_interleaved(
    device: &Device,
    plan: Plan,
    progress: &ProgressBar,
    works: &mut [Work<'_>],
) -> Result<Vec<Samples>> {
    interleaved_on(&WallClock::new(), device, plan, progress, works)
}

/// [`time_interleaved`] on any clock (tests drive a fake one).
pub fn interleaved_on<C: Clock + ?Sized>(
    clock: &C,
    device: &Device,
    plan: Plan,
    progress: &ProgressBar,
    works: &mut [Work<'_>],
) -> Result<Vec<Samples>> {
    let began = clock.now();
    for _ in 0..plan.warmup {
        for w in works.iter_mut() {
            sync(device)?;
            w()?;
            sync(device)?;
            progress.inc(1);
        }
    }
    let events = EventClock::new(device)?;
    let opened = Snapshot::take();
    let mut out: Vec<Samples> = works
        .iter()
        .map(|_| Samples {
            wall_ms: Vec::with_capacity(plan.iters),
            gpu_ms: Vec::with_capacity(plan.iters),
            stopped_by: StopRule::FixedCount,
            elapsed_s: 0.0,
            window: None,
            on_gpu: device.is_cuda(),
            held: None,
        })
        .collect();
    // Each work's own CPU time: its samples, not the window the works share.
    let mut held = vec![Some(Held::default()); works.len()];
    for _ in 0..plan.iters {
        for ((w, s), h) in works.iter_mut().zip(out.iter_mut()).zip(held.iter_mut()) {
            sync(device)?;
            let (cpu0, h0, w0) = (ThreadClocks::read(), Instant::now(), Totals::read());
            events.start()?;
            let t0 = clock.now();
            w()?;
            events.stop()?;
            sync(device)?;
            let wall = clock.now().saturating_sub(t0);
            let (cpu1, h1, w1) = (ThreadClocks::read(), Instant::now(), Totals::read());
            *h = h.zip(cpu0.zip(cpu1)).map(|(h, (c0, c1))| Held {
                cpu_s: h.cpu_s + c1.since(&c0) as f64 * 1e-9,
                wall_s: h.wall_s + (h1 - h0).as_secs_f64(),
                work: h.work.plus(&w1.since(&w0)),
            });
            s.wall_ms.push(wall.as_secs_f64() * 1e3);
            s.gpu_ms.extend(events.elapsed_ms()?);
            progress.inc(1);
        }
    }
    let closed = Snapshot::take();
    let elapsed = clock.now().saturating_sub(began).as_secs_f64();
    for (s, h) in out.iter_mut().zip(held) {
        s.elapsed_s = elapsed;
        s.window = Some((opened.clone(), closed.clone()));
        s.held = h.filter(|_| !device.is_cuda());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::time::Duration;

    use super::*;

    #[derive(Default)]
    struct Fake(Cell<Duration>);

    impl Clock for Fake {
        fn now(&self) -> Duration {
            self.0.get()
        }
    }

    #[test]
    fn works_take_turns_and_each_keeps_its_own_samples() {
        let clock = Fake::default();
        let order = RefCell::new(Vec::new());
        let step = |ms: u64, name: char| {
            clock.0.set(clock.0.get() + Duration::from_millis(ms));
            order.borrow_mut().push(name);
        };
        let mut a = || {
            step(2, 'a');
            Ok(())
        };
        let mut b = || {
            step(3, 'b');
            Ok(())
        };
        let plan = Plan {
            warmup: 1,
            iters: 3,
        };
        let s = interleaved_on(
            &clock,
            &Device::Cpu,
            plan,
            &ProgressBar::hidden(),
            &mut [&mut a, &mut b],
        )
        .unwrap();
        assert_eq!(order.borrow().iter().collect::<String>(), "abababab");
        assert_eq!(s[0].wall_ms, [2.0; 3]);
        assert_eq!(s[1].wall_ms, [3.0; 3]);
        assert!(s[0].window.is_some() && s[0].gpu_ms.is_empty());
    }
}
