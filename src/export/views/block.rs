//! The block experiment shown: per phase the end-to-end rows with their
//! speedups beside the matmul-only and Amdahl's, where the time goes by op
//! class, fused kernels against composed ops, and the line that answers the
//! reference lab's caveat with this run's numbers.

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::precision::Precision;
use crate::schema::{BlockPhase, BlockResults, OpClass, Phase, ResultFile};
use crate::units::{mib, sci};

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

fn times(v: Option<f64>) -> String {
    opt(v, |x| format!("{x:.2}x"))
}

/// The block's tables and notes.
pub fn show(file: &ResultFile, r: &BlockResults) -> Shown {
    let s = &r.shape;
    let mut tables = Vec::new();
    for p in &r.phases {
        let title = format!(
            "block {}: batch {} x {} tokens, hidden {}, {} heads, MLP {} on {} ({})",
            p.phase.name(),
            s.batch,
            if p.phase == Phase::Decode { 1 } else { s.seq },
            s.hidden,
            s.heads,
            s.mlp,
            file.device.label,
            file.device.name
        );
        tables.push(rows_table(title, p, r.copy_ceiling_gb_per_s.is_some()));
        tables.push(parts_table(p));
    }
    let mut fused = Table::new(
        "fused kernels against the same math from primitive ops (prefill shapes)",
        &[
            "op",
            "precision",
            "fused ms",
            "composed ms",
            "composed / fused",
            "fused MiB",
            "composed MiB",
        ],
    );
    for f in &r.fused {
        fused.row([
            f.op.name().to_string(),
            f.precision.to_string(),
            format!("{:.3}", f.fused.median_ms),
            format!("{:.3}", f.composed.median_ms),
            format!("{:.2}x", f.composed_over_fused),
            format!("{:.1}", mib(f.fused_bytes)),
            format!("{:.1}", mib(f.composed_bytes)),
        ]);
    }
    tables.push(fused);
    let mut notes = vec![r.sizes_note.clone()];
    notes.extend(caveat(r));
    Shown { tables, notes }
}

fn rows_table(title: String, p: &BlockPhase, ceiling: bool) -> Table {
    let mut t = Table::new(
        title,
        &[
            "precision",
            "median ms",
            "tokens/s",
            "GFLOP/s",
            "GB/s",
            "% copy",
            "x fp32",
            "matmuls x fp32",
            "Amdahl x fp32",
            "matmul share",
            "parts / block",
            "peak MiB",
            "max rel err",
        ],
    );
    for row in &p.rows {
        let Some(m) = &row.measured else {
            t.row([
                row.precision.to_string(),
                format!("error: {}", row.error.as_deref().unwrap_or("")),
            ]);
            continue;
        };
        t.row([
            row.precision.to_string(),
            format!("{:.3}", m.end_to_end.median_ms)
                + super::mark(m.end_to_end.availability.as_ref()),
            format!("{:.0}", m.tokens_per_s),
            format!("{:.1}", m.gflop_per_s),
            format!("{:.1}", m.gb_per_s),
            if ceiling {
                opt(m.pct_of_copy_ceiling, |v| format!("{v:.0}%"))
            } else {
                "-".into()
            },
            times(m.speedup_vs_fp32),
            times(m.matmul_speedup_vs_fp32),
            times(m.amdahl_speedup_vs_fp32),
            format!("{:.0}%", 100.0 * m.matmul_share),
            format!("{:.2}", m.parts_sum_ms / m.end_to_end.median_ms),
            opt(m.peak_bytes.map(|b| b as f64), |b| {
                format!("{:.1}", b / 1048576.0)
            }),
            sci(m.accuracy.max_rel_err, 2),
        ]);
    }
    t
}

