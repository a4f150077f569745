//! Out of memory: the suite's own refusal of a request larger than the memory
//! there is, and on a GPU the same request made of Candle anyway, with the
//! device still computing afterwards.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

use super::{no_gpu_reason, GIB};
use crate::memory::fits::{self, HostCheck, Need};
use crate::schema::{OutOfMemory, Refusal};

/// The suite's refusal of a request larger than the memory there is, and on a
/// GPU the same request made of Candle anyway.
pub(super) fn out_of_memory(device: &Device) -> Result<OutOfMemory> {
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
        // More than the machine has at all (memory and swap on the host, free
        // memory on a GPU), so that the one policy refuses it.
        let requested = match crate::env::host_memory() {
            Some(m) if device.is_cpu() => m.total_bytes + m.swap_bytes + GIB,
            _ => available + GIB,
        };
        let before = crate::memory::host_counting().then(crate::memory::host_current_bytes);
        let need = Need {
            what: oom_what(requested),
            host_bytes: 0,
            device_bytes: requested,
        };
        let error = match fits::check(device, &need, HostCheck::Enforce) {
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
