//! How much of their time the threads running the suite's kernels spend
//! working, as against holding a CPU. Candle's pool spins 25,000 times before
//! a worker parks (candle-core 0.11.1 `utils.rs`), so between a decode's
//! kernels every worker is busy in the process's CPU time whether it works
//! or waits: "threads held" counts presence. Each time the suite's kernels
//! hand work to the pool ([`dispatch`]: `cpu.rs`' split and `rows.rs`), the
//! calling thread's time inside the hand-off is counted, and so is each task
//! any thread runs ([`task`]), with the CPU's time-stamp counter (x86's
//! `rdtsc`, a few nanoseconds; `Instant` elsewhere), each thread into a
//! counter of its own. Over a window, the threads at work
//! ([`Totals::threads_at_work`]) are the calling thread outside hand-offs
//! (its own serial work) plus every thread's tasks, over the window's
//! length. Candle's own parallel ops are not seen: a window that used them
//! counts their work as the calling thread's alone, and a window with no
//! hand-off of the suite's says nothing (`None`).
//!
//! What counting costs: two counter reads and a store a task (a few tens
//! of nanoseconds, by rdtsc's cost: not timed apart). A SmolLM2 q4_1 decode
//! token on the Xeon VM makes 121 hand-offs, one per matrix product (its
//! other ops stay on the calling thread at one token; `generate`'s
//! `hand_offs_per_token`, from these counters), each up to eight ranges a
//! thread (Candle's pool's tasks). Measured whole, four
//! interleaved A B rounds of `generate --kernels lab` on SmolLM2 q4_1
//! (pp64, tg32, 5 runs) read tg 236-248 tok/s before the counters and
//! 216-280 with them: no cost the run's noise shows.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Counters, a slot per thread (threads past this many share the last).
const SLOTS: usize = 64;

/// A thread's counters, on a line of their own so threads never share one.
#[repr(align(128))]
struct Slot {
    task: AtomicU64,
    dispatch: AtomicU64,
    dispatches: AtomicU64,
}

static COUNTERS: [Slot; SLOTS] = [const {
    Slot {
        task: AtomicU64::new(0),
        dispatch: AtomicU64::new(0),
        dispatches: AtomicU64::new(0),
    }
}; SLOTS];
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot, and whether it is its alone (the last slot is
    /// shared by every thread past the first `SLOTS - 1`).
    static MINE: (usize, bool) = {
        let n = NEXT.fetch_add(1, Relaxed);
        (n.min(SLOTS - 1), n < SLOTS - 1)
    };
}

/// Ticks of a clock every thread reads alike: the time-stamp counter, which
/// runs at a constant rate on every core of the x86 CPUs this runs on, or
/// nanoseconds elsewhere.
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc reads a counter; every x86-64 CPU has it.
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// Adds `n` to this thread's `counter`: a load and a store where the thread
/// has a slot of its own (no locked add: a task costs two counter reads and
/// this), a locked add in the slot threads past [`SLOTS`] share.
fn add(counter: impl Fn(&Slot) -> &AtomicU64, n: u64) {
    let (i, own) = MINE.with(|m| *m);
    let c = counter(&COUNTERS[i]);
    if own {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    } else {
        c.fetch_add(n, Relaxed);
    }
}

/// Runs `f`, one task of a hand-off, counting its time as work.
pub(super) fn task<R>(f: impl FnOnce() -> R) -> R {
    let t0 = ticks();
    let r = f();
    add(|s| &s.task, ticks().wrapping_sub(t0));
    r
}

/// Runs `f`, a hand-off of work to the pool, counting the calling thread's
/// time in it (its own tasks inside are counted by [`task`]).
pub(super) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    let t0 = ticks();
    let r = f();
    add(|s| &s.dispatch, ticks().wrapping_sub(t0));
    add(|s| &s.dispatches, 1);
    r
}

/// The counters at one moment, summed over the threads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    at: u64,
    task: u64,
    dispatch: u64,
    dispatches: u64,
}

