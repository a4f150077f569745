//! The `memory` experiment's measurement core: how close Candle's memory-bound
//! operations come to the device's bandwidth. First the ceiling, a plain copy
//! between two preallocated buffers (`memcpy` on the CPU, `cuMemcpyDtoD` on a
//! GPU); then Candle's contiguous copy, add, multiply-add (`affine`), strided
//! copy (transpose then `.contiguous()`), casts and sum on large tensors, per
//! dtype; host <-> device transfers on a GPU; a request larger than memory; and
//! the points of a roofline.
//!
//! Bytes follow the STREAM benchmark's convention (McCalpin, "Memory Bandwidth
//! and Machine Balance", 1995): every input element is counted as read once and
//! every output element as written once, the least traffic an operation can
//! cause. Extra traffic (a CPU reading a line before writing it, page faults on
//! a fresh output) is not counted and so shows as a lower GB/s. GB/s is bytes
//! moved / time / 10^9; arithmetic intensity is FLOPs / bytes moved (Williams,
//! Waterman and Patterson, "Roofline", CACM 2009).

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};

use crate::bench::matmul::{self, Inputs, Precision};
use crate::clock::Plan;
use crate::export::table::{mib, Table};
use crate::memory::{check_fits_on, check_room};
use crate::schema::{
    BandwidthRow, Direction, HostMemory, MemoryResults, OutOfMemory, Refusal, Roofline,
    RooflinePoint, Row, SectionStatus, Timed, TransferRow, Transfers,
};
use crate::telemetry::Telemetry;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Columns of the tensors the operations run on; one MiB of f32 is 64 rows.
pub const COLS: usize = 4096;

/// What a `memory` run asks for, validated by the program's flags.
#[derive(Clone, Debug)]
pub struct Config {
    /// Size of one f32 tensor, in MiB.
    pub mib: u64,
    pub plan: Plan,
    /// Dtypes the operations run in; casts go from f32 to each other one.
    pub dtypes: Vec<DType>,
    /// Side of the matmuls that give the roofline its compute points.
    pub matmul_size: usize,
    /// Largest host <-> device transfer, in MiB (GPU only).
    pub transfer_max_mib: u64,
}

impl Config {
    /// (rows, COLS): `mib` MiB at f32.
    pub fn shape(&self) -> (usize, usize) {
        (self.mib as usize * 64, COLS)
    }

    pub fn elements(&self) -> u64 {
        self.mib * MIB / 4
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.mib * MIB
    }

    fn matmul(&self) -> matmul::Config {
        matmul::Config {
            size: self.matmul_size,
            plan: self.plan,
            precisions: self.dtypes.iter().filter_map(|&d| precision(d)).collect(),
            accuracy_rows: 4,
        }
    }
}

/// Defaults that keep a 2-core CPU run well under a minute (Candle's CPU
/// kernels for f16 and bf16 convert element by element and run at a fraction
/// of memory speed) and make a GPU run large enough to leave its 50 MB-class
/// L2 far behind: one f32 tensor of 32 MiB on the CPU and 1 GiB on a GPU.
pub fn default_mib(on_cuda: bool) -> u64 {
    if on_cuda {
        1024
    } else {
        32
    }
}

/// Warm-up and timed runs per row: 1 and 5 on the CPU, where a row's call
/// takes up to a second; 3 and 20 on a GPU, where it takes about a millisecond.
pub fn default_plan(on_cuda: bool) -> Plan {
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

/// The roofline's matmul side: 1024 on the CPU (tens of ms), 8192 on a GPU.
pub fn default_matmul_size(on_cuda: bool) -> usize {
    if on_cuda {
        8192
    } else {
        1024
    }
}

fn precision(dtype: DType) -> Option<Precision> {
    match dtype {
        DType::F64 => Some(Precision::F64),
        DType::F32 => Some(Precision::F32),
        DType::F16 => Some(Precision::F16),
        DType::BF16 => Some(Precision::Bf16),
        _ => None,
    }
}

/// A memory-bound operation Candle offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `a.copy()`: a contiguous copy into a new tensor.
    Copy,
    /// `a + b`.
    Add,
    /// `a.affine(2.0, 1.0)`: a x 2 + 1, one multiply-add per element in one kernel.
    Affine,
    /// `a.t().contiguous()`: a strided read, a contiguous write.
    Transpose,
    /// `a.to_dtype(..)`.
    Cast,
    /// `a.sum_all()`: every element read, one written.
    Sum,
}

impl Op {
    /// The operations every dtype runs (casts run from f32 only).
    pub const PER_DTYPE: [Op; 5] = [Op::Copy, Op::Add, Op::Affine, Op::Transpose, Op::Sum];

