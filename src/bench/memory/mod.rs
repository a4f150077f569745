//! The `memory` experiment's measurement core: how close Candle's memory-bound
//! operations come to the device's bandwidth. First the ceiling, the
//! bandwidth ladder's copy between preallocated arrays at the tensors'
//! traffic (on the CPU the faster of its two store kinds, on a GPU the
//! suite's CUDA copy); then Candle's contiguous copy, add, multiply-add (`affine`), strided
//! copy (transpose then `.contiguous()`), casts and sum on large tensors, per
//! dtype; host <-> device transfers on a GPU; a request larger than memory; and
//! the points of a roofline.
//!
//! Bytes follow the STREAM benchmark's convention (McCalpin, "Memory Bandwidth
//! and Machine Balance", 1995): every input element is counted as read once and
//! every output element as written once, the least traffic an operation can
//! cause. Extra traffic (a CPU reading a line before writing it, page faults on
//! a fresh output) is not counted and so shows as a lower GB/s. GB/s is bytes
//! moved / time / 10^9; arithmetic intensity is FLOPs / bytes moved (Williams,
//! Waterman and Patterson, "Roofline", CACM 2009).

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};

mod oom;
mod ops;
mod rows;
mod transfers;

use crate::bench::ladder::Ladder;
use crate::bench::square::{self, Inputs, Precision};
use crate::clock::Plan;
use crate::memory::fits::Need;
use crate::schema::{MemoryResults, SectionStatus};
use crate::telemetry::Telemetry;
pub use ops::{traffic, Op};
pub use rows::{bandwidth_row, ceiling_row, roofline, transfer_row};
pub use transfers::transfer_sizes;

pub(crate) const MIB: u64 = 1 << 20;
pub(crate) const GIB: u64 = 1 << 30;
/// Columns of the tensors the operations run on; one MiB of f32 is 64 rows.
pub const COLS: usize = 4096;

/// What a `memory` run asks for, validated by the program's flags.
#[derive(Clone, Debug)]
pub struct Config {
    /// Size of one f32 tensor, in MiB.
    pub mib: u64,
    pub plan: Plan,
    /// Dtypes the operations run in; casts go from f32 to each other one.
    pub dtypes: Vec<DType>,
    /// Side of the matmuls that give the roofline its compute points.
    pub matmul_size: usize,
    /// Largest host <-> device transfer, in MiB (GPU only).
    pub transfer_max_mib: u64,
    /// The ladder's largest footprint in bytes (`--ladder-max-mib`).
    pub ladder_max: Option<u64>,
}

impl Config {
    /// (rows, COLS): `mib` MiB at f32.
    pub fn shape(&self) -> (usize, usize) {
        (self.mib as usize * 64, COLS)
    }

    pub fn elements(&self) -> u64 {
        self.mib * MIB / 4
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.mib * MIB
    }

    fn matmul(&self) -> square::Config {
        square::Config {
            size: self.matmul_size,
            sampling: self.plan.into(),
            precisions: self.dtypes.iter().filter_map(|&d| precision(d)).collect(),
            accuracy_rows: 4,
        }
    }
}

/// Defaults that keep a 2-core CPU run well under a minute (Candle's CPU
/// kernels for f16 and bf16 convert element by element and run at a fraction
/// of memory speed) and make a GPU run large enough to leave its 50 MB-class
/// L2 far behind: one f32 tensor of 32 MiB on the CPU and 1 GiB on a GPU.
pub fn default_mib(on_cuda: bool) -> u64 {
    if on_cuda {
        1024
    } else {
        32
    }
}

/// Warm-up and timed runs per row: 1 and 5 on the CPU, where a row's call
/// takes up to a second; 3 and 20 on a GPU, where it takes about a millisecond.
pub fn default_plan(on_cuda: bool) -> Plan {
    if on_cuda {
        Plan {
            warmup: 3,
            iters: 20,
        }
    } else {
        Plan {
            warmup: 1,
            iters: 5,
        }
    }
}

/// The roofline's matmul side: 1024 on the CPU (tens of ms), 8192 on a GPU.
pub fn default_matmul_size(on_cuda: bool) -> usize {
    if on_cuda {
        8192
    } else {
        1024
    }
}