impl Totals {
    /// The counters now. Read between hand-offs (as the clocks do, around a
    /// sample), no task is half counted.
    pub fn read() -> Self {
        let mut t = Totals {
            at: ticks(),
            ..Totals::default()
        };
        // Wrapping, as each counter adds: a tick count that ran backwards
        // (a thread moved between CPUs whose counters disagree) wraps a
        // slot, and the differences taken later still come out right.
        for s in &COUNTERS {
            t.task = t.task.wrapping_add(s.task.load(Relaxed));
            t.dispatch = t.dispatch.wrapping_add(s.dispatch.load(Relaxed));
            t.dispatches = t.dispatches.wrapping_add(s.dispatches.load(Relaxed));
        }
        t
    }

    /// What happened between `earlier` and these counters.
    pub fn since(&self, earlier: &Self) -> Self {
        Totals {
            at: self.at.wrapping_sub(earlier.at),
            task: self.task.wrapping_sub(earlier.task),
            dispatch: self.dispatch.wrapping_sub(earlier.dispatch),
            dispatches: self.dispatches.wrapping_sub(earlier.dispatches),
        }
    }

    /// Adds another window's counts (samples taken apart, counted as one).
    pub fn plus(&self, other: &Self) -> Self {
        Totals {
            at: self.at.wrapping_add(other.at),
            task: self.task.wrapping_add(other.task),
            dispatch: self.dispatch.wrapping_add(other.dispatch),
            dispatches: self.dispatches.wrapping_add(other.dispatches),
        }
    }

    /// For a window: the hand-offs to the pool in it; `None` for none.
    pub fn hand_offs(&self) -> Option<u64> {
        (self.dispatches > 0).then_some(self.dispatches)
    }

    /// For a window ([`Totals::since`], or several [`Totals::plus`]-ed): the
    /// threads at work on average, the calling thread outside hand-offs plus
    /// every thread's tasks over the window's length; `None` for a window
    /// with no hand-off of the suite's kernels, or no length. Wall time: a
    /// thread the OS took away mid-task still counts (the availability
    /// holds it to the threads held).
    pub fn threads_at_work(&self) -> Option<f64> {
        if self.dispatches == 0 || self.at == 0 {
            return None;
        }
        let outside = self.at.saturating_sub(self.dispatch);
        Some((outside + self.task) as f64 / self.at as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_the_serial_part_and_the_tasks() {
        let w = Totals {
            at: 1000,
            task: 900,
            dispatch: 600,
            dispatches: 3,
        };
        // 400 outside hand-offs, 900 of tasks: 1.3 threads at work.
        assert!((w.threads_at_work().unwrap() - 1.3).abs() < 1e-12);
        assert_eq!(Totals { dispatches: 0, ..w }.threads_at_work(), None);
        assert_eq!(Totals { at: 0, ..w }.threads_at_work(), None);
        assert_eq!(w.plus(&w).threads_at_work(), w.threads_at_work());
        assert_eq!((w.hand_offs(), w.plus(&w).hand_offs()), (Some(3), Some(6)));
        assert_eq!(Totals { dispatches: 0, ..w }.hand_offs(), None);
    }

    #[test]
    fn tasks_on_two_threads_count_for_both() {
        let before = Totals::read();
        let spin = |ms: u64| {
            let t = std::time::Instant::now();
            while t.elapsed().as_millis() < u128::from(ms) {
                std::hint::spin_loop();
            }
        };
        dispatch(|| {
            std::thread::scope(|s| {
                s.spawn(|| task(|| spin(30)));
                task(|| spin(30));
            })
        });
        let w = Totals::read().since(&before);
        // 60 ms of one hand-off, in which two threads ran 30 ms tasks: the
        // tasks count about the whole window, the hand-off half of it or
        // more. (Tests running beside this one only add to the counters.)
        let share = |n: u64| n as f64 / w.at as f64;
        // Lower bounds with room for a late thread start on a busy machine:
        // one thread's tasks alone would be half the window.
        assert!(share(w.task) > 0.6, "tasks {}", share(w.task));
        assert!(share(w.dispatch) > 0.3, "hand-off {}", share(w.dispatch));
        assert!(w.dispatches >= 1);
    }
}