    pub fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Add => "add",
            Op::Affine => "affine",
            Op::Transpose => "transpose",
            Op::Cast => "cast",
            Op::Sum => "sum",
        }
    }

    pub fn call(self, out: DType) -> String {
        match self {
            Op::Copy => "a.copy()".into(),
            Op::Add => "a + b".into(),
            Op::Affine => "a.affine(2.0, 1.0)".into(),
            Op::Transpose => "a.t().contiguous()".into(),
            Op::Cast => format!("a.to_dtype({})", out.as_str()),
            Op::Sum => "a.sum_all()".into(),
        }
    }

    /// Runs the operation once on Candle tensors.
    fn run(self, a: &Tensor, b: &Tensor, out: DType) -> candle_core::Result<Tensor> {
        match self {
            Op::Copy => a.copy(),
            Op::Add => a + b,
            Op::Affine => a.affine(2.0, 1.0),
            Op::Transpose => a.t()?.contiguous(),
            Op::Cast => a.to_dtype(out),
            Op::Sum => a.sum_all(),
        }
    }
}

/// Bytes and FLOPs of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flops: u64,
}

impl Traffic {
    pub fn bytes_moved(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }

    /// Arithmetic intensity: FLOPs per byte moved.
    pub fn flop_per_byte(&self) -> f64 {
        self.flops as f64 / self.bytes_moved() as f64
    }
}

/// What `op` moves over `n` elements, `in_bytes` and `out_bytes` per element:
/// inputs read once, outputs written once (STREAM's counting, see the module).
/// Add reads two inputs; sum writes one element and makes n - 1 additions;
/// affine makes a multiply and an add per element.
pub fn traffic(op: Op, n: u64, in_bytes: u64, out_bytes: u64) -> Traffic {
    let (inputs, outputs, flops) = match op {
        Op::Copy | Op::Transpose | Op::Cast => (1, n, 0),
        Op::Add => (2, n, n),
        Op::Affine => (1, n, 2 * n),
        Op::Sum => (1, 1, n.saturating_sub(1)),
    };
    Traffic {
        bytes_read: inputs * n * in_bytes,
        bytes_written: outputs * out_bytes,
        flops,
    }
}

/// A copy of `bytes`: read once, written once.
pub fn copy_traffic(bytes: u64) -> Traffic {
    Traffic {
        bytes_read: bytes,
        bytes_written: bytes,
        flops: 0,
    }
}

