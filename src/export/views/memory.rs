//! The memory experiment shown: notes and terminal tables from its result.

use super::{num, Records, Shown};
use crate::export::roofline::{roofline_svg, RooflineDot};
use crate::export::table::Table;
use crate::schema::{BandwidthRow, MemoryResults, ResultFile, TimeSource};
use crate::units::mib;

const MIB: u64 = 1 << 20;

/// Lines printed under the tables: what the numbers cannot show by themselves.
pub fn notes(r: &MemoryResults) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(l) = &r.ladder {
        notes.extend(super::ladder::notes(l));
    }
    if let Some(reason) = &r.transfers.reason {
        notes.push(format!("transfers skipped: {reason}"));
    }
    // An add's three tensors are its working set.
    if let Some(cache) = r.cache_bytes.filter(|&c| c >= 3 * r.tensor_bytes_f32) {
        notes.push(format!(
            "note: three {:.0} MiB tensors fit in the {:.0} MiB cache: each row is held against \
             the ladder at its own footprint (the level column), and --mib {} or more measures \
             memory",
            mib(r.tensor_bytes_f32),
            mib(cache),
            (cache / MIB).next_power_of_two()
        ));
    }
    notes
}

/// The terminal tables of a run: the transfers (where measured), the
/// bandwidth ladder, the memory-bound operations, out of memory, and the
/// roofline's points.
pub fn tables(r: &MemoryResults, device: &str) -> Vec<Table> {
    let mut tables: Vec<Table> = transfers_table(r).into_iter().collect();
    if let Some(l) = &r.ladder {
        tables.push(super::ladder::table(l, device));
    }
    tables.extend([
        ops_table(r, device),
        out_of_memory_table(r),
        roofline_table(r),
    ]);
    tables
}

/// Host-to-device and back, per host memory kind; none where not measured.
fn transfers_table(r: &MemoryResults) -> Option<Table> {
    if r.transfers.rows.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "host <-> device transfers",
        &["direction", "host memory", "MiB", "ms", "GB/s"],
    );
    for row in &r.transfers.rows {
        t.row([
            format!("{:?}", row.direction),
            format!("{:?}", row.host_memory),
            format!("{:.0}", mib(row.bytes)),
            format!("{:.3}", row.time_ms),
            format!("{:.1}", row.gb_per_s),
        ]);
    }
    Some(t)
}

/// Each memory-bound operation against the ladder's point for its pattern.
fn ops_table(r: &MemoryResults, device: &str) -> Table {
    let mut t = Table::new(
        format!(
            "memory-bound operations on {device}, {} elements ({:.0} MiB at f32), time from {}; \
             each against the ladder's point for its pattern at its footprint",
            r.elements,
            mib(r.tensor_bytes_f32),
            match r.ceiling.time_source {
                crate::schema::TimeSource::GpuMedianMs => "CUDA events",
                crate::schema::TimeSource::MedianMs => "the wall clock",
            }
        ),
        &[
            "op",
            "call",
            "dtype",
            "read MiB",
            "written MiB",
            "ms",
            "GB/s",
            "G elem/s",
            "bound GB/s",
            "% bound",
            "% datasheet",
        ],
    );
    for row in std::iter::once(&r.ceiling).chain(&r.ops) {
        let dtype = if row.dtype_in == row.dtype_out {
            row.dtype_in.clone()
        } else {
            format!("{}->{}", row.dtype_in, row.dtype_out)
        };
        t.row([
            row.op.clone(),
            row.call.clone(),
            dtype,
            format!("{:.1}", mib(row.bytes_read)),
            format!("{:.1}", mib(row.bytes_written)),
            format!("{:.3}", row.time_ms) + super::mark(row.timed.availability.as_ref()),
            format!("{:.1}", row.gb_per_s),
            if row.dtype_in == "u8" {
                "-".into()
            } else {
                format!("{:.2}", row.elements_per_s / 1e9)
            },
            row.bound
                .as_ref()
                .map_or("(the bound)".into(), super::ladder::bound_cell),
            format!("{:.0}%", row.pct_of_ceiling),
            row.pct_of_datasheet
                .map_or("-".into(), |p| format!("{p:.0}%")),
        ]);
    }
    t
}

/// The suite's out-of-memory check, and Candle's answer on a GPU.
fn out_of_memory_table(r: &MemoryResults) -> Table {
    let mut t = Table::new("out of memory", &["", ""]);
    let oom = &r.out_of_memory;
    match (&oom.refusal, &oom.refusal_skipped) {
        (Some(refusal), _) => {
            t.row(["suite's check, before allocating", refusal.error.as_str()]);
            if let Some(g) = refusal.heap_growth_bytes {
                t.row(["heap growth across the check".to_string(), format!("{g} B")]);
            }
        }
        (None, reason) => {
            t.row(["suite's check", reason.as_deref().unwrap_or("")]);
        }
    }
    match (&oom.device_attempt, &oom.device_attempt_skipped) {
        (Some(a), _) => {
            t.row([
                "Candle's answer",
                a.error.as_deref().unwrap_or("no error: it fit"),
            ]);
            let pool = |b: Option<u64>| b.map_or("-".into(), |b| format!("{:.1} MiB", mib(b)));
            t.row([
                "pool in use before / after".to_string(),
                format!(
                    "{} / {}",
                    pool(a.pool_used_bytes_before),
                    pool(a.pool_used_bytes_after)
                ),
            ]);
            t.row([
                "a matmul afterwards",
                if a.matmul_after_ok {
                    "ran, values right"
                } else {
                    "failed"
                },
            ]);
        }
        (None, reason) => {
            t.row(["GPU demonstration", reason.as_deref().unwrap_or("")]);
        }
    }
    t
}