fn precision(dtype: DType) -> Option<Precision> {
    match dtype {
        DType::F64 => Some(Precision::F64),
        DType::F32 => Some(Precision::F32),
        DType::F16 => Some(Precision::F16),
        DType::BF16 => Some(Precision::Bf16),
        _ => None,
    }
}

/// Refuses, before anything is allocated, a run whose tensors, transfers or
/// matmuls do not fit. The operations hold two f32 inputs, two inputs in the
/// widest dtype and one output; transfers hold a pageable, a pinned and a
/// returned host copy of the largest size and two device copies; the matmuls
/// are [`square::check_fits`]'s.
pub fn needs(device: &Device, cfg: &Config) -> Vec<Need> {
    let t = cfg.tensor_bytes();
    let widest = cfg
        .dtypes
        .iter()
        .map(|d| d.size_in_bytes() as u64)
        .max()
        .unwrap_or(4)
        .max(4);
    let mut needs = vec![Need {
        what: format!("--mib {}", cfg.mib),
        host_bytes: 0,
        device_bytes: 2 * t + 3 * t * widest / 4,
    }];
    if device.is_cuda() {
        let x = cfg.transfer_max_mib * MIB;
        needs.push(Need {
            what: format!("--transfer-max-mib {}", cfg.transfer_max_mib),
            host_bytes: 3 * x,
            device_bytes: 2 * x,
        });
    }
    if let Ok(n) = crate::bench::ladder::need(device, cfg.ladder_max) {
        needs.push(n);
    }
    let m = cfg.matmul();
    needs.push(Need {
        what: format!("--matmul-size {}", m.size),
        ..square::need(device, &m)
    });
    needs
}

/// Runs the whole experiment. `gpu_name` (the driver's name, `None` on the
/// CPU) looks up the datasheet bandwidth and peaks.
pub fn run(
    device: &Device,
    gpu_name: Option<&str>,
    cfg: &Config,
    telemetry: &Telemetry,
) -> Result<MemoryResults> {
    let datasheet = gpu_name.and_then(crate::peaks::datasheet_memory_gb_per_s);
    // One line as each part ends: the bars are hidden off a terminal, and a
    // run stopped at its limit (the GPU call's) then still says how far it got.
    let started = std::time::Instant::now();
    let done = |part: &str| {
        crate::note!(
            "memory: {part} done, {:.1} s in",
            started.elapsed().as_secs_f64()
        );
    };
    let transfers = transfers::transfers(device, cfg, telemetry)?;
    if transfers.status == SectionStatus::Ok {
        done("transfers");
    }

    // The ladder first: every level, then the point each row reads.
    let ladder = Ladder::new(device, telemetry, cfg.ladder_max)?;
    ladder.measure_all()?;
    done("the bandwidth ladder");
    let threads = ladder.pool_threads();
    let bytes = cfg.tensor_bytes();
    // The ceiling row: the ladder's copy at the tensor's traffic with the
    // faster store kind (Candle's copy, `memcpy`, picks its own).
    let copies = ladder.kernels_for_op(ladder.kernel_for(1, 1), true);
    let mut copy = ladder.point(copies[0], threads, 2 * bytes)?;
    for &k in &copies[1..] {
        let p = ladder.point(k, threads, 2 * bytes)?;
        if p.gb_per_s > copy.gb_per_s {
            copy = p;
        }
    }
    let ceiling = rows::ceiling_row(&copy, datasheet);

    let n = cfg.elements();
    let ops = measure_ops(device, cfg, telemetry, &ladder, datasheet)?;
    done("the memory-bound operations");

    let mcfg = cfg.matmul();
    let matmuls = if mcfg.precisions.is_empty() {
        Vec::new()
    } else {
        let inputs = Inputs::random(mcfg.size, mcfg.accuracy_rows)?;
        let rows = square::run(device, gpu_name, &mcfg, &inputs)?;
        done("the roofline's matmuls");
        rows
    };
    // The roof is memory's: the ladder's copy past every cache, every
    // thread, with the faster store kind.
    let dram = ladder.bound_of(&copies, threads, ladder.memory_footprint())?;
    let roofline = roofline(dram.gb_per_s, datasheet, &ops, mcfg.size, &matmuls);
    let out_of_memory = oom::out_of_memory(device)?;
    done("the out-of-memory demonstration");

    let (rows, cols) = cfg.shape();
    Ok(MemoryResults {
        shape: vec![rows, cols],
        elements: n,
        tensor_bytes_f32: bytes,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        cache_bytes: crate::device::largest_cache(device)?.map(|c| c.bytes),
        telemetry: telemetry.source(),
        transfers,
        ceiling,
        ladder: Some(ladder.finish()),
        datasheet_gb_per_s: datasheet,
        ops,
        out_of_memory,
        roofline,
    })
}