/// GB/s (10^9 bytes per second) of `bytes` moved in `ms` milliseconds.
pub fn gb_per_s(bytes: u64, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// `count` per second, done in `ms` milliseconds.
pub fn per_s(count: u64, ms: f64) -> f64 {
    count as f64 / (ms * 1e-3)
}

/// One row from its bytes and its samples. Rates divide by the row's
/// [`Timed::rate_ms`]; percentages compare them with the measured `ceiling`
/// and the datasheet (both GB/s).
#[allow(clippy::too_many_arguments)]
pub fn bandwidth_row(
    op: &str,
    call: String,
    dtype_in: DType,
    dtype_out: DType,
    elements: u64,
    t: Traffic,
    timed: Timed,
    ceiling_gb_per_s: Option<f64>,
    datasheet_gb_per_s: Option<f64>,
) -> BandwidthRow {
    let (time_ms, time_source) = timed.rate_ms();
    let rate = gb_per_s(t.bytes_moved(), time_ms);
    BandwidthRow {
        op: op.into(),
        call,
        dtype_in: dtype_in.as_str().into(),
        dtype_out: dtype_out.as_str().into(),
        elements,
        bytes_read: t.bytes_read,
        bytes_written: t.bytes_written,
        bytes_moved: t.bytes_moved(),
        flops: t.flops,
        flop_per_byte: t.flop_per_byte(),
        time_ms,
        time_source,
        gb_per_s: rate,
        elements_per_s: per_s(elements, time_ms),
        gflop_per_s: (t.flops > 0).then(|| per_s(t.flops, time_ms) / 1e9),
        // No ceiling given: this row is the ceiling, 100% by definition (and
        // exactly: 100 x rate / rate can round to 100.00000000000001).
        pct_of_ceiling: ceiling_gb_per_s.map_or(100.0, |c| 100.0 * rate / c),
        pct_of_datasheet: datasheet_gb_per_s.map(|d| 100.0 * rate / d),
        timed,
    }
}

/// One transfer row: `bytes` over the row's [`Timed::rate_ms`].
pub fn transfer_row(
    direction: Direction,
    host_memory: HostMemory,
    bytes: u64,
    timed: Timed,
) -> TransferRow {
    let (time_ms, time_source) = timed.rate_ms();
    TransferRow {
        direction,
        host_memory,
        bytes,
        time_ms,
        time_source,
        gb_per_s: gb_per_s(bytes, time_ms),
        timed,
    }
}

/// Transfer sizes: 1 MiB and each fourth power up to `max_bytes` (1, 4, 16,
/// 64, 256, 1024 MiB for 1 GiB); at least 1 MiB.
pub fn transfer_sizes(max_bytes: u64) -> Vec<u64> {
    let mut sizes = vec![MIB];
    while let Some(next) = sizes.last().map(|s| s * 4).filter(|&s| s <= max_bytes) {
        sizes.push(next);
    }
    sizes
}

/// The roofline: what the measured ceilings allow at `flop_per_byte`,
/// min(flop_per_byte x bandwidth, compute). GB/s x FLOP/byte = GFLOP/s.
pub fn attainable_gflop_per_s(
    flop_per_byte: f64,
    memory_gb_per_s: f64,
    compute: Option<f64>,
) -> f64 {
    let memory_bound = flop_per_byte * memory_gb_per_s;
    compute.map_or(memory_bound, |c| memory_bound.min(c))
}

/// The roofline's points: the operations that compute (copies and casts have
/// no FLOPs to plot), and the matmuls that ran, whose bytes are their
/// payload (A, B and C once each: the least a matmul can move).
pub fn roofline(
    ceiling: &BandwidthRow,
    datasheet: Option<f64>,
    ops: &[BandwidthRow],
    matmul_size: usize,
    matmuls: &[Row],
) -> Roofline {
    let memory = ceiling.gb_per_s;
    let mut points: Vec<RooflinePoint> = ops
        .iter()
        .filter_map(|r| {
            Some(RooflinePoint {
                label: format!("{} {}", r.op, r.dtype_in),
                kind: "memory_op".into(),
                dtype: r.dtype_in.clone(),
                flop_per_byte: r.flop_per_byte,
                gflop_per_s: r.gflop_per_s?,
                attainable_gflop_per_s: 0.0,
            })
        })
        .collect();
    for row in matmuls {
        let Some(m) = &row.measured else { continue };
        points.push(RooflinePoint {
            label: format!("matmul {matmul_size} {}", row.precision),
            kind: "matmul".into(),
            dtype: row.dtype.clone(),
            flop_per_byte: matmul::matmul_flops(matmul_size) / m.payload_bytes as f64,
            gflop_per_s: m.gpu_gflops.unwrap_or(m.gflops),
            attainable_gflop_per_s: 0.0,
        });
    }
    let compute = points
        .iter()
        .filter(|p| p.kind == "matmul")
        .map(|p| p.gflop_per_s)
        .reduce(f64::max);
    for p in &mut points {
        p.attainable_gflop_per_s = attainable_gflop_per_s(p.flop_per_byte, memory, compute);
    }
    Roofline {
        memory_gb_per_s: memory,
        memory_datasheet_gb_per_s: datasheet,
        compute_gflop_per_s: compute,
        ridge_flop_per_byte: compute.map(|c| c / memory),
        points,
    }
}

/// Refuses, before anything is allocated, a run whose tensors, transfers or
/// matmuls do not fit. The operations hold two f32 inputs, two inputs in the
/// widest dtype and one output; transfers hold a pageable, a pinned and a
/// returned host copy of the largest size and two device copies; the matmuls
/// are [`matmul::check_fits`]'s.
pub fn check_fits(device: &Device, cfg: &Config) -> Result<()> {
    let t = cfg.tensor_bytes();
    let widest = cfg
        .dtypes
        .iter()
        .map(|d| d.size_in_bytes() as u64)
        .max()
        .unwrap_or(4)
        .max(4);
    let mib_flag = format!("--mib {}", cfg.mib);
    check_fits_on(device, &mib_flag, 0, 2 * t + 3 * t * widest / 4)?;
    if device.is_cuda() {
        let x = cfg.transfer_max_mib * MIB;
        let flag = format!("--transfer-max-mib {}", cfg.transfer_max_mib);
        check_fits_on(device, &flag, 3 * x, 2 * x)?;
    }
    let m = cfg.matmul();
    let on_device = m
        .precisions
        .iter()
        .map(|&p| matmul::device_bytes(device, p, m.size))
        .max()
        .unwrap_or(0);
    let flag = format!("--matmul-size {}", m.size);
    check_fits_on(device, &flag, Inputs::host_bytes(m.size), on_device)
}

/// Runs the whole experiment. `gpu_name` (the driver's name, `None` on the
/// CPU) looks up the datasheet bandwidth and peaks.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    telemetry: &Telemetry,
) -> Result<MemoryResults> {
    let datasheet = gpu_name.and_then(crate::peaks::datasheet_memory_gb_per_s);
    let transfers = transfers(device, cfg, telemetry)?;

    let bytes = cfg.tensor_bytes();
    let (ceiling_op, ceiling_call, timed) = ceiling(device, bytes, cfg.plan, telemetry)?;
    let ceiling = bandwidth_row(
        ceiling_op,
        ceiling_call.into(),
        DType::U8,
        DType::U8,
        bytes,
        copy_traffic(bytes),
        timed,
        None,
        datasheet,
    );

    let n = cfg.elements();
    let a32 = Tensor::randn(0f32, 1f32, cfg.shape(), device)?;
    let b32 = Tensor::randn(0f32, 1f32, cfg.shape(), device)?;
    let mut ops = Vec::new();
    let mut measure = |op: Op, a: &Tensor, b: &Tensor, dout: DType| -> Result<()> {
        let din = a.dtype();
        let label = format!("{} {}", op.name(), dout.as_str());
        let timed = telemetry
            .time(device, cfg.plan, &label, || Ok(op.run(a, b, dout)?))
            .with_context(|| format!("{} on {}", op.call(dout), din.as_str()))?;
        let elem = |d: DType| d.size_in_bytes() as u64;
        ops.push(bandwidth_row(
            op.name(),
            op.call(dout),
            din,
            dout,
            n,
            traffic(op, n, elem(din), elem(dout)),
            timed,
            Some(ceiling.gb_per_s),
            datasheet,
        ));
        Ok(())
    };
    for &d in &cfg.dtypes {
        // Converted once per dtype, off the clock.
        let (a, b) = (a32.to_dtype(d)?, b32.to_dtype(d)?);
        for op in Op::PER_DTYPE {
            measure(op, &a, &b, d)?;
        }
    }
    for &d in cfg.dtypes.iter().filter(|&&d| d != DType::F32) {
        measure(Op::Cast, &a32, &b32, d)?;
    }
    drop((a32, b32));

    let mcfg = cfg.matmul();
    let matmuls = if mcfg.precisions.is_empty() {
        Vec::new()
    } else {
        let inputs = Inputs::random(mcfg.size, mcfg.accuracy_rows)?;
        matmul::run(device, gpu_name, &mcfg, &inputs)?
    };
    let roofline = roofline(&ceiling, datasheet, &ops, mcfg.size, &matmuls);
    let out_of_memory = out_of_memory(device)?;

    let (rows, cols) = cfg.shape();
    Ok(MemoryResults {
        shape: vec![rows, cols],
        elements: n,
        tensor_bytes_f32: bytes,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        cache_bytes: crate::device::largest_cache(device)?.map(|c| c.bytes),
        telemetry: telemetry.source(),
        transfers,
        ceiling,
        datasheet_gb_per_s: datasheet,
        ops,
        out_of_memory,
        roofline,
    })
}