/// The roofline's points under its two ceilings.
fn roofline_table(r: &MemoryResults) -> Table {
    let rl = &r.roofline;
    let mut t = Table::new(
        format!(
            "roofline points (ceilings: {:.1} GB/s measured{}{})",
            rl.memory_gb_per_s,
            rl.compute_gflop_per_s
                .map_or(String::new(), |c| format!(", {c:.1} GFLOP/s best matmul")),
            rl.ridge_flop_per_byte
                .map_or(String::new(), |x| format!(", ridge at {x:.1} FLOP/byte")),
        ),
        &["point", "FLOP/byte", "GFLOP/s", "attainable GFLOP/s"],
    );
    for p in &rl.points {
        t.row([
            p.label.clone(),
            format!("{:.3}", p.flop_per_byte),
            format!("{:.2}", p.gflop_per_s),
            format!("{:.2}", p.attainable_gflop_per_s),
        ]);
    }
    t
}

/// The ladder's chart (`memory.svg`): GB/s against footprint.
pub fn chart(file: &ResultFile, r: &MemoryResults) -> anyhow::Result<String> {
    let l = r
        .ladder
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no ladder in this file"))?;
    let title = format!(
        "bandwidth ladder on {} ({})",
        file.device.name, file.device.label
    );
    super::ladder::chart(&title, l)
}

/// The memory experiment's tables and notes.
pub fn show(file: &ResultFile, r: &MemoryResults) -> Shown {
    Shown {
        tables: tables(r, &file.device.label),
        notes: notes(r),
    }
}

/// The copy ceiling, every operation and every transfer in long format:
/// machine, experiment, kind (ceiling, op, transfer), name, dtype_in,
/// dtype_out, bytes_moved, time_ms, time_source, gb_per_s, pct_of_ceiling.
pub fn records(machine: &str, r: &MemoryResults) -> Records {
    let header = [
        "machine",
        "experiment",
        "kind",
        "name",
        "dtype_in",
        "dtype_out",
        "bytes_moved",
        "time_ms",
        "time_source",
        "gb_per_s",
        "pct_of_ceiling",
    ];
    let source = |s: TimeSource| format!("{s:?}");
    let band = |kind: &str, b: &BandwidthRow| {
        vec![
            machine.to_string(),
            "memory".into(),
            kind.into(),
            b.op.clone(),
            b.dtype_in.clone(),
            b.dtype_out.clone(),
            b.bytes_moved.to_string(),
            num(Some(b.time_ms)),
            source(b.time_source),
            num(Some(b.gb_per_s)),
            num(Some(b.pct_of_ceiling)),
        ]
    };
    let mut rows = vec![band("ceiling", &r.ceiling)];
    rows.extend(r.ops.iter().map(|b| band("op", b)));
    rows.extend(r.transfers.rows.iter().map(|t| {
        vec![
            machine.to_string(),
            "memory".into(),
            "transfer".into(),
            format!("{:?} {:?}", t.direction, t.host_memory),
            String::new(),
            String::new(),
            t.bytes.to_string(),
            num(Some(t.time_ms)),
            source(t.time_source),
            num(Some(t.gb_per_s)),
            String::new(),
        ]
    }));
    Records::new(&header, rows)
}

/// memory's view.
impl super::View for MemoryResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        // The bandwidth ladder; none in files before 2.4.
        chart(file, self).ok()
    }

    fn section(&self, file: &ResultFile) -> super::Section {
        let mut own = super::Own::new(
            "The memory-bound operations and the matmul points of each file against the \
             ceilings that file measured: its bandwidth ladder (the copy past the caches is the \
             roofline's memory ceiling), then the roofline.",
        );
        // No roofline where no point was measured.
        if let Ok(svg) = roofline(file, self) {
            own.figures.push(("-roofline", svg));
        }
        super::Section::Own(own)
    }
}

/// The roofline: every memory-bound operation and matmul point against the
/// copy ceiling and the fastest matmul this file measured.
fn roofline(file: &ResultFile, m: &MemoryResults) -> anyhow::Result<String> {
    let r = &m.roofline;
    let dots: Vec<RooflineDot> = r
        .points
        .iter()
        .map(|p| RooflineDot {
            label: p.label.clone(),
            matmul: p.kind == "matmul",
            flop_per_byte: p.flop_per_byte,
            gflops: p.gflop_per_s,
        })
        .collect();
    let title = format!("roofline on {} ({})", file.device.name, file.device.label);
    roofline_svg(&title, r.memory_gb_per_s, r.compute_gflop_per_s, &dots)
}
