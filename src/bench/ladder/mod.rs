//! The bandwidth ladder: what this device can move at a footprint, measured
//! in the run that holds rows against it. STREAM's kernels (McCalpin 1995)
//! and BabelStream's (Deakin et al. 2018): read (a sum), copy and triad
//! (`a = b + s*c`), each at footprints that land in every cache level and in
//! memory (four times the last level's capacity: past any cache), on one
//! thread and on every thread of Candle's CPU pool ([`cpu`]); on a GPU the
//! suite's own CUDA kernels and the driver's device-to-device copy.
//!
//! A [`Ladder`] measures a point the first time it is asked for and keeps it,
//! so a run pays for the points its rows read and its result file holds them
//! all ([`Ladder::finish`]). A row is held against [`Ladder::bound`]: the
//! faster of one thread and the row's threads, for the kernel whose pattern
//! is the row's, at the row's own footprint, named by the level it lives in
//! ([`levels::place`]). Samples are long enough to dwarf the clock: a sample
//! is K calls, K chosen so it lasts [`SAMPLE_MS`] or more, and the clock's
//! own cost (an empty work item through the same path) is subtracted before
//! dividing by K. A point's rate is its fastest sample's, as STREAM's "Best
//! Rate" (rows keep their medians): a bound is what the machine did move.

mod beside;
mod cpu;
pub mod levels;
mod work;

use levels::envelope;

pub use beside::{time_calls, time_calls_beside, Called};
use work::Work;

use std::cell::RefCell;

use anyhow::{Context, Result};
use candle_core::Device;

use crate::clock::Plan;
use crate::memory::fits::Need;
use crate::schema::{Bound, CacheLevel, LadderKernel, LadderPoint, UNREPORTED_CACHE_RATIO};
use crate::telemetry::Telemetry;

/// Samples per point: a median of 5 after one warm-up call on the CPU; 20
/// after 3 on a GPU, where a call takes microseconds.
pub fn plan(on_cuda: bool) -> Plan {
    if on_cuda {
        Plan {
            warmup: 3,
            iters: 20,
        }
    } else {
        Plan {
            warmup: 1,
            iters: 5,
        }
    }
}

/// A sample lasts at least this long: thousands of times the clock's own
/// cost (tens of nanoseconds), so what is subtracted is a correction, not
/// the measurement.
pub const SAMPLE_MS: f64 = 0.25;

/// A point's kernel, threads, parts taken as threads finish, footprint.
type PointKey = (LadderKernel, usize, bool, u64);

/// How a point is taken: (threads, parts taken as threads finish, one of the
/// ladder's own footprints).
type Way = (usize, bool, bool);

/// Calls per sample for work that takes `one_call_ms`: enough that a sample
/// lasts `sample_ms`, at most a million.
pub fn calls_per_sample(one_call_ms: f64, sample_ms: f64) -> u64 {
    if one_call_ms.is_nan() || one_call_ms <= 0.0 {
        return 1;
    }
    ((sample_ms / one_call_ms).ceil() as u64).clamp(1, 1_000_000)
}

/// Memory's footprint: four times the last cache's capacity, at least 256
/// MiB (a cache the system does not report could be that large).
pub const MIN_MEMORY_FOOTPRINT: u64 = 256 << 20;

/// The ladder of one run on one device.
pub struct Ladder<'a> {
    device: &'a Device,
    telemetry: &'a Telemetry,
    plan: Plan,
    caches: Vec<CacheLevel>,
    memory: &'static str,
    pool_threads: usize,
    clock_ms: f64,
    /// The largest footprint measured (`--ladder-max-mib`); memory's
    /// footprint is four times the last cache's when none is set.
    max_footprint: Option<u64>,
    points: RefCell<Vec<LadderPoint>>,
    /// [`Ladder::outreads_memory`]'s answers: once a run, the same for every row.
    confirmed: RefCell<Vec<(PointKey, bool)>>,
}

