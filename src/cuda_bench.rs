//! CUDA-only pieces of the `memory` and `overhead` experiments, compiled with
//! the `cuda` feature: raw copies that Candle's tensor API does not expose
//! (pageable and pinned host <-> device, device-to-device `cuMemcpy`), the L2
//! cache's size and a buffer that flushes it, handing the memory pool's unused
//! memory back, and the GPU's UUID for NVML. Every copy runs on Candle's own
//! stream, so the clock's CUDA events (recorded on that stream) time it.

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaSlice, CudaStream};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{Device, Tensor};

use crate::bench::memory::{transfer_row, transfer_sizes};
use crate::clock::Plan;
use crate::schema::{Direction, HostMemory, Timed, TransferRow};
use crate::telemetry::Telemetry;

/// NVML's name for this GPU ("GPU-" and its UUID).
pub(crate) fn uuid(dev: &CudaDevice) -> Result<String> {
    let raw = dev
        .cuda_stream()
        .context()
        .uuid()
        .context("reading the GPU's UUID (cuDeviceGetUuid)")?;
    Ok(crate::telemetry::nvml_uuid(&raw.bytes.map(|b| b as u8)))
}

/// Bytes of the GPU's L2 cache.
pub(crate) fn l2_cache_bytes(dev: &CudaDevice) -> Result<u64> {
    let bytes = dev
        .cuda_stream()
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .context("reading the L2 cache size")?;
    Ok(bytes as u64)
}

/// Hands the memory the pool holds but does not use back to the driver
/// (`cuMemPoolTrimTo(pool, 0)`), so that `cuMemGetInfo`'s free memory is all
/// a new allocation could get.
pub(crate) fn trim_pool(dev: &CudaDevice) -> Result<()> {
    let stream = dev.cuda_stream();
    stream
        .synchronize()
        .context("synchronizing the CUDA stream")?;
    let ctx = stream.context();
    if !ctx.has_async_alloc() {
        return Ok(());
    }
    ctx.bind_to_thread().context("binding the CUDA context")?;
    // SAFETY: the device handle comes from a live context, and the pool is the
    // device's own, which lives as long as the context.
    unsafe {
        let pool = result::device::get_mem_pool(ctx.cu_device())
            .context("reading the device's memory pool (cuDeviceGetMemPool)")?;
        result::mem_pool::trim_to(pool, 0).context("trimming the memory pool (cuMemPoolTrimTo)")
    }
}

/// `bytes` of zeroed device memory on Candle's stream.
fn device_buffer(stream: &Arc<CudaStream>, bytes: usize) -> Result<CudaSlice<u8>> {
    stream.alloc_zeros::<u8>(bytes).with_context(|| {
        format!(
            "allocating {} on the GPU",
            crate::export::table::bytes(bytes as u64)
        )
    })
}

/// The measured ceiling: `cuMemcpyDtoDAsync` of `bytes` between two
/// preallocated device buffers (reads `bytes`, writes `bytes`).
pub(crate) fn dtod_ceiling(
    dev: &CudaDevice,
    device: &Device,
    bytes: usize,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Timed> {
    let stream = dev.cuda_stream();
    let src = device_buffer(&stream, bytes)?;
    let mut dst = device_buffer(&stream, bytes)?;
    telemetry.time(device, plan, "cuMemcpyDtoD", || {
        stream
            .memcpy_dtod(&src, &mut dst)
            .context("cuMemcpyDtoDAsync")
    })
}

/// Host <-> device copies at each of `transfer_sizes(max_bytes)`: pageable
/// (`Vec`) and pinned host memory with `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync`
/// into preallocated buffers, and Candle's `Tensor::to_device` both ways, which
/// also allocates the new tensor.
pub(crate) fn transfers(
    dev: &CudaDevice,
    device: &Device,
    max_bytes: u64,
    plan: Plan,
    telemetry: &Telemetry,
) -> Result<Vec<TransferRow>> {
    let stream = dev.cuda_stream();
    let mut rows = Vec::new();
    for bytes in transfer_sizes(max_bytes) {
        let n = bytes as usize;
        let label = format!("{} MiB", bytes >> 20);
        let mut on_device = device_buffer(&stream, n)?;
        let pageable = vec![1u8; n];
        let mut pageable_back = vec![0u8; n];
        // Plain page-locked memory (flags 0), as PyTorch's `pin_memory()`
        // allocates it; cudarc's default adds write-combining, which is slow for
        // the host to read. Filled once so every page is mapped before timing.
        // SAFETY: the memory is written before it is read.
        let mut pinned = unsafe { stream.context().alloc_pinned_with_flags::<u8>(n, 0) }
            .with_context(|| format!("allocating {label} of pinned host memory"))?;
        pinned
            .as_mut_slice()
            .context("mapping pinned memory")?
            .fill(1);
        let host_tensor = Tensor::from_vec(vec![1f32; n / 4], n / 4, &Device::Cpu)?;
        let device_tensor = host_tensor.to_device(device)?;

        let name = |what: &str| format!("{what} {label}");
        use Direction::{DeviceToHost as D2H, HostToDevice as H2D};
        use HostMemory::{CandleToDevice, Pageable, Pinned};
        let t = telemetry.time(device, plan, &name("H2D pageable"), || {
            Ok(stream.memcpy_htod(&pageable, &mut on_device)?)
        })?;
        rows.push(transfer_row(H2D, Pageable, bytes, t));
        let t = telemetry.time(device, plan, &name("H2D pinned"), || {
            Ok(stream.memcpy_htod(&pinned, &mut on_device)?)
        })?;
        rows.push(transfer_row(H2D, Pinned, bytes, t));
        // The new tensor is returned, so the clock frees it after it stops.
        let t = telemetry.time(device, plan, &name("H2D to_device"), || {
            Ok(host_tensor.to_device(device)?)
        })?;
        rows.push(transfer_row(H2D, CandleToDevice, bytes, t));
        let t = telemetry.time(device, plan, &name("D2H pageable"), || {
            Ok(stream.memcpy_dtoh(&on_device, &mut pageable_back)?)
        })?;
        rows.push(transfer_row(D2H, Pageable, bytes, t));
        let t = telemetry.time(device, plan, &name("D2H pinned"), || {
            Ok(stream.memcpy_dtoh(&on_device, &mut pinned)?)
        })?;
        rows.push(transfer_row(D2H, Pinned, bytes, t));
        let t = telemetry.time(device, plan, &name("D2H to_device"), || {
            Ok(device_tensor.to_device(&Device::Cpu)?)
        })?;
        rows.push(transfer_row(D2H, CandleToDevice, bytes, t));
    }
    Ok(rows)
}

/// A device buffer several times the L2's size: writing all of it leaves the
/// L2 holding its lines and none of what ran before.
pub(crate) struct L2Flush {
    buf: CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl L2Flush {
    pub fn new(dev: &CudaDevice, bytes: u64) -> Result<Self> {
        let stream = dev.cuda_stream();
        Ok(Self {
            buf: device_buffer(&stream, bytes as usize)?,
            stream,
        })
    }

    /// Writes the whole buffer (`cuMemsetD8Async` on Candle's stream: every
    /// write to device memory passes through the L2) and waits for it.
    pub fn flush(&mut self) -> Result<()> {
        self.stream
            .memset_zeros(&mut self.buf)
            .context("flushing the L2 (cuMemsetD8Async)")?;
        self.stream
            .synchronize()
            .context("synchronizing the CUDA stream")
    }
}
