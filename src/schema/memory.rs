//! The body of `memory`: host <-> device transfers, the device's measured copy
//! ceiling, Candle's memory-bound operations against it, out of memory, and the
//! points of a roofline. Bytes are counted, not estimated: each row states what
//! it read and wrote, and its GB/s is those bytes over the row's time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::TimedRow;
use super::timed::{SectionStatus, TelemetrySource, TimeSource, Timed};
use super::{Bound, Ladder};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryResults {
    /// Shape of the f32 tensors the operations run on (rows x 4096).
    pub shape: Vec<usize>,
    pub elements: u64,
    /// Bytes of one such tensor at f32 (elements x 4).
    pub tensor_bytes_f32: u64,
    pub warmup: usize,
    pub iters: usize,
    /// The largest cache in front of memory (the CPU's last level, the GPU's
    /// L2), when known: tensors that fit in it measure the cache, not memory.
    pub cache_bytes: Option<u64>,
    pub telemetry: TelemetrySource,
    pub transfers: Transfers,
    /// The ladder's copy at two f32 tensors' footprint on the pool's threads
    /// (the bandwidth ladder's point, `ladder`), as a row: what the older
    /// files' single ceiling was.
    pub ceiling: BandwidthRow,
    /// The bandwidth ladder (2.4): read, copy and triad at a footprint in each
    /// cache level and in memory, on one thread and the pool's; every row's
    /// `bound` is one of its points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// The datasheet's memory bandwidth of this GPU, when listed.
    pub datasheet_gb_per_s: Option<f64>,
    /// Candle's operations, each on `elements` elements.
    pub ops: Vec<BandwidthRow>,
    pub out_of_memory: OutOfMemory,
    pub roofline: Roofline,
}

impl super::rows::Rows for MemoryResults {
    fn validate(&self) -> anyhow::Result<()> {
        let t = &self.transfers;
        super::section(t.status, t.reason.as_deref(), t.rows.len())
    }

    /// The copy ceiling, then each op by its input type ("add f32"), held
    /// against the ladder: none fails on its own (the section is measured,
    /// or the run ends with an error). The ladder's points and the transfers
    /// are not among them.
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        let ceiling = TimedRow::section("copy ceiling".into(), &self.ceiling.timed);
        let ops = self.ops.iter().map(|o| {
            let name = format!("{} {}", o.op, o.dtype_in);
            let what = format!("memory {name}");
            TimedRow::section(name, &o.timed).bounded(what, Some(o.pct_of_ceiling))
        });
        std::iter::once(ceiling).chain(ops).collect()
    }
}

/// One copy or operation, its bytes, and the rates they give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BandwidthRow {
    /// "copy", "add", "affine", "transpose", "cast", "sum", or the ceiling's
    /// "ladder copy" / "ladder copy nt" (the ladder's point; older files
    /// "memcpy" / "cuMemcpyDtoD").
    pub op: String,
    /// What ran, e.g. "a.t().contiguous()".
    pub call: String,
    pub dtype_in: String,
    pub dtype_out: String,
    /// Elements of each input.
    pub elements: u64,
    /// Every input element read once and every output element written once:
    /// the least traffic the operation can cause (STREAM's convention).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// bytes_read + bytes_written.
    pub bytes_moved: u64,
    /// Floating-point operations (add 1 and multiply-add 2 per element; sum n - 1).
    pub flops: u64,
    /// flops / bytes_moved (0 for copies and casts).
    pub flop_per_byte: f64,
    /// The median the rates below divide by.
    pub time_ms: f64,
    pub time_source: TimeSource,
    /// bytes_moved / time_ms, in 10^9 bytes per second.
    pub gb_per_s: f64,
    /// elements / time_ms, per second.
    pub elements_per_s: f64,
    /// flops / time_ms, in 10^9 per second (null when flops is 0).
    pub gflop_per_s: Option<f64>,
    /// gb_per_s as a percentage of `bound`'s (2.4; before it, of a copy's,
    /// which an operation that only reads could pass).
    pub pct_of_ceiling: f64,
    /// The ladder's point this row is held against: the kernel of its access
    /// pattern at its footprint, the faster of one thread and the pool's
    /// (2.4; null in older files, and for the ceiling row itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// gb_per_s as a percentage of the datasheet bandwidth, when known.
    pub pct_of_datasheet: Option<f64>,
    #[serde(flatten)]
    pub timed: Timed,
}