/// Every operation of every dtype of `cfg`, then the casts from f32, each
/// timed and held against the ladder's kernel of its access pattern at its
/// own traffic.
fn measure_ops(
    device: &Device,
    cfg: &Config,
    telemetry: &Telemetry,
    ladder: &Ladder,
    datasheet: Option<f64>,
) -> Result<Vec<crate::schema::BandwidthRow>> {
    let n = cfg.elements();
    let threads = ladder.pool_threads();
    let a32 = Tensor::randn(0f32, 1f32, cfg.shape(), device)?;
    let b32 = Tensor::randn(0f32, 1f32, cfg.shape(), device)?;
    let mut ops = Vec::new();
    let mut measure = |op: Op, a: &Tensor, b: &Tensor, dout: DType| -> Result<()> {
        let din = a.dtype();
        let label = format!("{} {}", op.name(), dout.as_str());
        let timed = telemetry
            .time(device, cfg.plan, &label, || Ok(op.run(a, b, dout)?))
            .with_context(|| format!("{} on {}", op.call(dout), din.as_str()))?;
        let elem = |d: DType| d.size_in_bytes() as u64;
        let t = traffic(op, n, elem(din), elem(dout));
        let (reads, writes) = op.streams();
        let kernels = ladder.kernels_for_op(ladder.kernel_for(reads, writes), op.memcpy());
        let bound = ladder.bound_of(&kernels, threads, t.bytes_moved())?;
        ops.push(bandwidth_row(
            op.name(),
            op.call(dout),
            din,
            dout,
            n,
            t,
            timed,
            Some(bound),
            datasheet,
        ));
        Ok(())
    };
    for &d in &cfg.dtypes {
        // Converted once per dtype, off the clock.
        let (a, b) = (a32.to_dtype(d)?, b32.to_dtype(d)?);
        for op in Op::PER_DTYPE {
            measure(op, &a, &b, d)?;
        }
    }
    for &d in cfg.dtypes.iter().filter(|&&d| d != DType::F32) {
        measure(Op::Cast, &a32, &b32, d)?;
    }
    Ok(ops)
}

