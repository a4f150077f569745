//! Where a footprint lives: the caches the system reports (sysfs on the CPU,
//! the driver's L2 on a GPU), and the pure rules that place a footprint in one
//! of them at a thread count and choose the footprints that land in each.
//! A private cache (one per core) holds more the more threads share the
//! work: two threads have two L2s. A footprint lives in the smallest level
//! it fits in three quarters of (the rest is others' data, and associativity
//! evicts before a cache is full); past the last level it lives in memory.
//! Here too the pure rules of a bound: which reading bounds a footprint
//! ([`envelope`]), and its level's name where a footprint past the caches
//! reads far faster than memory ([`named`]: a cache the system hides).

use crate::schema::{Bound, CacheLevel, LadderKernel, LadderPoint, UNREPORTED_CACHE_RATIO};

/// The name of memory past the last cache.
pub const CPU_MEMORY: &str = "DRAM";
pub const GPU_MEMORY: &str = "device memory";

/// The CPU's data and unified caches as cpu0 sees them, smallest first.
pub fn cpu_caches() -> Vec<CacheLevel> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
        return Vec::new();
    };
    let read = |p: &std::path::Path, f: &str| std::fs::read_to_string(p.join(f)).ok();
    let mut out: Vec<(u32, CacheLevel)> = dir
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let kind = read(&path, "type")?;
            if kind.trim() == "Instruction" {
                return None;
            }
            let level: u32 = read(&path, "level")?.trim().parse().ok()?;
            let bytes = crate::env::parse_cache_size(&read(&path, "size")?)?;
            let shared_by = read(&path, "shared_cpu_list").map_or(1, |l| cpu_count(&l));
            let name = if kind.trim() == "Data" {
                format!("L{level}d")
            } else {
                format!("L{level}")
            };
            Some((
                level,
                CacheLevel {
                    name,
                    bytes,
                    shared_by,
                },
            ))
        })
        .collect();
    out.sort_by_key(|(l, c)| (*l, c.bytes));
    out.into_iter().map(|(_, c)| c).collect()
}

/// CPUs in a sysfs list ("0-3,8,10-11").
pub fn cpu_count(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum::<usize>()
        .max(1)
}

/// Bytes of `level` that `threads` threads have between them: one instance
/// per `shared_by` threads.
pub fn capacity(level: &CacheLevel, threads: usize) -> u64 {
    level.bytes * threads.max(1).div_ceil(level.shared_by.max(1)) as u64
}

/// The level `footprint` lives in at `threads` threads, or `memory`.
pub fn place(footprint: u64, threads: usize, caches: &[CacheLevel], memory: &str) -> String {
    caches
        .iter()
        .find(|c| footprint <= capacity(c, threads) / 4 * 3)
        .map_or_else(|| memory.to_string(), |c| c.name.clone())
}

/// `best`'s bound, its level as placed, or "past-L3 cache" (after the last
/// reported level, `last`) where it is memory's and it reads over
/// [`UNREPORTED_CACHE_RATIO`] times memory's own reading as far as
/// `measured` holds it (the same kernel, on `threads`, at memory's
/// footprint or more): a footprint placed past the caches that reads far
/// faster than that may be a cache the system hides
/// ([`crate::bench::ladder::Ladder::bound`] measures again before it says
/// so). Only a footprint over twice the last cache's capacity: one under
/// it straddles that cache and memory, its speed the reported cache's part.
pub fn named(
    best: &LadderPoint,
    measured: &[LadderPoint],
    threads: &[usize],
    (memory, memory_name, last): (u64, &str, Option<&CacheLevel>),
) -> Bound {
    let memory_read = measured
        .iter()
        .filter(|p| p.kernel == best.kernel && threads.contains(&p.threads))
        .filter(|p| p.footprint_bytes >= memory && best.footprint_bytes < memory)
        .map(|p| p.gb_per_s)
        .reduce(f64::max);
    let last = last.filter(|c| best.footprint_bytes > 2 * capacity(c, best.threads));
    let mut bound = best.bound();
    if let (Some(last), Some(m)) = (last, memory_read) {
        if bound.level == memory_name && bound.gb_per_s > UNREPORTED_CACHE_RATIO * m {
            bound.level = format!("past-{} cache", last.name);
        }
    }
    bound
}

/// The fastest of `at` (the points at a row's footprint) and of every point
/// measured so far of `kernel` at `threads` over a larger footprint: a
/// footprint is never slower to stream than a larger one, so where the
/// ladder read a larger one faster (noise between its samples), that reading
/// is the bound, and the bound names where it was read. Past the caches
/// (`memory`'s footprint, four times the last cache, and more) the footprint
/// no longer matters: there every point of memory's footprint or more bounds
/// the row, so that one slow moment of a VM's memory (its reads past the
/// caches moved 46-87 GB/s within one run on a 2-vCPU EPYC) does not set a
/// bound an op then beats.
pub fn envelope(
    at: &[LadderPoint],
    measured: &[LadderPoint],
    kernel: LadderKernel,
    threads: &[usize],
    memory: u64,
) -> Option<LadderPoint> {
    let smallest = at.iter().map(|p| p.footprint_bytes).min()?;
    let from = if smallest >= memory {
        memory
    } else {
        smallest + 1
    };
    at.iter()
        .chain(measured.iter().filter(|p| {
            p.kernel == kernel && threads.contains(&p.threads) && p.footprint_bytes >= from
        }))
        .max_by(|a, b| a.gb_per_s.total_cmp(&b.gb_per_s))
        .cloned()
}

