//! CUDA-only pieces, compiled with the `cuda` feature: what the portable
//! Candle API does not give. A description of the GPU (name, compute
//! capability, SMs, memory, driver, UUID, L2 size) here; GPU-side time from
//! CUDA events recorded on Candle's own stream ([`events`]); the stream-ordered
//! memory pool Candle allocates every tensor from, its high-water mark and trim
//! ([`pool`]); raw buffers and copies that Candle's tensors do not expose, and
//! an L2 flush ([`copies`]). Everything goes through the cudarc that candle-core
//! re-exports, so the two never disagree on versions. This module is a leaf: it
//! imports nothing of the suite's, and the rest of the suite builds on it.

mod copies;
mod events;
mod pool;

pub(crate) use copies::{DeviceBuffer, L2Flush, PinnedBuffer};
pub(crate) use events::EventTimer;
pub(crate) use pool::{keep_freed_memory, trim_pool, MemoryPool};

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::sys;
use candle_core::cuda_backend::CudaDevice;

/// What the driver tells about one GPU.
pub(crate) struct Description {
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub total_memory_bytes: u64,
    pub free_memory_bytes: u64,
    /// The newest CUDA version the installed driver supports, e.g. "13.0".
    pub driver_cuda_version: String,
    /// Whether allocations come from the stream-ordered pool (needed for peaks).
    pub memory_pool: bool,
}

pub(crate) fn describe(dev: &CudaDevice) -> Result<Description> {
    let ctx = dev.cuda_stream().context().clone();
    let (major, minor) = ctx
        .compute_capability()
        .context("reading compute capability")?;
    let sm_count = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("reading the SM count")?;
    let (free, total) = memory_info(dev)?;
    let mut driver: i32 = 0;
    // SAFETY: cuDriverGetVersion writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut driver) }
        .result()
        .context("reading the driver version")?;
    Ok(Description {
        name: ctx.name().context("reading the device name")?,
        compute_capability: format!("{major}.{minor}"),
        sm_count: sm_count as u32,
        total_memory_bytes: total,
        free_memory_bytes: free,
        driver_cuda_version: format!("{}.{}", driver / 1000, (driver % 1000) / 10),
        memory_pool: ctx.has_async_alloc(),
    })
}

/// `(free, total)` device memory in bytes, from `cuMemGetInfo`.
pub(crate) fn memory_info(dev: &CudaDevice) -> Result<(u64, u64)> {
    let (free, total) = dev
        .cuda_stream()
        .context()
        .mem_get_info()
        .context("reading device memory (cuMemGetInfo)")?;
    Ok((free as u64, total as u64))
}

/// The GPU's UUID, 16 bytes (`cuDeviceGetUuid`); NVML names the GPU by it.
pub(crate) fn uuid(dev: &CudaDevice) -> Result<[u8; 16]> {
    let raw = dev
        .cuda_stream()
        .context()
        .uuid()
        .context("reading the GPU's UUID (cuDeviceGetUuid)")?;
    Ok(raw.bytes.map(|b| b as u8))
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