/// Host <-> device copies, or why there are none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transfers {
    pub status: SectionStatus,
    pub reason: Option<String>,
    pub rows: Vec<TransferRow>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
}

/// How the host side of a transfer is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// An ordinary `Vec`: the driver stages it through its own pinned buffer.
    Pageable,
    /// Page-locked (`cuMemHostAlloc`): the GPU copies it directly.
    Pinned,
    /// Candle's `Tensor::to_device`: a pageable copy plus the new tensor's allocation.
    CandleToDevice,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransferRow {
    pub direction: Direction,
    pub host_memory: HostMemory,
    pub bytes: u64,
    pub time_ms: f64,
    pub time_source: TimeSource,
    /// bytes / time_ms, in 10^9 bytes per second.
    pub gb_per_s: f64,
    #[serde(flatten)]
    pub timed: Timed,
}

/// A request larger than the memory there is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutOfMemory {
    /// The suite's own check, which refuses before allocating.
    pub refusal: Option<Refusal>,
    /// Why there is no `refusal` (the available memory cannot be read).
    pub refusal_skipped: Option<String>,
    /// On a GPU: the same request made of Candle anyway.
    pub device_attempt: Option<OomAttempt>,
    /// Why there is no `device_attempt`.
    pub device_attempt_skipped: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Refusal {
    pub requested_bytes: u64,
    /// Free device memory on a GPU, available host memory on the CPU.
    pub available_bytes: u64,
    /// The one line the check answered with.
    pub error: String,
    /// Growth of this process's heap across the check (counting allocator):
    /// far below `requested_bytes`, since nothing of that size was allocated.
    pub heap_growth_bytes: Option<u64>,
}

/// Candle asked for a tensor larger than free device memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OomAttempt {
    pub requested_bytes: u64,
    /// `cuMemGetInfo` free memory just before, after the pool gave back what it
    /// held unused (so free memory is all there is).
    pub free_bytes_before: u64,
    /// Candle's error, one line; null if the allocation succeeded after all.
    pub error: Option<String>,
    /// The pool's bytes in use before the request and after the failure.
    pub pool_used_bytes_before: Option<u64>,
    pub pool_used_bytes_after: Option<u64>,
    /// A small matmul after the failure ran and gave the right values.
    pub matmul_after_ok: bool,
    pub matmul_after_error: Option<String>,
}

/// The points of a roofline chart (achieved GFLOP/s against FLOP per byte)
/// under the measured ceilings. The chart itself is drawn by the plotting
/// module from these numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Roofline {
    /// The measured copy ceiling (the `ceiling` row's gb_per_s).
    pub memory_gb_per_s: f64,
    pub memory_datasheet_gb_per_s: Option<f64>,
    /// The fastest matmul point: a measured compute ceiling (a lower bound on
    /// the chip's).
    pub compute_gflop_per_s: Option<f64>,
    /// flop_per_byte where the two measured ceilings meet.
    pub ridge_flop_per_byte: Option<f64>,
    pub points: Vec<RooflinePoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RooflinePoint {
    /// "add f32", "matmul 1024 bf16".
    pub label: String,
    /// "memory_op" or "matmul".
    pub kind: String,
    pub dtype: String,
    pub flop_per_byte: f64,
    pub gflop_per_s: f64,
    /// min(flop_per_byte x memory_gb_per_s, compute_gflop_per_s): what the
    /// measured ceilings allow at this intensity.
    pub attainable_gflop_per_s: f64,
}
