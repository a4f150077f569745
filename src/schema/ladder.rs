//! The bandwidth ladder (schema 2.4; store kinds 2.12): what this device can move, measured in
//! the same run as the rows held against it. Read (a sum), copy and triad
//! (`a = b + s*c`) kernels, STREAM's and BabelStream's, at footprints that land
//! in each cache level and in memory, on one thread and on the compute pool's
//! threads; on a GPU the same kernels and a device-to-device copy. Every
//! bound a row is held against ([`Bound`]) names the point of the ladder it
//! read: its kernel, threads, footprint and the level that footprint lives in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Timed;

/// Above this percentage of its bound a row says its bound is wrong (its
/// threads, footprint or level): within 5% is the noise of two medians.
pub const BEATEN_PCT: f64 = 105.0;

/// A ladder kernel: the access pattern of the bytes it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LadderKernel {
    /// One stream read and summed: no writes (a matrix-vector product's weights).
    Read,
    /// One stream read, one written with ordinary stores (a norm, a
    /// softmax): past the caches each line written is read first (the
    /// core's read for ownership), so memory moves three lines for the two
    /// counted. The suite's own loop (the C library's `memcpy` before 2.12,
    /// which stores past the cache above a size of its own choosing).
    Copy,
    /// Two streams read, one written with ordinary stores: `a = b + s*c`
    /// (an add in the cache, SwiGLU).
    Triad,
    /// The driver's device-to-device copy (`cuMemcpyDtoD`), on a GPU.
    DeviceCopy,
    /// The copy with non-temporal stores (x86's `movntps`, 2.12): the lines
    /// go to memory without being read first and without staying in the
    /// caches, as `memcpy` stores a large copy; slower than ordinary stores
    /// on data a cache holds, faster past the caches.
    CopyNt,
    /// The triad with non-temporal stores (2.12): the bound of the suite's
    /// f32 add where its output is larger than the last cache.
    TriadNt,
}

impl LadderKernel {
    /// The CPU's kernels: each pattern, the copy and triad with either store.
    pub const CPU: [LadderKernel; 5] = [
        Self::Read,
        Self::Copy,
        Self::CopyNt,
        Self::Triad,
        Self::TriadNt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Copy => "copy",
            Self::Triad => "triad",
            Self::DeviceCopy => "device copy",
            Self::CopyNt => "copy nt",
            Self::TriadNt => "triad nt",
        }
    }

    /// How the kernel stores: "-" (it only reads), "ordinary" (each line
    /// through the caches, read for ownership first), "non-temporal"
    /// (straight to memory) or "driver's" (the driver's own copy).
    pub fn stores(self) -> &'static str {
        match self {
            Self::Read => "-",
            Self::Copy | Self::Triad => "ordinary",
            Self::CopyNt | Self::TriadNt => "non-temporal",
            Self::DeviceCopy => "driver's",
        }
    }

    /// The same pattern with every store kind a ladder may hold: what an
    /// op is held to when its stores are not its own choice (`memcpy`
    /// chooses by size): the faster of them bounds it.
    pub fn either_store(self) -> &'static [LadderKernel] {
        match self {
            Self::Copy | Self::CopyNt => &[Self::Copy, Self::CopyNt],
            Self::Triad | Self::TriadNt => &[Self::Triad, Self::TriadNt],
            Self::Read => &[Self::Read],
            Self::DeviceCopy => &[Self::DeviceCopy],
        }
    }

    /// Streams read and written per element.
    pub fn streams(self) -> (u64, u64) {
        match self {
            Self::Read => (1, 0),
            Self::Copy | Self::DeviceCopy | Self::CopyNt => (1, 1),
            Self::Triad | Self::TriadNt => (2, 1),
        }
    }

    /// The kernel whose pattern is an op's: the streams it reads and writes
    /// (a norm's small weight vector is not a stream), with ordinary stores.
    pub fn for_streams(reads: u64, writes: u64) -> Self {
        match (reads, writes) {
            (_, 0) => Self::Read,
            (r, _) if r >= 2 => Self::Triad,
            _ => Self::Copy,
        }
    }
}

