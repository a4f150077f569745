//! A ladder kernel's arrays on the device, made once and called many
//! times: the CPU's ([`super::cpu`]), the suite's CUDA kernels
//! (`crate::kernels::ladder`) and the driver's device-to-device copy.

use anyhow::Result;
use candle_core::Device;

use super::{cpu, elements};
use crate::schema::LadderKernel;

/// A kernel's arrays on the device, ready to be called.
pub(super) enum Work {
    Cpu(cpu::Arrays),
    /// The suite's CUDA read, copy or triad (`crate::kernels::ladder`).
    #[cfg(feature = "cuda")]
    Gpu(crate::kernels::ladder::GpuArrays),
    /// The driver's copy between two buffers.
    #[cfg(feature = "cuda")]
    DeviceCopy(
        Box<crate::cuda::DeviceBuffer>,
        Box<crate::cuda::DeviceBuffer>,
    ),
}

impl Work {
    pub(super) fn new(device: &Device, kernel: LadderKernel, footprint: u64) -> Result<Self> {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(dev) = device {
            use crate::kernels::ladder::{GpuArrays, Pattern};
            let pattern = match kernel {
                LadderKernel::Read => Pattern::Read,
                LadderKernel::Copy => Pattern::Copy,
                LadderKernel::Triad => Pattern::Triad,
                LadderKernel::DeviceCopy => {
                    let half = elements(kernel, footprint) * 4;
                    return Ok(Self::DeviceCopy(
                        Box::new(crate::cuda::DeviceBuffer::zeroed(dev, half)?),
                        Box::new(crate::cuda::DeviceBuffer::zeroed(dev, half)?),
                    ));
                }
                LadderKernel::CopyNt | LadderKernel::TriadNt => {
                    anyhow::bail!("the ladder's {} is the CPU's only", kernel.name())
                }
            };
            return Ok(Self::Gpu(GpuArrays::new(
                dev,
                pattern,
                elements(kernel, footprint),
            )?));
        }
        let _ = device;
        Ok(Self::Cpu(cpu::Arrays::new(
            kernel,
            elements(kernel, footprint),
        )))
    }

    pub(super) fn call(&mut self, threads: usize, chunked: bool) -> Result<()> {
        match self {
            Self::Cpu(a) => {
                a.call(threads, chunked);
                std::hint::black_box(a.observed());
            }
            #[cfg(feature = "cuda")]
            Self::Gpu(a) => a.call()?,
            #[cfg(feature = "cuda")]
            Self::DeviceCopy(dst, src) => dst.copy_from(src)?,
        }
        Ok(())
    }

    /// Bytes of every array together: also what a call moves (STREAM's
    /// counting: each element of each stream once).
    pub(super) fn footprint(&self) -> u64 {
        match self {
            Self::Cpu(a) => a.footprint(),
            #[cfg(feature = "cuda")]
            Self::Gpu(a) => a.footprint(),
            #[cfg(feature = "cuda")]
            Self::DeviceCopy(dst, src) => (dst.len() + src.len()) as u64,
        }
    }

    pub(super) fn bytes_moved(&self) -> u64 {
        self.footprint()
    }
}