/// Why a GPU-only section did not run on `device`.
fn no_gpu_reason(device: &Device) -> Option<String> {
    if device.is_cuda() {
        None
    } else if cfg!(feature = "cuda") {
        Some("the selected device is the CPU".into())
    } else {
        Some("this build has no CUDA support".into())
    }
}

fn transfers(device: &Device, cfg: &Config, telemetry: &Telemetry) -> Result<Transfers> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let rows = transfer_rows(dev, device, cfg.transfer_max_mib * MIB, cfg.plan, telemetry)?;
        return Ok(Transfers {
            status: SectionStatus::Ok,
            reason: None,
            rows,
        });
    }
    let _ = (cfg, telemetry);
    Ok(Transfers {
        status: SectionStatus::Skipped,
        reason: no_gpu_reason(device).map(|r| format!("host <-> device transfers need a GPU: {r}")),
        rows: Vec::new(),
    })
}

/// The ceiling's name, what it calls, and its samples.
/// Host <-> device copies at each of `transfer_sizes(max_bytes)`: pageable
/// (`Vec`) and pinned host memory with `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync`
/// into preallocated buffers, and Candle's `Tensor::to_device` both ways, which
/// also allocates the new tensor.
#[cfg(feature = "cuda")]
fn transfer_rows(
    dev: &candle_core::cuda_backend::CudaDevice,
    device: &Device,
    max_bytes: u64,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Vec<TransferRow>> {
    use crate::cuda::{DeviceBuffer, PinnedBuffer};
    use crate::schema::{
        Direction::DeviceToHost as D2H, Direction::HostToDevice as H2D, HostMemory,
    };
    let mut rows = Vec::new();
    for bytes in transfer_sizes(max_bytes) {
        let n = bytes as usize;
        let label = format!("{} MiB", bytes >> 20);
        let mut on_device = DeviceBuffer::zeroed(dev, n)?;
        let pageable = vec![1u8; n];
        let mut pageable_back = vec![0u8; n];
        let mut pinned = PinnedBuffer::filled(dev, n, 1)?;
        let host_tensor = Tensor::from_vec(vec![1f32; n / 4], n / 4, &Device::Cpu)?;
        let device_tensor = host_tensor.to_device(device)?;
        // A sample's output (the new tensor of `to_device`) is returned, so the
        // clock frees it after it stops.
        type Work<'a> = &'a mut dyn FnMut() -> Result<Option<Tensor>>;
        let mut row = |direction, memory, what: &str, work: Work| {
            let t = telemetry.time(device, plan, &format!("{what} {label}"), work)?;
            rows.push(transfer_row(direction, memory, bytes, t));
            anyhow::Ok(())
        };
        use HostMemory::{CandleToDevice, Pageable, Pinned};
        row(H2D, Pageable, "H2D pageable", &mut || {
            on_device.upload(&pageable).map(|()| None)
        })?;
        row(H2D, Pinned, "H2D pinned", &mut || {
            on_device.upload_pinned(&pinned).map(|()| None)
        })?;
        row(H2D, CandleToDevice, "H2D to_device", &mut || {
            Ok(Some(host_tensor.to_device(device)?))
        })?;
        row(D2H, Pageable, "D2H pageable", &mut || {
            on_device.download(&mut pageable_back).map(|()| None)
        })?;
        row(D2H, Pinned, "D2H pinned", &mut || {
            on_device.download_pinned(&mut pinned).map(|()| None)
        })?;
        row(D2H, CandleToDevice, "D2H to_device", &mut || {
            Ok(Some(device_tensor.to_device(&Device::Cpu)?))
        })?;
    }
    Ok(rows)
}

fn ceiling(
    device: &Device,
    bytes: u64,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<(&'static str, &'static str, Timed)> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        // Two preallocated device buffers: reads `bytes`, writes `bytes`.
        let src = crate::cuda::DeviceBuffer::zeroed(dev, bytes as usize)?;
        let mut dst = crate::cuda::DeviceBuffer::zeroed(dev, bytes as usize)?;
        let timed = telemetry.time(device, plan, "cuMemcpyDtoD", || dst.copy_from(&src))?;
        return Ok(("cuMemcpyDtoD", "cuMemcpyDtoDAsync(dst, src)", timed));
    }
    // Both buffers written once first, so no page is mapped on the clock.
    let src = vec![1u8; bytes as usize];
    let mut dst = vec![2u8; bytes as usize];
    let timed = telemetry.time(device, plan, "memcpy", || {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        Ok(())
    })?;
    Ok(("memcpy", "dst.copy_from_slice(&src)", timed))
}

