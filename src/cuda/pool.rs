//! The stream-ordered memory pool Candle allocates every tensor from (through
//! cudarc's `cuMemAllocAsync`): its use, its high-water mark, what it keeps.

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::{result, sys, CudaStream};
use candle_core::cuda_backend::CudaDevice;

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