impl<'a> Ladder<'a> {
    /// A ladder for `device` with no point yet, no footprint over
    /// `max_footprint` bytes (when given); the clock's cost is measured now.
    pub fn new(
        device: &'a Device,
        telemetry: &'a Telemetry,
        max_footprint: Option<u64>,
    ) -> Result<Self> {
        let over = crate::clock::clock_overhead(device)?;
        let (caches, memory) = caches(device)?;
        Ok(Self {
            device,
            telemetry,
            plan: plan(device.is_cuda()),
            caches,
            memory,
            pool_threads: if device.is_cuda() {
                1
            } else {
                candle_core::utils::get_num_threads()
            },
            clock_ms: over.gpu_median_ms.unwrap_or(over.wall_median_ms),
            max_footprint,
            points: RefCell::new(Vec::new()),
            confirmed: RefCell::new(Vec::new()),
        })
    }

    /// The clock's own cost per sample, subtracted from every K-call sample.
    pub fn clock_ms(&self) -> f64 {
        self.clock_ms
    }

    /// The threads a row may use: Candle's CPU pool (1 on a GPU).
    pub fn pool_threads(&self) -> usize {
        self.pool_threads
    }

    /// The ladder kernel of a pattern that reads `reads` streams and writes
    /// `writes`.
    pub fn kernel_for(&self, reads: u64, writes: u64) -> LadderKernel {
        LadderKernel::for_streams(reads, writes)
    }

    /// Where `footprint` lives at `threads` threads.
    pub fn level(&self, footprint: u64, threads: usize) -> String {
        levels::place(footprint, threads, &self.caches, self.memory)
    }

    /// A footprint the row's threads hold in their own caches: half the
    /// largest cache private to a core, times the pool's threads (on a GPU,
    /// or where no cache is private, half the first level reported; 1 MiB
    /// where none is).
    pub fn resident_footprint(&self) -> u64 {
        let private = self.caches.iter().rfind(|c| c.shared_by <= 1);
        match private {
            Some(c) => c.bytes / 2 * self.pool_threads as u64,
            None => self.caches.first().map_or(1 << 20, |c| c.bytes / 2),
        }
    }

    /// Memory's footprint on this device (four times its last cache), or
    /// the cap when it is smaller.
    pub fn memory_footprint(&self) -> u64 {
        footprint_past(&self.caches, self.max_footprint)
    }

    /// The point of `kernel` at `threads` and (about) `footprint` bytes,
    /// measured the first time it is asked for.
    pub fn point(
        &self,
        kernel: LadderKernel,
        threads: usize,
        footprint: u64,
    ) -> Result<LadderPoint> {
        let mut v = self.points_at(kernel, &[(threads, false, false)], footprint)?;
        Ok(v.remove(0))
    }

    /// What work of `kernel`'s pattern over `footprint` bytes, with up to
    /// `threads` threads, can at best reach: the fastest of the point on one
    /// thread and on `threads`, in fixed parts and in parts taken as threads
    /// finish (as the suite's ops share their work: on a VM whose vCPUs run
    /// at different speeds, fixed parts wait for the slowest, and an op that
    /// does not beat a bound it should not be held under), at that footprint
    /// (a small one runs faster alone than split).
    pub fn bound(&self, kernel: LadderKernel, threads: usize, footprint: u64) -> Result<Bound> {
        let threads = threads.clamp(1, self.pool_threads);
        let (counts, ways): (Vec<usize>, Vec<(usize, bool)>) = if threads > 1 {
            (
                vec![1, threads],
                vec![(1, false), (threads, false), (threads, true)],
            )
        } else {
            (vec![1], vec![(1, false)])
        };
        let ways: Vec<Way> = ways.into_iter().map(|(t, c)| (t, c, false)).collect();
        let at = self.points_at(kernel, &ways, footprint)?;
        let memory = self.memory_footprint();
        let points = self.points.borrow();
        let best = envelope(&at, &points, kernel, &counts, memory).context("no ladder point")?;
        let last = self.caches.last();
        // Memory's own footprint as this kernel's arrays fit it (a triad's
        // is a few bytes under the round one).
        let past = (fitted(kernel, memory), self.memory, last);
        let named = levels::named(&best, &points, &counts, past);
        drop(points);
        if named.level != best.level && !self.outreads_memory(&best, memory)? {
            return Ok(best.bound());
        }
        Ok(named)
    }

