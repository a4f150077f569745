//! The memory experiment's rows from their bytes and samples: a bandwidth row
//! per operation, a transfer row per copy, and the roofline's points.

use candle_core::DType;

use crate::formulas::{attainable_gflop_per_s, gb_per_s, matmul_flops, per_s, Traffic};
use crate::schema::{
    BandwidthRow, Bound, Direction, HostMemory, LadderPoint, Roofline, RooflinePoint, Row, Timed,
    TransferRow,
};

/// One row from its bytes and its samples. Rates divide by the row's
/// [`Timed::rate_ms`]; percentages compare them with the ladder's `bound` for
/// the row (none: the row is the ceiling itself, 100%) and the datasheet.
#[allow(clippy::too_many_arguments)]
pub fn bandwidth_row(
    op: &str,
    call: String,
    dtype_in: DType,
    dtype_out: DType,
    elements: u64,
    t: Traffic,
    timed: Timed,
    bound: Option<Bound>,
    datasheet_gb_per_s: Option<f64>,
) -> BandwidthRow {
    let (time_ms, time_source) = timed.rate_ms();
    let rate = gb_per_s(t.bytes_moved(), time_ms);
    BandwidthRow {
        op: op.into(),
        call,
        dtype_in: dtype_in.as_str().into(),
        dtype_out: dtype_out.as_str().into(),
        elements,
        bytes_read: t.bytes_read,
        bytes_written: t.bytes_written,
        bytes_moved: t.bytes_moved(),
        flops: t.flops,
        flop_per_byte: t.flop_per_byte(),
        time_ms,
        time_source,
        gb_per_s: rate,
        elements_per_s: per_s(elements, time_ms),
        gflop_per_s: (t.flops > 0).then(|| per_s(t.flops, time_ms) / 1e9),
        // No ceiling given: this row is the ceiling, 100% by definition (and
        // exactly: 100 x rate / rate can round to 100.00000000000001).
        pct_of_ceiling: bound.as_ref().map_or(100.0, |b| 100.0 * rate / b.gb_per_s),
        pct_of_datasheet: datasheet_gb_per_s.map(|d| 100.0 * rate / d),
        bound,
        timed,
    }
}

/// A ladder point as the memory table's ceiling row: its time per call, its
/// bytes, 100% of itself.
pub fn ceiling_row(p: &LadderPoint, datasheet_gb_per_s: Option<f64>) -> BandwidthRow {
    let (_, time_source) = p.timed.rate_ms();
    let half = p.bytes_moved / 2;
    BandwidthRow {
        op: format!("ladder {}", p.kernel.name()),
        call: format!(
            "the ladder's {} on {} thread(s), {}{}",
            p.kernel.name(),
            p.threads,
            p.level,
            if p.from_fastest_sample {
                ", its fastest sample"
            } else {
                ""
            }
        ),
        dtype_in: "u8".into(),
        dtype_out: "u8".into(),
        elements: half,
        bytes_read: half,
        bytes_written: p.bytes_moved - half,
        bytes_moved: p.bytes_moved,
        flops: 0,
        flop_per_byte: 0.0,
        time_ms: p.time_per_call_ms,
        time_source,
        gb_per_s: p.gb_per_s,
        elements_per_s: per_s(half, p.time_per_call_ms),
        gflop_per_s: None,
        pct_of_ceiling: 100.0,
        pct_of_datasheet: datasheet_gb_per_s.map(|d| 100.0 * p.gb_per_s / d),
        bound: None,
        timed: p.timed.clone(),
    }
}

/// One transfer row: `bytes` over the row's [`Timed::rate_ms`].
pub fn transfer_row(
    direction: Direction,
    host_memory: HostMemory,
    bytes: u64,
    timed: Timed,
) -> TransferRow {
    let (time_ms, time_source) = timed.rate_ms();
    TransferRow {
        direction,
        host_memory,
        bytes,
        time_ms,
        time_source,
        gb_per_s: gb_per_s(bytes, time_ms),
        timed,
    }
}