/// The suite's refusal of a request larger than the memory there is, and on a
/// GPU the same request made of Candle anyway.
fn out_of_memory(device: &Device) -> Result<OutOfMemory> {
    let available = match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(dev) => {
            crate::cuda::trim_pool(dev)?;
            Some(crate::cuda::memory_info(dev)?.0)
        }
        _ => crate::env::host_memory().map(|m| m.available_bytes),
    };
    let place = if device.is_cuda() {
        "GPU memory"
    } else {
        "host memory"
    };
    let refusal = available.map(|available| {
        let requested = available + GIB;
        let before = crate::memory::host_counting().then(crate::memory::host_current_bytes);
        let error = match check_room(&oom_what(requested), requested, available, place) {
            Ok(()) => "not refused".to_string(),
            Err(e) => crate::error::error_line(&e),
        };
        let after = crate::memory::host_current_bytes();
        Refusal {
            requested_bytes: requested,
            available_bytes: available,
            error,
            heap_growth_bytes: before.map(|b| after.saturating_sub(b)),
        }
    });
    let refusal_skipped = refusal
        .is_none()
        .then(|| format!("the available {place} cannot be read on this system"));
    let (device_attempt, device_attempt_skipped) = match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(dev) => (Some(oom_attempt(device, dev)?), None),
        _ => (
            None,
            no_gpu_reason(device)
                .map(|r| format!("the out-of-memory demonstration needs a GPU: {r}")),
        ),
    };
    Ok(OutOfMemory {
        refusal,
        refusal_skipped,
        device_attempt,
        device_attempt_skipped,
    })
}

fn oom_what(bytes: u64) -> String {
    format!("an f32 tensor of {:.1} GiB", bytes as f64 / GIB as f64)
}

/// Asks Candle for an f32 tensor 1 GiB larger than free device memory, then
/// checks that the device still computes.
#[cfg(feature = "cuda")]
fn oom_attempt(
    device: &Device,
    dev: &candle_core::cuda_backend::CudaDevice,
) -> Result<crate::schema::OomAttempt> {
    let meter = crate::memory::MemoryMeter::for_device(device)?;
    crate::cuda::trim_pool(dev)?;
    let (free, _) = crate::cuda::memory_info(dev)?;
    let requested = free + GIB;
    let used_before = meter.used_bytes()?;
    let error = match Tensor::zeros((requested / 4) as usize, DType::F32, device) {
        Ok(t) => {
            drop(t);
            None
        }
        Err(e) => Some(format!(
            "{}: {}",
            oom_what(requested),
            crate::error::error_line(&e)
        )),
    };
    let used_after = meter.used_bytes()?;
    let check = small_matmul_works(device);
    Ok(crate::schema::OomAttempt {
        requested_bytes: requested,
        free_bytes_before: free,
        error,
        pool_used_bytes_before: used_before,
        pool_used_bytes_after: used_after,
        matmul_after_ok: check.is_ok(),
        matmul_after_error: check.err().map(|e| crate::error::error_line(&e)),
    })
}

