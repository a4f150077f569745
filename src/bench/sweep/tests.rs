//! The sweep's pure pieces on hand-built points, and a real sweep at tiny sizes
//! (structure only: no time is asserted).

use super::*;
use crate::clock::{ClockOverhead, StopRule};
use crate::schema::{Accuracy, Measured, Row, RowStatus};
use crate::stats::summarize;

/// A measured point: `ms` per sample, three samples.
pub(crate) fn point(size: usize, p: Precision, ms: f64, peak_tflops: Option<f64>) -> SweepPoint {
    let samples = vec![ms; 3];
    SweepPoint {
        size,
        row: Row {
            precision: p,
            dtype: p.dtype().as_str().into(),
            element_bytes: p.dtype().size_in_bytes(),
            gemm_reduced_precision: false,
            memory_source: "test".into(),
            status: RowStatus::Ok,
            error: None,
            measured: Some(Measured {
                median_ms: ms,
                gflops: square::gflops(size, ms),
                peak_mib: None,
                peak_bytes: None,
                payload_mib: 0.0,
                payload_bytes: 0,
                gpu_median_ms: None,
                gpu_gflops: None,
                datasheet_tflops: peak_tflops,
                pct_of_datasheet: None,
                speedup_vs_fp32_wall: None,
                speedup_vs_fp32_gpu: None,
                vs_fp32_side_by_side: None,
                peak_vs_fp32: None,
                wall_ms: summarize(&samples).unwrap(),
                gpu_ms: None,
                samples_wall_ms: samples,
                samples_gpu_ms: Vec::new(),
                accuracy: Accuracy {
                    rows_checked: 1,
                    max_rel_err: 0.0,
                    mean_rel_err: 0.0,
                },
                availability: None,
            }),
        },
        stopped_by: Some(StopRule::NoiseTarget),
        sampling_s: Some(0.5),
    }
}

pub(crate) fn failed(size: usize, p: Precision) -> SweepPoint {
    let mut pt = point(size, p, 1.0, None);
    pt.row.status = RowStatus::Error;
    pt.row.error = Some("CUDA_ERROR_OUT_OF_MEMORY".into());
    pt.row.measured = None;
    pt.stopped_by = None;
    pt.sampling_s = None;
    pt
}

pub(crate) fn results(points: Vec<SweepPoint>) -> SweepResults {
    SweepResults {
        device: DeviceKind::Cpu,
        sizes: vec![64, 1024],
        precisions: vec![Precision::F32, Precision::Bf16],
        sampling: plan(2.0),
        clock_overhead: ClockOverhead {
            samples: 200,
            wall_median_ms: 5e-5,
            wall_iqr_ms: 1e-5,
            gpu_median_ms: None,
            gpu_iqr_ms: None,
        },
        complete: false,
        points,
    }
}

#[test]
fn default_sizes_hold_powers_of_two_and_the_awkward_ones() {
    for sizes in [&CPU_SIZES[..], &GPU_SIZES[..]] {
        for awkward in [1000, 1023, 1025, 3000] {
            assert!(sizes.contains(&awkward), "{awkward} in {sizes:?}");
        }
        assert!(
            sizes.windows(2).all(|w| w[0] < w[1]),
            "ascending: {sizes:?}"
        );
    }
    assert_eq!((GPU_SIZES[0], GPU_SIZES[GPU_SIZES.len() - 1]), (256, 16384));
    assert_eq!(default_sizes(false), CPU_SIZES);
}

#[test]
fn the_plan_is_adaptive_and_bounded_by_max_seconds() {
    let Sampling::Adaptive(a) = plan(2.0) else {
        panic!("not adaptive")
    };
    assert_eq!((a.min_samples, a.max_time_s, a.min_time_s), (10, 2.0, 0.1));
    // A budget below the minimum measured time lowers that minimum.
    let Sampling::Adaptive(short) = plan(0.05) else {
        panic!("not adaptive")
    };
    assert_eq!((short.min_time_s, short.max_time_s), (0.05, 0.05));
    assert!(plan(MAX_SECONDS_RANGE.0).validate().is_ok());
}

#[test]
fn sizes_run_in_ascending_order_each_once() {
    let cfg = Config::new(vec![1025, 64, 1024, 64], vec![Precision::F32], plan(1.0)).unwrap();
    assert_eq!(cfg.sizes, [64, 1024, 1025]);
    let huge = Config::new(vec![64, 400_000], vec![Precision::F32], plan(1.0)).unwrap();
    let err = format!(
        "{:#}",
        crate::memory::fits::check_all(
            &Device::Cpu,
            &huge.needs(&Device::Cpu),
            crate::memory::fits::HostCheck::Enforce
        )
        .unwrap_err()
    );
    assert!(err.starts_with("--sizes (largest 400000): needs"), "{err}");
}

/// A real sweep at tiny sizes: every point measured with the adaptive plan,
/// the caller told after each, `complete` only at the end.
fn tiny_sweep(device: &Device) {
    let cfg = Config::new(
        vec![16, 8],
        vec![Precision::F32, Precision::Bf16],
        plan(0.05),
    )
    .unwrap();
    let mut seen = Vec::new();
    let r = run(device, None, &cfg, |r| {
        seen.push((r.points.len(), r.complete));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, [(1, false), (2, false), (3, false), (4, true)]);
    let order: Vec<(usize, Precision)> =
        r.points.iter().map(|p| (p.size, p.row.precision)).collect();
    use Precision::{Bf16, F32};
    assert_eq!(order, [(8, F32), (8, Bf16), (16, F32), (16, Bf16)]);
    for p in &r.points {
        p.validate().unwrap();
        let m = p.row.measured.as_ref().unwrap();
        assert!(m.wall_ms.n >= 10, "at least min_samples: {}", m.wall_ms.n);
        assert_eq!(m.samples_wall_ms.len(), m.wall_ms.n);
        assert_ne!(p.stopped_by, Some(StopRule::FixedCount));
    }
    assert!(r.clock_overhead.wall_median_ms >= 0.0);
    assert_eq!(r.clock_overhead.gpu_median_ms.is_some(), device.is_cuda());
    // An error from the caller (a failed save) ends the sweep.
    let err = run(device, None, &cfg, |_| anyhow::bail!("disk full")).unwrap_err();
    assert_eq!(err.to_string(), "disk full");
}

#[test]
fn tiny_sweep_cpu() {
    tiny_sweep(&Device::Cpu);
}

#[cfg(feature = "cuda")]
#[test]
fn tiny_sweep_cuda() {
    tiny_sweep(&Device::new_cuda(0).unwrap());
}
