//! A row and its bound measured side by side. A bound read at another moment
//! than the row is a reading of another machine: on a shared VM the last
//! cache's bandwidth moves by half between minutes (a neighbour's load), and
//! a row timed in a quiet minute then "beats" a bound read in a busy one.
//! So the ladder's kernel at the row's footprint is timed in turn with the
//! row's works, A B C A B C ..., each a sample of K calls of its own (K so a
//! sample dwarfs the clock), and the row is held against that reading.
//! [`time_calls`] is the same K-call sample for one work alone (the
//! ladder's own points).
//!
//! A row's time is its median sample; a ladder point's is its fastest, as
//! STREAM reports its "Best Rate" from the fastest of its trials (McCalpin
//! 1995): a bound is what the machine did move at that footprint, and a
//! median of a few microsecond calls moves by several percent between runs,
//! so a row's median beat a median bound timed beside it (108% once, 86-96%
//! in three reruns of the same row).

use anyhow::{Context, Result};
use candle_core::Device;

use super::{calls_per_sample, envelope, Ladder, Work, SAMPLE_MS};
use crate::clock::Plan;
use crate::schema::{Bound, LadderKernel, LadderPoint, Timed};
use crate::telemetry::Telemetry;

/// One work's timing: its samples (each K calls), K, and the time per call:
/// (the median sample - the clock's cost) / K, and the same from the
/// fastest sample.
#[derive(Debug)]
pub struct Called {
    pub timed: Timed,
    pub calls_per_sample: u64,
    pub per_call_ms: f64,
    pub fastest_per_call_ms: f64,
}

impl Called {
    fn new(timed: Timed, k: u64, clock_ms: f64) -> Self {
        let (median, _) = timed.rate_ms();
        let fastest = timed.fastest_ms();
        Self {
            per_call_ms: per_call(median, clock_ms, k),
            fastest_per_call_ms: per_call(fastest, clock_ms, k),
            timed,
            calls_per_sample: k,
        }
    }
}

/// A call's time from a sample of `k` calls: the clock's own cost
/// subtracted, never below a thousandth of the raw time (a clock cost
/// measured larger than a sample must not make a rate infinite).
fn per_call(sample_ms: f64, clock_ms: f64, k: u64) -> f64 {
    let raw = sample_ms / k as f64;
    ((sample_ms - clock_ms) / k as f64).max(raw * 1e-3)
}

/// The calls a sample of `call` takes: K from the fastest of three single
/// calls (the first wakes the pool), each synchronized. A call of
/// [`ONE_CALL_IS_A_SAMPLE_MS`] or more ends it at once: K is 1 whatever the
/// next two take (no pool wakes that slowly), and at a footprint past the
/// caches two more calls are seconds of a run.
pub fn calls_for(device: &Device, call: &mut dyn FnMut() -> Result<()>) -> Result<u64> {
    let mut one = f64::INFINITY;
    for _ in 0..3 {
        let started = std::time::Instant::now();
        call()?;
        crate::device::sync(device)?;
        one = one.min(started.elapsed().as_secs_f64() * 1e3);
        if one >= ONE_CALL_IS_A_SAMPLE_MS {
            break;
        }
    }
    Ok(calls_per_sample(one, SAMPLE_MS))
}

/// A call this long (a hundred samples' worth) is a sample on its own.
pub const ONE_CALL_IS_A_SAMPLE_MS: f64 = 100.0 * SAMPLE_MS;

