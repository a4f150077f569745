//! The counting allocator measures a known allocation. Its own test binary (one
//! test, one thread), so no other test's allocations move the counters.

use candle_lab::memory::{
    host_counting, host_current_bytes, host_peak_bytes, reset_host_peak, CountingAlloc, MemoryMeter,
};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn peak_sees_a_known_allocation_and_resets() {
    assert!(host_counting());
    const BYTES: usize = 64 << 20;
    reset_host_peak();
    let base = host_current_bytes();

    let block = std::hint::black_box(vec![1u8; BYTES]);
    assert!(host_current_bytes() >= base + BYTES as u64);
    drop(block);
    assert!(host_current_bytes() < base + BYTES as u64);
    let peak = host_peak_bytes() - base;
    assert!(
        (BYTES as u64..BYTES as u64 + (1 << 20)).contains(&peak),
        "peak {peak}"
    );

    reset_host_peak();
    assert!(
        host_peak_bytes() < base + BYTES as u64,
        "reset forgets the old peak"
    );

    // A Candle tensor on the CPU is counted through the same allocator.
    let meter = MemoryMeter::for_device(&candle_core::Device::Cpu).unwrap();
    meter.reset_peak().unwrap();
    let before = meter.used_bytes().unwrap().unwrap();
    let t = candle_core::Tensor::zeros(
        (1024, 1024),
        candle_core::DType::F32,
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let peak = meter.peak_bytes().unwrap().unwrap() - before;
    assert!(
        peak >= 4 * 1024 * 1024,
        "a 1024x1024 f32 tensor is 4 MiB, peak {peak}"
    );
    drop(t);
}
