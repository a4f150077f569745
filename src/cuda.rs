//! CUDA-only measurement, compiled with the `cuda` feature. Three things the
//! portable Candle API does not give: a description of the GPU (name, compute
//! capability, SMs, memory, driver), GPU-side time from CUDA events recorded on
//! Candle's own stream, and the high-water mark of the stream-ordered memory pool
//! that Candle allocates every tensor from (through cudarc's `cuMemAllocAsync`).
//! Everything goes through the cudarc that candle-core re-exports, so the two can
//! never disagree on versions.

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaEvent, CudaStream};
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

/// A pair of timing events on Candle's stream: `start` before the work, `stop`
/// after it. The GPU stamps each when the stream reaches it, so the difference
/// is device-side time from the start event to the end of the work.
pub(crate) struct EventTimer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    stop: CudaEvent,
}

impl EventTimer {
    pub fn new(dev: &CudaDevice) -> Result<Self> {
        let stream = dev.cuda_stream();
        let ctx = stream.context().clone();
        // Timing events: the default flag (None would disable timing).
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        Ok(Self {
            start: ctx.new_event(flags).context("creating a CUDA event")?,
            stop: ctx.new_event(flags).context("creating a CUDA event")?,
            stream,
        })
    }

    pub fn record_start(&self) -> Result<()> {
        self.start
            .record(&self.stream)
            .context("recording a CUDA event")
    }

    pub fn record_stop(&self) -> Result<()> {
        self.stop
            .record(&self.stream)
            .context("recording a CUDA event")
    }

    /// Milliseconds between the two events; waits for the stop event.
    pub fn elapsed_ms(&self) -> Result<f64> {
        let ms = self
            .start
            .elapsed_ms(&self.stop)
            .context("reading CUDA event time")?;
        Ok(f64::from(ms))
    }
}

/// The device's current memory pool: the one `cuMemAllocAsync` draws from.
pub(crate) struct MemoryPool {
    pool: sys::CUmemoryPool,
    stream: Arc<CudaStream>,
}

impl MemoryPool {
    /// `None` when the device does not allocate from a pool, so that no peak is
    /// read from a pool nothing uses.
    pub fn of(dev: &CudaDevice) -> Result<Option<Self>> {
        let stream = dev.cuda_stream();
        let ctx = stream.context().clone();
        if !ctx.has_async_alloc() {
            return Ok(None);
        }
        ctx.bind_to_thread().context("binding the CUDA context")?;
        // SAFETY: the device handle comes from a live context.
        let pool = unsafe { result::device::get_mem_pool(ctx.cu_device()) }
            .context("reading the device's memory pool (cuDeviceGetMemPool)")?;
        Ok(Some(Self { pool, stream }))
    }

    fn get(&self, attr: sys::CUmemPool_attribute) -> Result<u64> {
        let mut value: u64 = 0;
        // SAFETY: the attributes used here are cuuint64_t, written through a valid pointer.
        unsafe {
            result::mem_pool::get_attribute(self.pool, attr, (&mut value as *mut u64).cast())
        }
        .context("reading a memory-pool attribute (cuMemPoolGetAttribute)")?;
        Ok(value)
    }

    fn set(&self, attr: sys::CUmemPool_attribute, mut value: u64) -> Result<()> {
        // SAFETY: as in `get`; the driver reads one cuuint64_t.
        unsafe { result::mem_pool::set_attribute(self.pool, attr, (&mut value as *mut u64).cast()) }
            .context("setting a memory-pool attribute (cuMemPoolSetAttribute)")
    }

    /// Waits for the stream, so that allocations and frees already enqueued on it
    /// have happened before the pool is read or reset.
    fn settle(&self) -> Result<()> {
        self.stream
            .synchronize()
            .context("synchronizing the CUDA stream")
    }

    /// Bytes the pool has handed out and not had back (after [`Self::settle`]).
    pub fn used_bytes(&self) -> Result<u64> {
        self.settle()?;
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    /// Highest `used_bytes` since the last [`Self::reset_peak`].
    pub fn peak_bytes(&self) -> Result<u64> {
        self.settle()?;
        self.get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    /// Starts a new high-water mark. The driver accepts only 0 here ("reset");
    /// each allocation after it raises the mark to the use at that moment, so a
    /// reset followed by work that allocates reports the use during that work,
    /// including what was already allocated (tests/cuda_pool.rs checks this on a GPU).
    pub fn reset_peak(&self) -> Result<()> {
        self.settle()?;
        self.set(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0)
    }
}

/// Makes the device's pool keep freed memory for reuse instead of returning it
/// to the driver at every synchronization (the default release threshold is 0).
/// Without this, each timed matmul would map its output's memory afresh, a cost
/// PyTorch's caching allocator never pays; with it, Candle reuses memory as
/// PyTorch does. Usage and peaks are unaffected: they count memory in use.
pub(crate) fn keep_freed_memory(dev: &CudaDevice) -> Result<()> {
    if let Some(pool) = MemoryPool::of(dev)? {
        pool.set(
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            u64::MAX,
        )?;
    }
    Ok(())
}