/// Times `works` in turn under `plan` (A B A B ...: the clock's
/// [`crate::clock::time_interleaved`]), a sample of each being its own K
/// calls ([`calls_for`]); the clock covers one work's K calls and the
/// device's synchronization after them. Each time per call has the clock's
/// own cost `clock_ms` subtracted, never below a thousandth of the raw time.
pub fn time_calls_beside(
    device: &Device,
    telemetry: &Telemetry,
    plan: Plan,
    label: &str,
    clock_ms: f64,
    works: &mut [Box<dyn FnMut() -> Result<()> + '_>],
) -> Result<Vec<Called>> {
    let ks = works
        .iter_mut()
        .map(|w| calls_for(device, &mut **w))
        .collect::<Result<Vec<u64>>>()?;
    let mut batched: Vec<Box<dyn FnMut() -> Result<()> + '_>> = works
        .iter_mut()
        .zip(&ks)
        .map(|(w, &k)| {
            Box::new(move || {
                for _ in 0..k {
                    w()?;
                }
                Ok(())
            }) as Box<dyn FnMut() -> Result<()>>
        })
        .collect();
    let mut refs: Vec<crate::clock::Work<'_>> = batched.iter_mut().map(|b| &mut **b as _).collect();
    let timed = telemetry.time_interleaved(device, plan, label, &mut refs)?;
    Ok(timed
        .into_iter()
        .zip(ks)
        .map(|(timed, k)| Called::new(timed, k, clock_ms))
        .collect())
}

impl Ladder<'_> {
    /// A row's bound measured beside it: each of `kernels` (the row's
    /// pattern with the store kinds it is held to) at `footprint` bytes on
    /// one thread and on the pool's, timed in turn with the row's `works`
    /// ([`time_calls_beside`]); the points join the ladder (its file keeps
    /// them), and the bound is the fastest, or a larger footprint's faster
    /// reading ([`envelope`]). Returns the bound, its point, and each
    /// work's timing in order, under the row's `plan`.
    pub fn bound_beside(
        &self,
        kernels: &[LadderKernel],
        footprint: u64,
        (plan, label): (Plan, &str),
        works: Vec<Box<dyn FnMut() -> Result<()> + '_>>,
    ) -> Result<(Bound, LadderPoint, Vec<Called>)> {
        // One thread, and the pool's with fixed parts and with parts taken
        // as threads finish (as the ops share their work: on a VM whose
        // vCPUs run at different speeds, fixed parts wait for the slowest).
        let mut ways = vec![(1, false)];
        if self.pool_threads > 1 {
            ways.extend([(self.pool_threads, false), (self.pool_threads, true)]);
        }
        let threads: Vec<usize> = ways.iter().map(|w| w.0).collect();
        let arrays = kernels
            .iter()
            .map(|&k| {
                let f = super::fitted(
                    k,
                    self.max_footprint.map_or(footprint, |m| footprint.min(m)),
                );
                Ok((k, std::cell::RefCell::new(Work::new(self.device, k, f)?)))
            })
            .collect::<Result<Vec<_>>>()?;
        let n = works.len();
        let mut all: Vec<Box<dyn FnMut() -> Result<()> + '_>> = works;
        for (_, arrays) in &arrays {
            for &(t, chunked) in &ways {
                all.push(Box::new(move || arrays.borrow_mut().call(t, chunked)));
            }
        }
        let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
        let label = format!("{label} | ladder {} beside", names.join(", "));
        let mut called = time_calls_beside(
            self.device,
            self.telemetry,
            plan,
            &label,
            self.clock_ms,
            &mut all,
        )?;
        drop(all);
        let mut ladder_calls = called.drain(n..);
        let memory = self.memory_footprint();
        let mut best: Option<LadderPoint> = None;
        for (kernel, work) in arrays {
            let work = work.into_inner();
            let at: Vec<LadderPoint> = ways
                .iter()
                .zip(ladder_calls.by_ref())
                .map(|(&way, c)| self.point_from(&work, kernel, way, c))
                .collect();
            let b = envelope(&at, &self.points.borrow(), kernel, &threads, memory)
                .context("no ladder point beside the row")?;
            self.points.borrow_mut().extend(at);
            if best.as_ref().is_none_or(|x| b.gb_per_s > x.gb_per_s) {
                best = Some(b);
            }
        }
        drop(ladder_calls);
        let best = best.context("no ladder kernel beside the row")?;
        Ok((best.bound(), best, called))
    }

    /// The point a timing `c` of `kernel` on `work` reads (not one of the
    /// ladder's standard footprints until the caller says so).
    pub(super) fn point_from(
        &self,
        work: &Work,
        kernel: LadderKernel,
        (threads, chunked): (usize, bool),
        c: Called,
    ) -> LadderPoint {
        let bytes = work.bytes_moved();
        LadderPoint {
            kernel,
            threads,
            footprint_bytes: work.footprint(),
            level: self.level(work.footprint(), threads),
            standard: false,
            bytes_moved: bytes,
            calls_per_sample: c.calls_per_sample,
            time_per_call_ms: c.fastest_per_call_ms,
            gb_per_s: crate::formulas::gb_per_s(bytes, c.fastest_per_call_ms),
            chunked,
            from_fastest_sample: true,
            timed: c.timed,
        }
    }
}

impl Ladder<'_> {
    /// A faster reading than `b` the run has made since: its kernel on one
    /// thread or the pool's, at a larger footprint (past the caches, at
    /// memory's footprint or more), as [`envelope`] takes a bound, but over
    /// the whole run. A row bounded early was held only against the points
    /// read by then; one footprint's reading can fall at a slow moment (a
    /// 1.3 MiB read at 117 GB/s, where 1.7 MiB read 209-238 later in the
    /// same run, and the lab's matrix-vector product beat the first by 7%).
    /// `None` where `b` is as fast as any.
    pub fn faster_than(&self, b: &Bound) -> Option<LadderPoint> {
        let points = self.points.borrow();
        let own = points.iter().find(|p| {
            (p.kernel, p.threads, p.footprint_bytes) == (b.kernel, b.threads, b.footprint_bytes)
                && p.gb_per_s == b.gb_per_s
        })?;
        let mut threads = vec![1];
        if self.pool_threads > 1 {
            threads.push(self.pool_threads);
        }
        let memory = self.memory_footprint();
        let best = envelope(
            std::slice::from_ref(own),
            &points,
            b.kernel,
            &threads,
            memory,
        )?;
        (best.gb_per_s > b.gb_per_s).then_some(best)
    }
}

/// Times `call` K times per sample under `plan`, K chosen from the fastest
/// of three single calls (the first wakes the pool) so that a sample lasts
/// [`SAMPLE_MS`] or more; returns the samples, K, and the time per call
/// ([`Called`]: from the median sample and from the fastest, each less the
/// clock's own cost `clock_ms`, over K). The clock covers K calls and the
/// device's synchronization after them.
pub fn time_calls(
    device: &Device,
    telemetry: &Telemetry,
    plan: Plan,
    label: &str,
    clock_ms: f64,
    mut call: impl FnMut() -> Result<()>,
) -> Result<Called> {
    let k = calls_for(device, &mut call)?;
    let timed = telemetry.time(device, plan, label, || {
        for _ in 0..k {
            call()?;
        }
        Ok(())
    })?;
    Ok(Called::new(timed, k, clock_ms))
}
