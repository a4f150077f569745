//! Where a footprint lives: the caches the system reports (sysfs on the CPU,
//! the driver's L2 on a GPU), and the pure rules that place a footprint in one
//! of them at a thread count and choose the footprints that land in each.
//! A private cache (one per core) holds more the more threads share the
//! work: two threads have two L2s. A footprint lives in the smallest level
//! it fits in three quarters of (the rest is others' data, and associativity
//! evicts before a cache is full); past the last level it lives in memory.

use crate::schema::CacheLevel;

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
