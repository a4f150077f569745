//! Host <-> device transfers (GPU only): pageable and pinned host memory with
//! the driver's copies, and Candle's `to_device`, at sizes from 1 MiB up.

use anyhow::Result;
use candle_core::Device;
#[cfg(feature = "cuda")]
use candle_core::Tensor;

#[cfg(feature = "cuda")]
use super::transfer_row;
use super::{no_gpu_reason, Config, MIB};
#[cfg(feature = "cuda")]
use crate::clock::Plan;
#[cfg(feature = "cuda")]
use crate::schema::TransferRow;
use crate::schema::{SectionStatus, Transfers};
use crate::telemetry::Telemetry;

/// Transfer sizes: 1 MiB and each fourth power up to `max_bytes` (1, 4, 16,
/// 64, 256, 1024 MiB for 1 GiB); at least 1 MiB.
pub fn transfer_sizes(max_bytes: u64) -> Vec<u64> {
    let mut sizes = vec![MIB];
    while let Some(next) = sizes.last().map(|s| s * 4).filter(|&s| s <= max_bytes) {
        sizes.push(next);
    }
    sizes
}

pub(super) fn transfers(device: &Device, cfg: &Config, telemetry: &Telemetry) -> Result<Transfers> {
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
    let started = std::time::Instant::now();
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
        crate::note!(
            "memory: the {label} transfers done, six ways, {:.1} s in",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::memory::GIB;

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
}