/// One cache level as the system reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheLevel {
    /// "L1d", "L2", "L3"; "L2 (GPU)".
    pub name: String,
    /// One instance's size.
    pub bytes: u64,
    /// Logical CPUs that share one instance (1: private to a thread).
    pub shared_by: usize,
}

/// One point of the ladder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LadderPoint {
    pub kernel: LadderKernel,
    /// Threads it ran on (1, or the compute pool's; 1 on a GPU: the launcher).
    pub threads: usize,
    /// Bytes of every array it touches together.
    pub footprint_bytes: u64,
    /// Where that footprint lives at these threads: "L1d", "L2", "L3", "DRAM"
    /// (on a GPU "L2 (GPU)" or "device memory").
    pub level: String,
    /// One of the ladder's own footprints (a level's, the table and chart);
    /// else a footprint a row asked for.
    pub standard: bool,
    /// STREAM's counting: each array element read or written once per call.
    pub bytes_moved: u64,
    /// Calls timed together in one sample, so that a sample stays far above
    /// the clock's own cost.
    pub calls_per_sample: u64,
    /// (fastest sample - the clock's cost) / calls_per_sample: STREAM's "Best
    /// Rate" (the median sample before 2.8; see `from_fastest_sample`).
    pub time_per_call_ms: f64,
    /// bytes_moved / time_per_call_ms, in 10^9 bytes per second.
    pub gb_per_s: f64,
    /// The threads took parts as they finished (Candle's `execute_chunked`,
    /// as the suite's ops share their work), not fixed halves: on a VM
    /// whose vCPUs run at different speeds, fixed parts wait for the slowest
    /// (2.5; false before).
    #[serde(default)]
    pub chunked: bool,
    /// The time is the fastest sample's, as STREAM's "Best Rate" (2.8; false
    /// before: the median sample's, which a row's median beat by 8% once).
    #[serde(default)]
    pub from_fastest_sample: bool,
    #[serde(flatten)]
    pub timed: Timed,
}

/// The ladder a run measured: the caches it placed footprints in, the
/// compute pool's threads, the clock's cost that was subtracted, and the
/// points, in the order measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ladder {
    pub caches: Vec<CacheLevel>,
    pub pool_threads: usize,
    /// The clock's own cost per sample (an empty work item's median).
    pub clock_overhead_ms: f64,
    pub points: Vec<LadderPoint>,
}

/// A footprint placed past the reported caches that reads more than this
/// times memory's own footprint (the same kernel and threads) is held in a
/// cache the system does not report: on a VM, the host's L3s (two vCPUs on
/// two of an EPYC's core complexes read 92-140 MiB at 68-107 GB/s where 256
/// MiB read 36-38, docs/measuring.md). Memory's own reading moves by up to
/// ~30% between moments on such a VM, so only a larger gap names a cache.
pub const UNREPORTED_CACHE_RATIO: f64 = 1.5;

/// What a row is held against: the best point of the ladder at its
/// footprint and kernel with at most its threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bound {
    pub kernel: LadderKernel,
    pub threads: usize,
    pub footprint_bytes: u64,
    /// The point's level, or "past-L3 cache" (after the last reported
    /// level) where a footprint placed past the caches read over
    /// [`UNREPORTED_CACHE_RATIO`] times memory's own.
    pub level: String,
    pub gb_per_s: f64,
    /// Read with parts taken as threads finished ([`LadderPoint::chunked`], 2.5).
    #[serde(default)]
    pub chunked: bool,
}

impl LadderPoint {
    /// The bound this point sets: its kernel, threads, footprint, level and rate.
    pub fn bound(&self) -> Bound {
        Bound {
            kernel: self.kernel,
            threads: self.threads,
            footprint_bytes: self.footprint_bytes,
            level: self.level.clone(),
            gb_per_s: self.gb_per_s,
            chunked: self.chunked,
        }
    }
}

impl Ladder {
    /// The point measured for `kernel` at `threads` and `footprint`, if any.
    pub fn point(
        &self,
        kernel: LadderKernel,
        threads: usize,
        footprint: u64,
    ) -> Option<&LadderPoint> {
        self.points.iter().find(|p| {
            p.kernel == kernel
                && p.threads == threads
                && p.footprint_bytes == footprint
                && !p.chunked
        })
    }
}