    /// Whether `p`'s footprint reads over [`UNREPORTED_CACHE_RATIO`] times
    /// memory's own in each of two fresh alternations (the point, memory,
    /// the point, memory; on `p`'s threads and parts): a cache holds its
    /// data at every moment, where a fast moment of a VM's memory (one run's
    /// 235 MiB read 59.6 GB/s on two threads, its 256 MiB 35.1) does not
    /// repeat. The fresh readings only decide the name; the bound stays the
    /// point's.
    fn outreads_memory(&self, p: &LadderPoint, memory: u64) -> Result<bool> {
        let key = (p.kernel, p.threads, p.chunked, p.footprint_bytes);
        if let Some(&(_, said)) = self.confirmed.borrow().iter().find(|(k, _)| *k == key) {
            return Ok(said);
        }
        let said = self.outreads_fresh(p, memory)?;
        self.confirmed.borrow_mut().push((key, said));
        Ok(said)
    }

    /// [`Ladder::outreads_memory`]'s two alternations, measured now.
    fn outreads_fresh(&self, p: &LadderPoint, memory: u64) -> Result<bool> {
        let mut at = Work::new(self.device, p.kernel, p.footprint_bytes)?;
        let mut past = Work::new(self.device, p.kernel, fitted(p.kernel, memory))?;
        let way = (p.threads, p.chunked);
        for _ in 0..2 {
            let a = self.measure(&mut at, p.kernel, way, false)?.gb_per_s;
            let m = self.measure(&mut past, p.kernel, way, false)?.gb_per_s;
            if a <= UNREPORTED_CACHE_RATIO * m {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The kernels an op of `kernel`'s pattern is held to: `kernel` alone
    /// where the op's stores are ordinary; where they are `memcpy`'s choice
    /// (`either_store`), each store kind this device's ladder has, the
    /// faster bounding it.
    pub fn kernels_for_op(&self, kernel: LadderKernel, either_store: bool) -> Vec<LadderKernel> {
        if !either_store {
            return vec![kernel];
        }
        let have = kernels(self.device);
        let mut out: Vec<LadderKernel> = kernel.either_store().to_vec();
        out.retain(|k| have.contains(k));
        out
    }

    /// [`Ladder::bound`] over several kernels (an op's store kinds): the fastest.
    pub fn bound_of(
        &self,
        kernels: &[LadderKernel],
        threads: usize,
        footprint: u64,
    ) -> Result<Bound> {
        let mut best: Option<Bound> = None;
        for &k in kernels {
            let b = self.bound(k, threads, footprint)?;
            if best.as_ref().is_none_or(|x| b.gb_per_s > x.gb_per_s) {
                best = Some(b);
            }
        }
        best.context("no ladder kernel to bound an op")
    }

    /// Every kernel at a footprint in each level and in memory, on one
    /// thread and on the pool's: the whole ladder (`memory`'s table). The
    /// points of one footprint are measured on one set of arrays (past the
    /// caches, arrays of 2 GB made once, not once a point).
    pub fn measure_all(&self) -> Result<()> {
        let mut threads = vec![1];
        if self.pool_threads > 1 {
            threads.push(self.pool_threads);
        }
        for kernel in kernels(self.device) {
            let mut at: Vec<(u64, Vec<Way>)> = Vec::new();
            let mut add = |f: u64, way: Way| match at.iter_mut().find(|(g, _)| *g == f) {
                Some((_, ways)) => ways.push(way),
                None => at.push((f, vec![way])),
            };
            for &t in &threads {
                for f in self.standard_footprints(t) {
                    add(f, (t, false, true));
                }
            }
            // Past the caches, parts taken as threads finish beside the
            // fixed ones (the notes compare them; not a standard point).
            if self.pool_threads > 1 && self.device.is_cpu() {
                add(self.memory_footprint(), (self.pool_threads, true, false));
            }
            for (f, ways) in at {
                self.points_at(kernel, &ways, f)?;
            }
        }
        Ok(())
    }

    /// The footprints that land in each level at `threads`, and memory's,
    /// within the cap.
    fn standard_footprints(&self, threads: usize) -> Vec<u64> {
        let mut fs = levels::standard_footprints(threads, &self.caches, MIN_MEMORY_FOOTPRINT);
        if let Some(m) = self.max_footprint {
            fs.retain(|f| *f < m);
            fs.push(m);
        }
        fs
    }

    /// The points of `kernel` at (about) `footprint` bytes on each of
    /// `ways`, those not measured yet measured now on one set of arrays; a
    /// way's `standard`: one of the ladder's own footprints (a level's).
    fn points_at(
        &self,
        kernel: LadderKernel,
        ways: &[Way],
        footprint: u64,
    ) -> Result<Vec<LadderPoint>> {
        let footprint = fitted(
            kernel,
            self.max_footprint.map_or(footprint, |m| footprint.min(m)),
        );
        let find = |(t, chunked): (usize, bool)| {
            self.points.borrow().iter().position(|p| {
                p.kernel == kernel
                    && p.threads == t
                    && p.footprint_bytes == footprint
                    && p.chunked == chunked
            })
        };
        let ways: Vec<Way> = ways
            .iter()
            .map(|&(t, c, standard)| (t.clamp(1, self.pool_threads), c, standard))
            .collect();
        let missing: Vec<Way> = ways
            .iter()
            .copied()
            .filter(|&(t, c, _)| find((t, c)).is_none())
            .collect();
        if !missing.is_empty() {
            let mut work = Work::new(self.device, kernel, footprint)?;
            for (t, c, standard) in missing {
                let p = self.measure(&mut work, kernel, (t, c), standard)?;
                self.points.borrow_mut().push(p);
            }
        }
        let mut out = Vec::with_capacity(ways.len());
        for (t, c, standard) in ways {
            let i = find((t, c)).context("a ladder point just measured")?;
            let points = &mut self.points.borrow_mut();
            points[i].standard |= standard;
            out.push(points[i].clone());
        }
        Ok(out)
    }

    /// The ladder as it stands, for a result saved while the run goes on.
    pub fn snapshot(&self) -> crate::schema::Ladder {
        crate::schema::Ladder {
            caches: self.caches.clone(),
            pool_threads: self.pool_threads,
            clock_overhead_ms: self.clock_ms,
            points: self.points.borrow().clone(),
        }
    }

    /// The ladder as the result file keeps it.
    pub fn finish(self) -> crate::schema::Ladder {
        crate::schema::Ladder {
            caches: self.caches,
            pool_threads: self.pool_threads,
            clock_overhead_ms: self.clock_ms,
            points: self.points.into_inner(),
        }
    }

    /// Times one point on `work`: K calls per sample, the clock's cost
    /// subtracted. The clock covers K calls of the kernel and the device's
    /// synchronization (the clock's own rules: warm-up first, then each
    /// sample).
    fn measure(
        &self,
        work: &mut Work,
        kernel: LadderKernel,
        (threads, chunked): (usize, bool),
        standard: bool,
    ) -> Result<LadderPoint> {
        let label = format!(
            "ladder {} {threads}t{} {}",
            kernel.name(),
            if chunked { "*" } else { "" },
            crate::units::size(work.footprint())
        );
        let c = time_calls(
            self.device,
            self.telemetry,
            self.plan,
            &label,
            self.clock_ms,
            || work.call(threads, chunked),
        )?;
        let mut p = self.point_from(work, kernel, (threads, chunked), c);
        p.standard = standard;
        Ok(p)
    }
}

/// The kernels a device's ladder has: read, copy and triad, the copy and
/// the triad with each store kind on an x86-64 CPU ([`cpu`]'s), and on a
/// GPU the driver's device-to-device copy beside the suite's three.
pub fn kernels(device: &Device) -> Vec<LadderKernel> {
    use LadderKernel::{CopyNt, DeviceCopy, TriadNt};
    let mut k = LadderKernel::CPU.to_vec();
    let streaming = device.is_cpu() && cpu::HAS_STREAMING_STORES;
    k.retain(|k| streaming || !matches!(k, CopyNt | TriadNt));
    if device.is_cuda() {
        k.push(DeviceCopy);
    }
    k
}

/// Elements of each of a kernel's arrays for a request of `footprint` bytes:
/// whole float4s (a GPU thread's 16-byte load), at least 256 per array.
pub fn elements(kernel: LadderKernel, footprint: u64) -> usize {
    let (r, w) = kernel.streams();
    ((footprint / 4 / (r + w)) as usize / 4 * 4).max(256)
}

/// The footprint a kernel's arrays really have for a request of `footprint`
/// bytes: [`elements`] f32 per array, every array together.
pub fn fitted(kernel: LadderKernel, footprint: u64) -> u64 {
    let (r, w) = kernel.streams();
    (elements(kernel, footprint) * 4) as u64 * (r + w)
}

/// What the whole ladder holds at once, on the device: its largest point,
/// memory's footprint, or `max_footprint` when given (`--ladder-max-mib`: the
/// ladder then measures at it, larger or smaller than memory's; a size that
/// cannot fit is refused before anything is computed).
pub fn need(device: &Device, max_footprint: Option<u64>) -> Result<Need> {
    let (f, what) = match max_footprint {
        Some(m) => (m, format!("--ladder-max-mib {}", m >> 20)),
        None => {
            let f = memory_footprint(device, None)?;
            let size = crate::units::size(f);
            (
                f,
                format!("the bandwidth ladder (a {size} footprint past the caches)"),
            )
        }
    };
    // One kernel's arrays at a time: the ladder measures its points in
    // turn. (A `kernels` copy row holds both store kinds' arrays beside its
    // own tensors: its case's need counts them, `bench::kernels::needs`.)
    Ok(Need {
        what,
        host_bytes: 0,
        device_bytes: f,
    })
}

/// Memory's footprint on `device` (four times its last cache, at least
/// [`MIN_MEMORY_FOOTPRINT`]), or `max_footprint` when that is smaller: the
/// ladder's largest point, before a ladder is made (what must fit, and the
/// cases sized to live in memory).
pub fn memory_footprint(device: &Device, max_footprint: Option<u64>) -> Result<u64> {
    Ok(footprint_past(&caches(device)?.0, max_footprint))
}

fn footprint_past(caches: &[CacheLevel], max_footprint: Option<u64>) -> u64 {
    let f = *levels::standard_footprints(1, caches, MIN_MEMORY_FOOTPRINT)
        .last()
        .unwrap_or(&MIN_MEMORY_FOOTPRINT);
    max_footprint.map_or(f, |m| f.min(m))
}

/// The caches a footprint is placed in on `device`, and memory's name.
fn caches(device: &Device) -> Result<(Vec<CacheLevel>, &'static str)> {
    if device.is_cuda() {
        let l2 = crate::device::largest_cache(device)?;
        let caches = l2
            .map(|c| CacheLevel {
                name: c.name,
                bytes: c.bytes,
                shared_by: 1,
            })
            .into_iter()
            .collect();
        return Ok((caches, levels::GPU_MEMORY));
    }
    Ok((levels::cpu_caches(), levels::CPU_MEMORY))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point of `mib` MiB (DRAM past 100), its rate `gb_per_s`.
    pub(super) fn point(
        kernel: LadderKernel,
        threads: usize,
        mib: u64,
        gb_per_s: f64,
    ) -> LadderPoint {
        LadderPoint {
            kernel,
            threads,
            footprint_bytes: mib << 20,
            level: if mib > 100 { "DRAM" } else { "L3" }.into(),
            standard: false,
            bytes_moved: mib << 20,
            calls_per_sample: 1,
            time_per_call_ms: 1.0,
            gb_per_s,
            chunked: false,
            from_fastest_sample: true,
            timed: crate::telemetry::timed_at(&[1.0; 3], &[]),
        }
    }

    #[test]
    fn a_bound_is_never_under_a_larger_footprints_reading() {
        use LadderKernel::{Copy, Read};
        let at = [point(Read, 1, 80, 10.0), point(Read, 2, 80, 12.0)];
        // Measured so far: a faster read past the caches on 2 threads, a
        // faster one on 4 (not asked for), a faster copy (another kernel),
        // and a faster smaller footprint (not a bound for a larger one).
        let measured = [
            point(Read, 2, 1024, 14.0),
            point(Read, 4, 1024, 99.0),
            point(Copy, 2, 1024, 99.0),
            point(Read, 2, 8, 99.0),
        ];
        let memory = 512 << 20;
        let b = envelope(&at, &measured, Read, &[1, 2], memory).unwrap();
        assert_eq!((b.gb_per_s, b.level.as_str(), b.threads), (14.0, "DRAM", 2));
        // Where the larger footprint is slower, the row's own point holds.
        let slower = [point(Read, 2, 1024, 11.0)];
        let b = envelope(&at, &slower, Read, &[1, 2], memory).unwrap();
        assert_eq!((b.gb_per_s, b.footprint_bytes), (12.0, 80 << 20));
    }

    #[test]
    fn past_the_caches_any_footprint_of_memorys_or_more_bounds() {
        use LadderKernel::Read;
        let memory = 512 << 20;
        // A row past memory's footprint, read at a slow moment, against a
        // faster read at memory's footprint measured before it.
        let at = [point(Read, 2, 1024, 40.0)];
        let earlier = [point(Read, 2, 512, 80.0), point(Read, 2, 256, 99.0)];
        let b = envelope(&at, &earlier, Read, &[1, 2], memory).unwrap();
        assert_eq!((b.gb_per_s, b.footprint_bytes), (80.0, 512 << 20));
        // Under memory's footprint a smaller footprint bounds nothing (it may
        // be partly cached).
        let at = [point(Read, 2, 300, 40.0)];
        let b = envelope(&at, &earlier, Read, &[1, 2], memory).unwrap();
        assert_eq!((b.gb_per_s, b.footprint_bytes), (80.0, 512 << 20));
        let b = envelope(&at, &earlier[1..], Read, &[1, 2], memory).unwrap();
        assert_eq!(b.gb_per_s, 40.0, "256 MiB is smaller and under memory's");
    }

    #[test]
    fn a_row_is_held_to_a_faster_larger_footprint_read_later() {
        use LadderKernel::{Copy, Read};
        let t = Telemetry::open(&Device::Cpu);
        let ladder = Ladder::new(&Device::Cpu, &t, Some(64 << 20)).unwrap();
        let n = ladder.pool_threads();
        ladder.points.borrow_mut().extend([
            point(Read, n, 1, 100.0),
            point(Read, n, 2, 150.0),
            point(Read, n, 4, 140.0),
            point(Read, 1, 8, 120.0),
            point(Read, n, 0, 900.0),
            point(Copy, n, 4, 999.0),
        ]);
        let bound = |mib: u64, gb_per_s: f64| Bound {
            kernel: Read,
            threads: n,
            footprint_bytes: mib << 20,
            level: "L3".into(),
            gb_per_s,
            chunked: false,
        };
        let p = ladder.faster_than(&bound(1, 100.0)).unwrap();
        assert_eq!((p.gb_per_s, p.footprint_bytes), (150.0, 2 << 20));
        assert!(
            ladder.faster_than(&bound(2, 150.0)).is_none(),
            "the fastest"
        );
        assert!(
            ladder.faster_than(&bound(3, 50.0)).is_none(),
            "no point of its own"
        );
    }

    #[test]
    fn the_cap_holds_every_footprint() {
        let t = Telemetry::open(&Device::Cpu);
        let ladder = Ladder::new(&Device::Cpu, &t, Some(64 << 10)).unwrap();
        assert_eq!(ladder.memory_footprint(), 64 << 10);
        ladder.measure_all().unwrap();
        let file = ladder.finish();
        assert!(file.points.iter().all(|p| p.footprint_bytes <= 64 << 10));
        // Each kernel on 1 thread and the pool's, at the capped levels.
        assert!(file.points.len() >= 3);
    }

    #[test]
    fn a_sample_is_long_enough_to_dwarf_the_clock() {
        assert_eq!(calls_per_sample(0.0001, 0.25), 2500);
        assert_eq!(calls_per_sample(1.0, 0.25), 1);
        assert_eq!(calls_per_sample(0.0, 0.25), 1);
        assert_eq!(calls_per_sample(1e-12, 0.25), 1_000_000);
        assert_eq!(fitted(LadderKernel::Triad, 12 << 10), 12 << 10);
        assert_eq!(
            fitted(LadderKernel::Triad, (12 << 10) + 40),
            12 << 10,
            "whole float4s"
        );
        assert_eq!(
            fitted(LadderKernel::Copy, 10),
            2048,
            "at least 256 elements an array"
        );
    }

    fn ladder_on(device: &Device) {
        let t = Telemetry::open(device);
        let ladder = Ladder::new(device, &t, Some(1 << 20)).unwrap();
        let f = 64 << 10;
        let kernel = kernels(device)[0];
        let b = ladder.bound(kernel, ladder.pool_threads(), f).unwrap();
        assert!(b.gb_per_s > 0.0 && b.footprint_bytes == fitted(kernel, f));
        // Asked again, the same point: measured once.
        let again = ladder.bound(kernel, ladder.pool_threads(), f).unwrap();
        assert_eq!(again, b);
        let file = ladder.finish();
        // One thread, and the pool's in fixed parts and in parts taken as
        // threads finish.
        let n = if file.pool_threads > 1 { 3 } else { 1 };
        assert_eq!(file.points.len(), n);
        assert_eq!(file.points.iter().filter(|p| p.chunked).count(), n / 3);
        for p in &file.points {
            assert!(p.calls_per_sample >= 1 && p.from_fastest_sample);
            // The fastest sample's time, less the clock's cost, per call.
            let k = p.calls_per_sample as f64;
            let fastest = p.timed.fastest_ms();
            let want = ((fastest - file.clock_overhead_ms) / k).max(fastest / k * 1e-3);
            assert!((p.time_per_call_ms - want).abs() <= 1e-12 + 1e-9 * want);
            let expect = p.bytes_moved as f64 / (p.time_per_call_ms * 1e-3) / 1e9;
            assert!((p.gb_per_s - expect).abs() <= 1e-9 * expect);
            assert!(
                p.time_per_call_ms * p.calls_per_sample as f64
                    <= p.timed.median_ms.max(p.timed.gpu_median_ms.unwrap_or(0.0)) * 1.0001
            );
        }
    }

    #[test]
    fn ladder_cpu() {
        ladder_on(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn ladder_cuda() {
        ladder_on(&Device::new_cuda(0).unwrap());
    }
}