/// Why a GPU-only section did not run on `device`.
pub(crate) fn no_gpu_reason(device: &Device) -> Option<String> {
    if device.is_cuda() {
        None
    } else if cfg!(feature = "cuda") {
        Some("the selected device is the CPU".into())
    } else {
        Some("this build has no CUDA support".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::fits::{self, HostCheck};

    fn small(dtypes: Vec<DType>) -> Config {
        Config {
            mib: 1,
            plan: Plan {
                warmup: 1,
                iters: 2,
            },
            dtypes,
            matmul_size: 32,
            transfer_max_mib: 1,
            ladder_max: Some(4 << 20),
        }
    }

    #[test]
    fn sizes_beyond_memory_are_refused_before_allocating() {
        let cfg = Config {
            mib: 1 << 30,
            ..small(vec![DType::F32])
        };
        let err = fits::check_all(&Device::Cpu, &needs(&Device::Cpu, &cfg), HostCheck::Enforce)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--mib 1073741824: needs") && err.contains("available"),
            "{err}"
        );
        let cfg = Config {
            matmul_size: 300_000,
            ..small(vec![DType::F32])
        };
        let err = fits::check_all(&Device::Cpu, &needs(&Device::Cpu, &cfg), HostCheck::Enforce)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--matmul-size 300000: needs"), "{err}");
    }

    fn memory_run(device: &Device) {
        let cfg = small(vec![DType::F32, DType::F16]);
        fits::check_all(device, &needs(device, &cfg), HostCheck::Enforce).unwrap();
        let r = run(device, None, &cfg, &Telemetry::open(device)).unwrap();
        assert_eq!(r.elements, 1 << 18);
        assert_eq!(r.shape, [64, COLS]);
        // Five operations per dtype, then the cast f32 -> f16.
        let names: Vec<String> = r
            .ops
            .iter()
            .map(|o| format!("{} {}", o.op, o.dtype_out))
            .collect();
        assert_eq!(
            names,
            [
                "copy f32",
                "add f32",
                "affine f32",
                "transpose f32",
                "sum f32",
                "copy f16",
                "add f16",
                "affine f16",
                "transpose f16",
                "sum f16",
                "cast f16"
            ]
        );
        for row in std::iter::once(&r.ceiling).chain(&r.ops) {
            assert_eq!(row.bytes_moved, row.bytes_read + row.bytes_written);
            let expect = row.bytes_moved as f64 / (row.time_ms * 1e-3) / 1e9;
            assert!(
                (row.gb_per_s - expect).abs() <= 1e-12 * expect,
                "{}",
                row.op
            );
            assert_eq!(row.timed.gpu_ms.is_some(), device.is_cuda());
        }
        for row in &r.ops {
            assert_eq!(row.timed.samples_wall_ms.len(), 2);
            // Held against the ladder at its own footprint, or at a larger
            // one the run read faster (the envelope).
            let b = row.bound.as_ref().unwrap();
            assert!(b.footprint_bytes >= crate::bench::ladder::fitted(b.kernel, row.bytes_moved));
            assert_eq!(row.pct_of_ceiling, 100.0 * row.gb_per_s / b.gb_per_s);
        }
        let ladder = r.ladder.as_ref().unwrap();
        assert!(ladder.points.iter().all(|p| p.footprint_bytes <= 4 << 20));
        assert_eq!(r.ceiling.bytes_moved, 2 << 20);
        assert_eq!(r.ceiling.pct_of_ceiling, 100.0);
        let add = |d: &str| {
            r.ops
                .iter()
                .find(|o| o.op == "add" && o.dtype_in == d)
                .unwrap()
        };
        assert_eq!(add("f32").bytes_moved, 3 << 20);
        assert_eq!(add("f16").bytes_moved, 3 << 19);
        // Points for add, affine and sum per dtype, and one matmul per dtype.
        assert_eq!(r.roofline.points.len(), 3 * 2 + 2);
        // The roof: the ladder's copy at its largest footprint, the faster
        // of one thread and the pool's.
        let roof = ladder
            .points
            .iter()
            .filter(|p| p.footprint_bytes == 4 << 20 && p.kernel.streams() == (1, 1))
            .map(|p| p.gb_per_s)
            .fold(0.0, f64::max);
        assert_eq!(r.roofline.memory_gb_per_s, roof);
        let mm = r
            .roofline
            .points
            .iter()
            .find(|p| p.kind == "matmul")
            .unwrap();
        // 2 x 32^3 FLOPs over 3 x 32^2 x 4 bytes.
        assert_eq!(mm.flop_per_byte, 2.0 * 32.0 / 12.0);
        if device.is_cpu() {
            assert_eq!(r.transfers.status, SectionStatus::Skipped);
            assert!(r.out_of_memory.device_attempt.is_none());
        } else {
            let a = r.out_of_memory.device_attempt.as_ref().unwrap();
            assert!(
                a.error.as_deref().unwrap().contains("OUT_OF_MEMORY"),
                "{a:?}"
            );
            assert!(a.matmul_after_ok);
        }
        if let Some(refusal) = &r.out_of_memory.refusal {
            assert!(refusal.requested_bytes > refusal.available_bytes);
            assert!(refusal.error.contains("available"), "{}", refusal.error);
        }
    }

    #[test]
    fn memory_run_cpu() {
        memory_run(&Device::Cpu);
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn memory_run_cuda() {
        memory_run(&Device::new_cuda(0).unwrap());
    }
}