/// The roofline's points: the operations that compute (copies and casts have
/// no FLOPs to plot), and the matmuls that ran, whose bytes are their
/// payload (A, B and C once each: the least a matmul can move).
pub fn roofline(
    memory: f64,
    datasheet: Option<f64>,
    ops: &[BandwidthRow],
    matmul_size: usize,
    matmuls: &[Row],
) -> Roofline {
    let mut points: Vec<RooflinePoint> = ops
        .iter()
        .filter_map(|r| {
            Some(RooflinePoint {
                label: format!("{} {}", r.op, r.dtype_in),
                kind: "memory_op".into(),
                dtype: r.dtype_in.clone(),
                flop_per_byte: r.flop_per_byte,
                gflop_per_s: r.gflop_per_s?,
                attainable_gflop_per_s: 0.0,
            })
        })
        .collect();
    for row in matmuls {
        let Some(m) = &row.measured else { continue };
        points.push(RooflinePoint {
            label: format!("matmul {matmul_size} {}", row.precision),
            kind: "matmul".into(),
            dtype: row.dtype.clone(),
            flop_per_byte: matmul_flops(matmul_size) / m.payload_bytes as f64,
            gflop_per_s: m.gpu_gflops.unwrap_or(m.gflops),
            attainable_gflop_per_s: 0.0,
        });
    }
    let compute = points
        .iter()
        .filter(|p| p.kind == "matmul")
        .map(|p| p.gflop_per_s)
        .reduce(f64::max);
    for p in &mut points {
        p.attainable_gflop_per_s = attainable_gflop_per_s(p.flop_per_byte, memory, compute);
    }
    Roofline {
        memory_gb_per_s: memory,
        memory_datasheet_gb_per_s: datasheet,
        compute_gflop_per_s: compute,
        ridge_flop_per_byte: compute.map(|c| c / memory),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::memory::{traffic, Op};
    use crate::telemetry::timed_at as timed;

    fn bound(gb_per_s: f64) -> Bound {
        Bound {
            kernel: crate::schema::LadderKernel::Copy,
            threads: 2,
            footprint_bytes: 8 << 20,
            level: "L3".into(),
            gb_per_s,
            chunked: false,
        }
    }

    #[test]
    fn rows_divide_their_bytes_by_their_own_time() {
        let t = traffic(Op::Add, 1 << 20, 4, 4);
        let cpu = bandwidth_row(
            "add",
            "a + b".into(),
            DType::F32,
            DType::F32,
            1 << 20,
            t,
            timed(&[2.0, 4.0, 3.0], &[]),
            Some(bound(10.0)),
            None,
        );
        assert_eq!(cpu.time_ms, 3.0);
        assert_eq!(cpu.time_source, crate::schema::TimeSource::MedianMs);
        assert_eq!(cpu.bytes_moved, 12 << 20);
        assert_eq!(cpu.gb_per_s, (12 << 20) as f64 / 3e-3 / 1e9);
        assert_eq!(cpu.elements_per_s, (1 << 20) as f64 / 3e-3);
        assert_eq!(cpu.gflop_per_s, Some((1 << 20) as f64 / 3e-3 / 1e9));
        assert_eq!(cpu.pct_of_ceiling, 100.0 * cpu.gb_per_s / 10.0);
        assert_eq!(cpu.pct_of_datasheet, None);

        // On a GPU the event time is the one rates use.
        let gpu = bandwidth_row(
            "copy",
            "a.copy()".into(),
            DType::F16,
            DType::F16,
            1000,
            traffic(Op::Copy, 1000, 2, 2),
            timed(&[5.0], &[1.0]),
            Some(bound(4.0)),
            Some(8.0),
        );
        assert_eq!(gpu.time_ms, 1.0);
        assert_eq!(gpu.time_source, crate::schema::TimeSource::GpuMedianMs);
        assert_eq!(gpu.gb_per_s, 4000.0 / 1e-3 / 1e9);
        assert_eq!(gpu.gflop_per_s, None);
        assert_eq!(gpu.pct_of_datasheet, Some(100.0 * gpu.gb_per_s / 8.0));

        let tr = transfer_row(
            Direction::HostToDevice,
            HostMemory::Pinned,
            1 << 30,
            timed(&[100.0], &[]),
        );
        assert_eq!(tr.gb_per_s, (1u64 << 30) as f64 / 0.1 / 1e9);
    }
}
