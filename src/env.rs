//! The machine and build a result came from, recorded in every JSON report so
//! that numbers from two machines can be compared knowing what produced them:
//! versions, git commit, OS, CPU model and threads, and the compile-time
//! features that change speed (the `cuda` feature, CPU SIMD levels).

use crate::schema::Environment;

/// What `--version` prints after the program's name: the suite's version and
/// the commit the program was built from (`-dirty` when the tree had
/// uncommitted changes then), so a user can tell which build a recipe runs.
pub const BUILD_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CANDLE_LAB_GIT_COMMIT"),
    ", candle ",
    env!("CANDLE_LAB_CANDLE_VERSION"),
    ")"
);

/// The environment of this process and build, for a result file.
pub fn capture() -> Environment {
    let commit = env!("CANDLE_LAB_GIT_COMMIT");
    let candle = env!("CANDLE_LAB_CANDLE_VERSION");
    let cuda = env!("CANDLE_LAB_CUDA_BUILD_VERSION");
    let strings = |v: Vec<&str>| v.into_iter().map(String::from).collect();
    Environment {
        framework: "candle".into(),
        framework_version: if candle.is_empty() { "unknown" } else { candle }.into(),
        suite_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: (!commit.is_empty()).then(|| commit.into()),
        os: os_name(),
        arch: std::env::consts::ARCH.into(),
        cpu_model: cpu_model(),
        cpu: Some(crate::cpu_identity::CpuIdentity::detect()),
        cpu_threads_available: std::thread::available_parallelism().map_or(1, |n| n.get()),
        compute_threads: candle_core::utils::get_num_threads(),
        build_features: strings(cargo_features()),
        target_features: strings(target_features()),
        profile: Some(
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .into(),
        ),
        cuda_build_version: (cfg!(feature = "cuda") && !cuda.is_empty()).then(|| cuda.into()),
        omp_wait_policy: None,
    }
}

fn cargo_features() -> Vec<&'static str> {
    let mut f = Vec::new();
    if cfg!(feature = "cuda") {
        f.push("cuda");
    }
    f
}

fn target_features() -> Vec<&'static str> {
    let mut f = Vec::new();
    macro_rules! probe {
        ($($feat:literal),*) => { $( if cfg!(target_feature = $feat) { f.push($feat); } )* };
    }
    probe!(
        "sse4.2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bf16",
        "neon"
    );
    f
}

/// The CPU's model name from `/proc/cpuinfo`, or the architecture when unknown.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name") || l.starts_with("Model"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

/// "Debian GNU/Linux 12 (bookworm)" from `/etc/os-release`, else the OS family.
fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// The host's memory as `/proc/meminfo` gives it, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostMemory {
    /// `MemTotal`: RAM the kernel manages now. On a machine whose memory grows
    /// on demand (a VM that is given more as it uses it) this starts far below
    /// what it can reach, so it bounds nothing there.
    pub total_bytes: u64,
    /// `SwapTotal`.
    pub swap_bytes: u64,
    /// `MemAvailable`: what a new allocation can have now without swapping.
    pub available_bytes: u64,
}

/// `None` where `/proc/meminfo` does not exist or lacks a field.
pub fn host_memory() -> Option<HostMemory> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<HostMemory> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(HostMemory {
        total_bytes: field("MemTotal:")?,
        swap_bytes: field("SwapTotal:")?,
        available_bytes: field("MemAvailable:")?,
    })
}

/// The CPU's largest cache as (level, bytes), from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}` (data and
/// unified caches only); `None` where sysfs does not say.
pub fn cpu_last_level_cache() -> Option<(u32, u64)> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let read = |p: &std::path::Path, f: &str| std::fs::read_to_string(p.join(f)).ok();
    dir.filter_map(|entry| {
        let path = entry.ok()?.path();
        let kind = read(&path, "type")?;
        if kind.trim() == "Instruction" {
            return None;
        }
        let level: u32 = read(&path, "level")?.trim().parse().ok()?;
        Some((level, parse_cache_size(&read(&path, "size")?)?))
    })
    .max()
}

/// sysfs cache sizes: "48K", "2048K", "300M", or plain bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, scale) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits.parse::<u64>().ok().map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_fills_what_the_reports_promise() {
        let env = capture();
        assert_eq!(env.framework, "candle");
        assert!(!env.cpu_model.is_empty());
        assert!(env.cpu_threads_available >= 1 && env.compute_threads >= 1);
        assert_eq!(env.framework_version.split('.').next(), Some("0"));
        let cuda = env.build_features.iter().any(|f| f == "cuda");
        assert_eq!(cuda, cfg!(feature = "cuda"));
        assert_eq!(env.cuda_build_version.is_some(), cfg!(feature = "cuda"));
    }

    #[test]
    fn meminfo_fields_are_read_in_bytes() {
        let text = "MemTotal:  2048 kB\nMemFree: 10 kB\nMemAvailable: 1024 kB\nSwapTotal: 0 kB\n";
        let mem = parse_meminfo(text).unwrap();
        assert_eq!(
            (mem.total_bytes, mem.available_bytes, mem.swap_bytes),
            (2048 * 1024, 1024 * 1024, 0)
        );
        assert_eq!(parse_meminfo("MemTotal: 2048 kB\n"), None);
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("48K\n"), Some(48 * 1024));
        assert_eq!(parse_cache_size("307200K"), Some(300 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("lots"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn host_memory_is_read_on_linux() {
        let mem = host_memory().unwrap();
        assert!(mem.available_bytes > 1 << 20);
        assert!(mem.total_bytes >= mem.available_bytes);
    }
}
