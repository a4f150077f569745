//! CUDA events around each sample when the device is a GPU, nothing on the CPU.

use anyhow::Result;
use candle_core::Device;

/// CUDA events when the device is a GPU, nothing on the CPU.
pub(super) enum EventClock {
    None,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::EventTimer),
}

impl EventClock {
    pub(super) fn new(device: &Device) -> Result<Self> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => Ok(Self::Cuda(crate::cuda::EventTimer::new(dev)?)),
            _ => Ok(Self::None),
        }
    }

    pub(super) fn start(&self) -> Result<()> {
        match self {
            Self::None => Ok(()),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.record_start(),
        }
    }

    pub(super) fn stop(&self) -> Result<()> {
        match self {
            Self::None => Ok(()),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.record_stop(),
        }
    }

    pub(super) fn elapsed_ms(&self) -> Result<Option<f64>> {
        match self {
            Self::None => Ok(None),
            #[cfg(feature = "cuda")]
            Self::Cuda(t) => t.elapsed_ms().map(Some),
        }
    }
}