/// A 64 x 64 matmul of ones, whose every element must be 64.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn small_matmul_works(device: &Device) -> Result<()> {
    let ones = Tensor::ones((64, 64), DType::F32, device)?;
    let c: Vec<f32> = ones.matmul(&ones)?.flatten_all()?.to_vec1()?;
    anyhow::ensure!(
        c.iter().all(|&x| x == 64.0),
        "a 64x64 matmul of ones gave wrong values"
    );
    Ok(())
}

/// Lines printed under the tables: what the numbers cannot show by themselves.
pub fn notes(r: &MemoryResults) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(reason) = &r.transfers.reason {
        notes.push(format!("transfers skipped: {reason}"));
    }
    // An add's three tensors are its working set.
    if let Some(cache) = r.cache_bytes.filter(|&c| c >= 3 * r.tensor_bytes_f32) {
        notes.push(format!(
            "note: three {:.0} MiB tensors fit in the {:.0} MiB cache: these rates are partly the \
             cache's; --mib {} or more measures memory",
            mib(r.tensor_bytes_f32),
            mib(cache),
            (cache / MIB).next_power_of_two()
        ));
    }
    notes
}

/// The terminal tables of a run.
pub fn tables(r: &MemoryResults, device: &str) -> Vec<Table> {
    let mut tables = Vec::new();
    if !r.transfers.rows.is_empty() {
        let mut t = Table::new(
            "host <-> device transfers",
            &["direction", "host memory", "MiB", "ms", "GB/s"],
        );
        for row in &r.transfers.rows {
            t.row([
                format!("{:?}", row.direction),
                format!("{:?}", row.host_memory),
                format!("{:.0}", mib(row.bytes)),
                format!("{:.3}", row.time_ms),
                format!("{:.1}", row.gb_per_s),
            ]);
        }
        tables.push(t);
    }

    let mut t = Table::new(
        format!(
            "memory-bound operations on {device}, {} elements ({:.0} MiB at f32), time from {}",
            r.elements,
            mib(r.tensor_bytes_f32),
            match r.ceiling.time_source {
                crate::schema::TimeSource::GpuMedianMs => "CUDA events",
                crate::schema::TimeSource::MedianMs => "the wall clock",
            }
        ),
        &[
            "op",
            "call",
            "dtype",
            "read MiB",
            "written MiB",
            "ms",
            "GB/s",
            "G elem/s",
            "% ceiling",
            "% datasheet",
        ],
    );
    for row in std::iter::once(&r.ceiling).chain(&r.ops) {
        let dtype = if row.dtype_in == row.dtype_out {
            row.dtype_in.clone()
        } else {
            format!("{}->{}", row.dtype_in, row.dtype_out)
        };
        t.row([
            row.op.clone(),
            row.call.clone(),
            dtype,
            format!("{:.1}", mib(row.bytes_read)),
            format!("{:.1}", mib(row.bytes_written)),
            format!("{:.3}", row.time_ms),
            format!("{:.1}", row.gb_per_s),
            if row.dtype_in == "u8" {
                "-".into()
            } else {
                format!("{:.2}", row.elements_per_s / 1e9)
            },
            format!("{:.0}%", row.pct_of_ceiling),
            row.pct_of_datasheet
                .map_or("-".into(), |p| format!("{p:.0}%")),
        ]);
    }
    tables.push(t);

    let mut t = Table::new("out of memory", &["", ""]);
    let oom = &r.out_of_memory;
    match (&oom.refusal, &oom.refusal_skipped) {
        (Some(refusal), _) => {
            t.row(["suite's check, before allocating", refusal.error.as_str()]);
            if let Some(g) = refusal.heap_growth_bytes {
                t.row(["heap growth across the check".to_string(), format!("{g} B")]);
            }
        }
        (None, reason) => {
            t.row(["suite's check", reason.as_deref().unwrap_or("")]);
        }
    }
    match (&oom.device_attempt, &oom.device_attempt_skipped) {
        (Some(a), _) => {
            t.row([
                "Candle's answer",
                a.error.as_deref().unwrap_or("no error: it fit"),
            ]);
            let pool = |b: Option<u64>| b.map_or("-".into(), |b| format!("{:.1} MiB", mib(b)));
            t.row([
                "pool in use before / after".to_string(),
                format!(
                    "{} / {}",
                    pool(a.pool_used_bytes_before),
                    pool(a.pool_used_bytes_after)
                ),
            ]);
            t.row([
                "a matmul afterwards",
                if a.matmul_after_ok {
                    "ran, values right"
                } else {
                    "failed"
                },
            ]);
        }
        (None, reason) => {
            t.row(["GPU demonstration", reason.as_deref().unwrap_or("")]);
        }
    }
    tables.push(t);

    let rl = &r.roofline;
    let mut t = Table::new(
        format!(
            "roofline points (ceilings: {:.1} GB/s measured{}{})",
            rl.memory_gb_per_s,
            rl.compute_gflop_per_s
                .map_or(String::new(), |c| format!(", {c:.1} GFLOP/s best matmul")),
            rl.ridge_flop_per_byte
                .map_or(String::new(), |x| format!(", ridge at {x:.1} FLOP/byte")),
        ),
        &["point", "FLOP/byte", "GFLOP/s", "attainable GFLOP/s"],
    );
    for p in &rl.points {
        t.row([
            p.label.clone(),
            format!("{:.3}", p.flop_per_byte),
            format!("{:.2}", p.gflop_per_s),
            format!("{:.2}", p.attainable_gflop_per_s),
        ]);
    }
    tables.push(t);
    tables
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::timed_at as timed;

    #[test]
    fn bytes_are_counted_per_operation() {
        let n = 1000;
        let add = traffic(Op::Add, n, 4, 4);
        assert_eq!(
            (add.bytes_read, add.bytes_written, add.flops),
            (8000, 4000, 1000)
        );
        assert_eq!(add.bytes_moved(), 12000);
        let copy = traffic(Op::Copy, n, 2, 2);
        assert_eq!(
            (copy.bytes_read, copy.bytes_written, copy.flops),
            (2000, 2000, 0)
        );
        assert_eq!(traffic(Op::Transpose, n, 4, 4), traffic(Op::Copy, n, 4, 4));
        let affine = traffic(Op::Affine, n, 4, 4);
        assert_eq!((affine.bytes_moved(), affine.flops), (8000, 2000));
        assert_eq!(affine.flop_per_byte(), 0.25);
        let cast = traffic(Op::Cast, n, 4, 2);
        assert_eq!((cast.bytes_read, cast.bytes_written), (4000, 2000));
        let sum = traffic(Op::Sum, n, 4, 4);
        assert_eq!(
            (sum.bytes_read, sum.bytes_written, sum.flops),
            (4000, 4, 999)
        );
        assert_eq!(copy_traffic(64).bytes_moved(), 128);
        // Half the element size, half the bytes.
        assert_eq!(
            traffic(Op::Add, n, 2, 2).bytes_moved() * 2,
            traffic(Op::Add, n, 4, 4).bytes_moved()
        );
    }

    #[test]
    fn rates_follow_their_formulas() {
        assert_eq!(gb_per_s(1_000_000_000, 1000.0), 1.0);
        assert_eq!(gb_per_s(3_000_000, 1.0), 3.0);
        assert_eq!(per_s(500, 250.0), 2000.0);
    }

    #[test]
    fn rows_divide_their_bytes_by_their_own_time() {
        let t = traffic(Op::Add, 1 << 20, 4, 4);
        let cpu = bandwidth_row(
            "add",
            "a + b".into(),
            DType::F32,
            DType::F32,
            1 << 20,
            t,
            timed(&[2.0, 4.0, 3.0], &[]),
            Some(10.0),
            None,
        );
        assert_eq!(cpu.time_ms, 3.0);
        assert_eq!(cpu.time_source, crate::schema::TimeSource::MedianMs);
        assert_eq!(cpu.bytes_moved, 12 << 20);
        assert_eq!(cpu.gb_per_s, (12 << 20) as f64 / 3e-3 / 1e9);
        assert_eq!(cpu.elements_per_s, (1 << 20) as f64 / 3e-3);
        assert_eq!(cpu.gflop_per_s, Some((1 << 20) as f64 / 3e-3 / 1e9));
        assert_eq!(cpu.pct_of_ceiling, 100.0 * cpu.gb_per_s / 10.0);
        assert_eq!(cpu.pct_of_datasheet, None);

        // On a GPU the event time is the one rates use.
        let gpu = bandwidth_row(
            "copy",
            "a.copy()".into(),
            DType::F16,
            DType::F16,
            1000,
            traffic(Op::Copy, 1000, 2, 2),
            timed(&[5.0], &[1.0]),
            Some(4.0),
            Some(8.0),
        );
        assert_eq!(gpu.time_ms, 1.0);
        assert_eq!(gpu.time_source, crate::schema::TimeSource::GpuMedianMs);
        assert_eq!(gpu.gb_per_s, 4000.0 / 1e-3 / 1e9);
        assert_eq!(gpu.gflop_per_s, None);
        assert_eq!(gpu.pct_of_datasheet, Some(100.0 * gpu.gb_per_s / 8.0));

        let tr = transfer_row(
            Direction::HostToDevice,
            HostMemory::Pinned,
            1 << 30,
            timed(&[100.0], &[]),
        );
        assert_eq!(tr.gb_per_s, (1u64 << 30) as f64 / 0.1 / 1e9);
    }

    #[test]
    fn transfer_sizes_step_by_four_up_to_the_max() {
        let mib_sizes = |max| {
            transfer_sizes(max)
                .iter()
                .map(|b| b / MIB)
                .collect::<Vec<_>>()
        };
        assert_eq!(mib_sizes(GIB), [1, 4, 16, 64, 256, 1024]);
        assert_eq!(mib_sizes(100 * MIB), [1, 4, 16, 64]);
        assert_eq!(mib_sizes(MIB), [1]);
    }

    #[test]
    fn the_roofline_is_the_lower_of_its_two_ceilings() {
        assert_eq!(attainable_gflop_per_s(0.25, 100.0, Some(1000.0)), 25.0);
        assert_eq!(attainable_gflop_per_s(100.0, 100.0, Some(1000.0)), 1000.0);
        assert_eq!(attainable_gflop_per_s(2.0, 100.0, None), 200.0);
    }

    fn small(dtypes: Vec<DType>) -> Config {
        Config {
            mib: 1,
            plan: Plan {
                warmup: 1,
                iters: 2,
            },
            dtypes,
            matmul_size: 32,
            transfer_max_mib: 1,
        }
    }

    #[test]
    fn sizes_beyond_memory_are_refused_before_allocating() {
        let cfg = Config {
            mib: 1 << 30,
            ..small(vec![DType::F32])
        };
        let err = check_fits(&Device::Cpu, &cfg).unwrap_err().to_string();
        assert!(
            err.starts_with("--mib 1073741824: needs") && err.contains("available"),
            "{err}"
        );
        let cfg = Config {
            matmul_size: 300_000,
            ..small(vec![DType::F32])
        };
        let err = check_fits(&Device::Cpu, &cfg).unwrap_err().to_string();
        assert!(err.starts_with("--matmul-size 300000: needs"), "{err}");
    }

    fn memory_run(device: &Device) {
        let cfg = small(vec![DType::F32, DType::F16]);
        check_fits(device, &cfg).unwrap();
        let r = run(device, None, &cfg, &Telemetry::open(device)).unwrap();
        assert_eq!(r.elements, 1 << 18);
        assert_eq!(r.shape, [64, COLS]);
        // Five operations per dtype, then the cast f32 -> f16.
        let names: Vec<String> = r
            .ops
            .iter()
            .map(|o| format!("{} {}", o.op, o.dtype_out))
            .collect();
        assert_eq!(
            names,
            [
                "copy f32",
                "add f32",
                "affine f32",
                "transpose f32",
                "sum f32",
                "copy f16",
                "add f16",
                "affine f16",
                "transpose f16",
                "sum f16",
                "cast f16"
            ]
        );
        for row in std::iter::once(&r.ceiling).chain(&r.ops) {
            assert_eq!(row.bytes_moved, row.bytes_read + row.bytes_written);
            let expect = row.bytes_moved as f64 / (row.time_ms * 1e-3) / 1e9;
            assert!(
                (row.gb_per_s - expect).abs() <= 1e-12 * expect,
                "{}",
                row.op
            );
            assert_eq!(row.timed.samples_wall_ms.len(), 2);
            assert_eq!(row.timed.gpu_ms.is_some(), device.is_cuda());
        }
        assert_eq!(r.ceiling.bytes_moved, 2 << 20);
        assert_eq!(r.ceiling.pct_of_ceiling, 100.0);
        let add = |d: &str| {
            r.ops
                .iter()
                .find(|o| o.op == "add" && o.dtype_in == d)
                .unwrap()
        };
        assert_eq!(add("f32").bytes_moved, 3 << 20);
        assert_eq!(add("f16").bytes_moved, 3 << 19);
        // Points for add, affine and sum per dtype, and one matmul per dtype.
        assert_eq!(r.roofline.points.len(), 3 * 2 + 2);
        assert_eq!(r.roofline.memory_gb_per_s, r.ceiling.gb_per_s);
        let mm = r
            .roofline
            .points
            .iter()
            .find(|p| p.kind == "matmul")
            .unwrap();
        // 2 x 32^3 FLOPs over 3 x 32^2 x 4 bytes.
        assert_eq!(mm.flop_per_byte, 2.0 * 32.0 / 12.0);
        if device.is_cpu() {
            assert_eq!(r.transfers.status, SectionStatus::Skipped);
            assert!(r.out_of_memory.device_attempt.is_none());
        } else {
            let a = r.out_of_memory.device_attempt.as_ref().unwrap();
            assert!(
                a.error.as_deref().unwrap().contains("OUT_OF_MEMORY"),
                "{a:?}"
            );
            assert!(a.matmul_after_ok);
        }
        if let Some(refusal) = &r.out_of_memory.refusal {
            assert!(refusal.requested_bytes > refusal.available_bytes);
            assert!(refusal.error.contains("available"), "{}", refusal.error);
        }
    }

    #[test]
    fn memory_run_cpu() {
        memory_run(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn memory_run_cuda() {
        memory_run(&Device::new_cuda(0).unwrap());
    }
}