/// Each class's median per block call and its share of the parts' sum.
fn parts_table(p: &BlockPhase) -> Table {
    let mut header = vec!["precision"];
    header.extend(OpClass::ALL.iter().map(|c| c.name()));
    header.extend(["sum ms", "block ms"]);
    let mut t = Table::new(
        format!(
            "where the time goes, {}: ms per block call (share of the sum)",
            p.phase.name()
        ),
        &header,
    );
    for row in &p.rows {
        let Some(m) = &row.measured else { continue };
        let mut cells = vec![row.precision.to_string()];
        for class in OpClass::ALL {
            cells.push(match m.parts.iter().find(|x| x.class == class) {
                Some(x) => format!(
                    "{:.3} ({:.0}%)",
                    x.timed.median_ms,
                    100.0 * x.timed.median_ms / m.parts_sum_ms
                ),
                None => "-".into(),
            });
        }
        cells.push(format!("{:.3}", m.parts_sum_ms));
        cells.push(format!("{:.3}", m.end_to_end.median_ms));
        t.row(cells);
    }
    t
}

/// The reference lab's caveat answered: per narrow precision, the matmuls'
/// speedup over fp32 beside the whole block's, per phase.
pub fn caveat(r: &BlockResults) -> Vec<String> {
    let mut lines = Vec::new();
    for p in [Precision::F16, Precision::Bf16] {
        let per_phase: Vec<String> = r
            .phases
            .iter()
            .filter_map(|ph| {
                let m = ph
                    .rows
                    .iter()
                    .find(|x| x.precision == p)?
                    .measured
                    .as_ref()?;
                Some(format!(
                    "{}: matmuls {:.2}x, whole block {:.2}x (Amdahl from the parts {:.2}x)",
                    ph.phase.name(),
                    m.matmul_speedup_vs_fp32?,
                    m.speedup_vs_fp32?,
                    m.amdahl_speedup_vs_fp32?
                ))
            })
            .collect();
        if !per_phase.is_empty() {
            lines.push(format!("{p} against fp32: {}", per_phase.join("; ")));
        }
    }
    lines
}

/// One record per phase and precision: machine, experiment, phase, precision,
/// status, median_ms, tokens_per_s, gflop_per_s, gb_per_s, speedup_vs_fp32,
/// matmul_speedup_vs_fp32, amdahl_speedup_vs_fp32, matmul_share, max_rel_err,
/// then each op class's median ms (`part_linear_ms`, ...).
pub fn records(machine: &str, r: &BlockResults) -> Records {
    let mut header: Vec<String> = [
        "machine",
        "experiment",
        "phase",
        "precision",
        "status",
        "median_ms",
        "tokens_per_s",
        "gflop_per_s",
        "gb_per_s",
        "speedup_vs_fp32",
        "matmul_speedup_vs_fp32",
        "amdahl_speedup_vs_fp32",
        "matmul_share",
        "max_rel_err",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        OpClass::ALL
            .iter()
            .map(|c| format!("part_{}_ms", c.name().replace([' ', '-'], "_"))),
    );
    let mut rows = Vec::new();
    for p in &r.phases {
        for row in &p.rows {
            let m = row.measured.as_ref();
            let mut cells = vec![
                machine.to_string(),
                "block".into(),
                p.phase.name().into(),
                row.precision.name().into(),
                if m.is_some() { "ok" } else { "error" }.into(),
                num(m.map(|m| m.end_to_end.median_ms)),
                num(m.map(|m| m.tokens_per_s)),
                num(m.map(|m| m.gflop_per_s)),
                num(m.map(|m| m.gb_per_s)),
                num(m.and_then(|m| m.speedup_vs_fp32)),
                num(m.and_then(|m| m.matmul_speedup_vs_fp32)),
                num(m.and_then(|m| m.amdahl_speedup_vs_fp32)),
                num(m.map(|m| m.matmul_share)),
                num(m.map(|m| m.accuracy.max_rel_err)),
            ];
            for class in OpClass::ALL {
                let part = m.and_then(|m| m.parts.iter().find(|x| x.class == class));
                cells.push(num(part.map(|x| x.timed.median_ms)));
            }
            rows.push(cells);
        }
    }
    Records { header, rows }
}
