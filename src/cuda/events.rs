//! GPU-side time: a pair of CUDA events recorded on Candle's own stream.

use std::sync::Arc;

use anyhow::{Context, Result};
use candle_core::cuda_backend::cudarc::driver::{sys, CudaEvent, CudaStream};
use candle_core::cuda_backend::CudaDevice;

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