/// Footprints that land in each level at `threads` (half of what the
/// threads hold of it), then memory's: four times the last level's capacity,
/// and at least `min_memory` bytes.
pub fn standard_footprints(threads: usize, caches: &[CacheLevel], min_memory: u64) -> Vec<u64> {
    let mut out: Vec<u64> = caches.iter().map(|c| capacity(c, threads) / 2).collect();
    let last = caches.last().map_or(0, |c| capacity(c, threads));
    out.push((4 * last).max(min_memory));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This suite's Xeon VM: 48 KiB L1d and 2 MiB L2 per core, 300 MiB L3
    /// shared by both vCPUs.
    fn xeon() -> Vec<CacheLevel> {
        let c = |name: &str, bytes: u64, shared_by| CacheLevel {
            name: name.into(),
            bytes,
            shared_by,
        };
        vec![
            c("L1d", 48 << 10, 1),
            c("L2", 2 << 20, 1),
            c("L3", 300 << 20, 2),
        ]
    }

    #[test]
    fn a_footprint_past_the_caches_that_outreads_memory_is_named_a_cache() {
        use super::super::tests::point;
        use crate::schema::LadderKernel::{Copy, Read};
        // The AMD VM's: a 32 MiB L3 both vCPUs share.
        let l3 = CacheLevel {
            name: "L3".into(),
            bytes: 32 << 20,
            shared_by: 2,
        };
        let mut weights = point(Read, 2, 128, 90.0);
        weights.level = "DRAM".into();
        let memory = 256 << 20;
        let names = |measured: &[LadderPoint]| {
            named(&weights, measured, &[1, 2], (memory, "DRAM", Some(&l3))).level
        };
        assert_eq!(names(&[point(Read, 2, 256, 37.0)]), "past-L3 cache");
        // Memory's reading close to it (within its moment-to-moment
        // spread), another kernel's, or none: DRAM.
        assert_eq!(names(&[point(Read, 2, 256, 70.0)]), "DRAM");
        assert_eq!(names(&[point(Read, 2, 256, 75.0)]), "DRAM");
        assert_eq!(names(&[point(Copy, 2, 256, 37.0)]), "DRAM");
        assert_eq!(names(&[]), "DRAM");
        // Memory's own footprint is memory whatever it reads.
        let at_memory = point(Read, 2, 256, 90.0);
        let b = named(
            &at_memory,
            &[point(Read, 1, 1024, 37.0)],
            &[1, 2],
            (memory, "DRAM", Some(&l3)),
        );
        assert_eq!(b.level, "DRAM");
        // A footprint under twice the last cache straddles it: DRAM.
        let mut straddles = point(Read, 2, 64, 90.0);
        straddles.level = "DRAM".into();
        let b = named(
            &straddles,
            &[point(Read, 2, 256, 37.0)],
            &[1, 2],
            (memory, "DRAM", Some(&l3)),
        );
        assert_eq!(b.level, "DRAM");
        // A cache's own name is never touched, nor a machine without caches.
        let mut in_l3 = point(Read, 2, 128, 300.0);
        in_l3.level = "L3".into();
        let b = named(
            &in_l3,
            &[point(Read, 2, 256, 37.0)],
            &[1, 2],
            (memory, "DRAM", Some(&l3)),
        );
        assert_eq!(b.level, "L3");
        let b = named(
            &weights,
            &[point(Read, 2, 256, 37.0)],
            &[1, 2],
            (memory, "DRAM", None),
        );
        assert_eq!(b.level, "DRAM");
    }

    #[test]
    fn a_footprint_lives_in_the_smallest_level_that_holds_it() {
        let x = xeon();
        assert_eq!(place(16 << 10, 1, &x, CPU_MEMORY), "L1d");
        assert_eq!(place(48 << 10, 1, &x, CPU_MEMORY), "L2", "a full L1 spills");
        // Two threads hold two L1s and two L2s, but one L3.
        assert_eq!(place(64 << 10, 2, &x, CPU_MEMORY), "L1d");
        assert_eq!(place(3 << 20, 1, &x, CPU_MEMORY), "L3");
        assert_eq!(place(3 << 20, 2, &x, CPU_MEMORY), "L2");
        assert_eq!(place(200 << 20, 2, &x, CPU_MEMORY), "L3");
        assert_eq!(place(1 << 30, 2, &x, CPU_MEMORY), "DRAM");
        assert_eq!(place(1 << 20, 1, &[], GPU_MEMORY), "device memory");
    }

    #[test]
    fn the_standard_footprints_land_one_in_each_level() {
        let x = xeon();
        for threads in [1, 2] {
            let f = standard_footprints(threads, &x, 256 << 20);
            let levels: Vec<String> = f
                .iter()
                .map(|b| place(*b, threads, &x, CPU_MEMORY))
                .collect();
            assert_eq!(
                levels,
                ["L1d", "L2", "L3", "DRAM"],
                "{threads} threads: {f:?}"
            );
            assert_eq!(*f.last().unwrap(), 1200 << 20, "4x the L3");
        }
        assert_eq!(cpu_count("0-3,8,10-11"), 7);
        assert_eq!(cpu_count("1"), 1);
    }
}
