//! The CUDA memory pool's peak, on a known allocation (GPU machines only:
//! `just test-cuda`). Its own test binary, so no other test allocates on the
//! device meanwhile.
#![cfg(feature = "cuda")]

use candle_core::{DType, Tensor};
use candle_lab::device::{select, DeviceArg};
use candle_lab::memory::MemoryMeter;

#[test]
fn pool_peak_sees_a_known_allocation_and_resets() {
    const BYTES: u64 = 64 << 20;
    let (device, info) = select(DeviceArg::Cuda(0)).unwrap();
    assert_eq!(
        info.memory_pool,
        Some(true),
        "Candle allocates from the pool"
    );
    let meter = MemoryMeter::for_device(&device).unwrap();
    let base = meter.used_bytes().unwrap().unwrap();
    meter.reset_peak().unwrap();

    let t = Tensor::zeros((BYTES / 4) as usize, DType::F32, &device).unwrap();
    assert!(meter.used_bytes().unwrap().unwrap() >= base + BYTES);
    drop(t);
    let peak = meter.peak_bytes().unwrap().unwrap();
    assert!(
        (base + BYTES..base + BYTES + (4 << 20)).contains(&peak),
        "peak {peak}, base {base}"
    );

    // After a reset the old peak is gone; a small allocation sets the new one.
    meter.reset_peak().unwrap();
    let small = Tensor::zeros(1 << 18, DType::F32, &device).unwrap();
    let peak = meter.peak_bytes().unwrap().unwrap();
    assert!(peak < base + BYTES, "reset forgot the 64 MiB: peak {peak}");
    assert!(
        peak >= base + (1 << 20),
        "the 1 MiB tensor counts: peak {peak}"
    );
    drop(small);
}
