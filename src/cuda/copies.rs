//! Raw buffers and copies that Candle's tensor API does not expose: zeroed
//! device memory, page-locked host memory, host <-> device and device-to-device
//! copies with `cuMemcpy*Async`, and a buffer that flushes the L2. Every copy
//! runs on Candle's own stream, so the clock's CUDA events (recorded on that
//! stream) time it.

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaStream, PinnedHostSlice};
use candle_core::cuda_backend::CudaDevice;

/// Zeroed device memory on Candle's stream.
pub(crate) struct DeviceBuffer {
    buf: CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl DeviceBuffer {
    pub fn zeroed(dev: &CudaDevice, bytes: usize) -> Result<Self> {
        let stream = dev.cuda_stream();
        let buf = stream
            .alloc_zeros::<u8>(bytes)
            .with_context(|| format!("allocating {} MiB on the GPU", bytes >> 20))?;
        Ok(Self { buf, stream })
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// `cuMemcpyDtoDAsync` from `src`, enqueued (the clock waits for it).
    pub fn copy_from(&mut self, src: &DeviceBuffer) -> Result<()> {
        self.stream
            .memcpy_dtod(&src.buf, &mut self.buf)
            .context("cuMemcpyDtoDAsync")
    }

    /// `cuMemcpyHtoDAsync` from pageable host memory (the driver stages it).
    pub fn upload(&mut self, src: &[u8]) -> Result<()> {
        Ok(self.stream.memcpy_htod(src, &mut self.buf)?)
    }

    /// `cuMemcpyHtoDAsync` from page-locked host memory.
    pub fn upload_pinned(&mut self, src: &PinnedBuffer) -> Result<()> {
        Ok(self.stream.memcpy_htod(&src.0, &mut self.buf)?)
    }

    /// `cuMemcpyDtoHAsync` into pageable host memory.
    pub fn download(&self, dst: &mut [u8]) -> Result<()> {
        Ok(self.stream.memcpy_dtoh(&self.buf, dst)?)
    }

    /// `cuMemcpyDtoHAsync` into page-locked host memory.
    pub fn download_pinned(&self, dst: &mut PinnedBuffer) -> Result<()> {
        Ok(self.stream.memcpy_dtoh(&self.buf, &mut dst.0)?)
    }
}

/// Plain page-locked host memory (flags 0), as PyTorch's `pin_memory()`
/// allocates it; cudarc's default adds write-combining, which is slow for the
/// host to read. Filled once, so every page is mapped before any timing.
pub(crate) struct PinnedBuffer(PinnedHostSlice<u8>);

impl PinnedBuffer {
    pub fn filled(dev: &CudaDevice, bytes: usize, value: u8) -> Result<Self> {
        // SAFETY: the memory is written (filled) before it is read.
        let mut pinned = unsafe {
            dev.cuda_stream()
                .context()
                .alloc_pinned_with_flags::<u8>(bytes, 0)
        }
        .with_context(|| format!("allocating {} MiB of pinned host memory", bytes >> 20))?;
        pinned
            .as_mut_slice()
            .context("mapping pinned memory")?
            .fill(value);
        Ok(Self(pinned))
    }
}

/// A device buffer several times the L2's size: writing all of it leaves the
/// L2 holding its lines and none of what ran before.
pub(crate) struct L2Flush(DeviceBuffer);

impl L2Flush {
    pub fn new(dev: &CudaDevice, bytes: u64) -> Result<Self> {
        Ok(Self(DeviceBuffer::zeroed(dev, bytes as usize)?))
    }

    /// Writes the whole buffer (`cuMemsetD8Async` on Candle's stream: every
    /// write to device memory passes through the L2) and waits for it.
    pub fn flush(&mut self) -> Result<()> {
        let DeviceBuffer { buf, stream } = &mut self.0;
        stream
            .memset_zeros(buf)
            .context("flushing the L2 (cuMemsetD8Async)")?;
        stream
            .synchronize()
            .context("synchronizing the CUDA stream")
    }
}
