//! The kernels experiment shown: per op a table of every case and precision
//! (the suite's kernel, Candle's op, the composed form and the ladder's bound
//! for the op's bytes, timed in turn), notes that hold the run to its targets
//! (85% of the ceiling on the case past the caches, never slower than
//! Candle's op) and
//! say how far each miss is, long-format CSV records, and the chart of % of
//! the ceiling per kernel; the matrix-vector rows' table, notes and records
//! are [`super::matvec`]'s.

use anyhow::Result;

mod roofline;

use super::{num, Records, Shown};
use crate::export::svg::{percent_bars_svg, BarSeries};
use crate::export::table::Table;
use crate::precision::Precision;
use crate::schema::{
    Implementation, KernelOp, KernelRow, KernelsResults, ResultFile, VariantMeasured, BEATEN_PCT,
    DRAM_CASE,
};
use crate::units::mib;
use roofline::{compute_bound, large_target, pct_of_roofline, roofline_cell};

/// The share of the copy ceiling a memory-bound kernel is held to on the
/// case past the caches (issue 25's target).
pub const TARGET_PCT: f64 = 85.0;
/// The cases the ceiling target applies to, per precision the first a file
/// has at it: the one sized to live in memory (fp32 only), then the large
/// one (which a big last-level cache holds).
pub const TARGET_CASES: [&str; 2] = [DRAM_CASE, "large"];

/// The rows the ceiling target and the chart read: per precision, those of
/// the first of [`TARGET_CASES`] with rows at it (so the 16-bit kernels are
/// held to the large case where the dram case runs fp32 alone); a file with
/// neither, the case that moves the most bytes.
fn target_rows(r: &KernelsResults) -> Vec<&KernelRow> {
    let case_for = |p: Precision| {
        TARGET_CASES
            .into_iter()
            .find(|c| r.rows.iter().any(|x| x.case == *c && x.precision == p))
    };
    let rows: Vec<&KernelRow> = r
        .rows
        .iter()
        .filter(|x| case_for(x.precision) == Some(x.case.as_str()))
        .collect();
    if !rows.is_empty() {
        return rows;
    }
    let biggest = r.rows.iter().max_by_key(|x| x.bytes_moved);
    let case = biggest.map(|x| x.case.as_str()).unwrap_or_default();
    r.rows.iter().filter(|x| x.case == case).collect()
}

/// "the dram case at fp32 and the large case at fp16, bf16": where `rows`
/// are, for a note.
fn where_held(rows: &[&KernelRow]) -> String {
    let mut cases: Vec<(&str, Vec<String>)> = Vec::new();
    for x in rows {
        let p = x.precision.to_string();
        match cases.iter_mut().find(|(c, _)| *c == x.case) {
            Some((_, ps)) if !ps.contains(&p) => ps.push(p),
            Some(_) => {}
            None => cases.push((&x.case, vec![p])),
        }
    }
    let parts: Vec<String> = cases
        .iter()
        .map(|(c, ps)| format!("the {c} case at {}", ps.join(", ")))
        .collect();
    parts.join(" and ")
}

fn ms(m: Option<&VariantMeasured>) -> String {
    m.map_or("-".into(), |m| {
        format!("{:.4}", m.time_ms) + super::mark(m.timed.availability.as_ref())
    })
}

fn pct(m: Option<&VariantMeasured>) -> String {
    m.map_or("-".into(), |m| format!("{:.0}%", m.pct_of_ceiling))
}

/// The kernels' tables and notes.
pub fn show(file: &ResultFile, r: &KernelsResults) -> Shown {
    let pytorch = r
        .rows
        .iter()
        .any(|row| row.measured(Implementation::Pytorch).is_some());
    let who = if pytorch { "pytorch" } else { "lab" };
    let (own_ms, own_gb, own_pct, own_vs) = (
        format!("{who} ms"),
        format!("{who} GB/s"),
        format!("{who} % ceiling"),
        format!("{who} vs candle"),
    );
    let own_roof = format!("{who} % roofline, binds");
    let mut tables = Vec::new();
    for op in KernelOp::ALL {
        let rows: Vec<&KernelRow> = r.rows.iter().filter(|x| x.op == op).collect();
        if rows.is_empty() {
            continue;
        }
        let mut t = Table::new(
            format!(
                "{}: {}, the composed form, and the bandwidth ladder at the same footprint on {}, \
                 timed in turn (time per call from {}, K calls a sample, the clock's cost \
                 subtracted; lab vs candle with its 95% interval; a bound's \"2t*\": its threads \
                 took parts as they finished, as the ops share theirs; the roofline: the lower of \
                 the bound and the suite's kernel on data its cores' caches hold, and what binds)",
                op.name(),
                if pytorch {
                    "PyTorch's op"
                } else {
                    "the suite's kernel, Candle's op"
                },
                file.device.label,
                time_from(rows[0])
            ),
            &[
                "case",
                "dtype",
                "shape",
                "MiB moved",
                "bound (kernel, threads, level, GB/s)",
                &own_ms,
                "candle ms",
                "composed ms",
                &own_gb,
                &own_pct,
                "candle % ceiling",
                &own_roof,
                &own_vs,
            ],
        );
        t.align_left(&[0, 1, 2]);
        for row in rows {
            let lab = row.measured(Implementation::Lab);
            let candle = row.measured(Implementation::Candle);
            let own = own(row);
            t.row([
                row.case.clone(),
                row.precision.to_string(),
                shape(&row.shape),
                format!("{:.2}", mib(row.bytes_moved)),
                row.ceiling.bound.as_ref().map_or_else(
                    || format!("{:.1}", row.ceiling.gb_per_s),
                    super::ladder::bound_cell,
                ),
                ms(own),
                ms(candle),
                ms(row.measured(Implementation::Composed)),
                own.map_or("-".into(), |m| format!("{:.1}", m.gb_per_s)),
                pct(own),
                pct(candle),
                roofline_cell(row, own),
                super::speedup(lab),
            ]);
        }
        tables.push(t);
    }
    tables.extend(super::matvec::table(&file.device.label, r.cpu_threads, r));
    Shown {
        tables,
        notes: notes(r),
    }
}

/// The row's own implementation: the suite's kernel in Candle's file,
/// PyTorch's op in the twin's.
fn own(row: &KernelRow) -> Option<&VariantMeasured> {
    row.measured(Implementation::Lab)
        .or_else(|| row.measured(Implementation::Pytorch))
}

fn time_from(row: &KernelRow) -> &'static str {
    match row.ceiling.time_source {
        crate::schema::TimeSource::GpuMedianMs => "CUDA events",
        crate::schema::TimeSource::MedianMs => "the wall clock",
    }
}

fn shape(dims: &[usize]) -> String {
    let s: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    s.join("x")
}

/// What the tables cannot say by themselves: the targets, met or missed and by
/// how much, failed variants, and a target case that fits in the cache.
pub fn notes(r: &KernelsResults) -> Vec<String> {
    let large: Vec<&KernelRow> = target_rows(r)
        .into_iter()
        .filter(|x| TARGET_CASES.contains(&x.case.as_str()))
        .collect();
    let case = where_held(&large);
    let case = case.as_str();
    let mut notes: Vec<String> = [
        large_target(case, &large),
        compute_bound(case, &large),
        never_slower(r),
    ]
    .into_iter()
    .flatten()
    .collect();
    notes.extend(failed(r));
    notes.extend(large_in_cache(r, &large));
    notes.extend(held_memory(r));
    notes.extend(super::matvec::notes(r));
    notes.extend(beaten(r));
    notes
}

/// "Never slower than Candle's op", over the rows compared.
fn never_slower(r: &KernelsResults) -> Option<String> {
    let rows = r.rows.iter().filter_map(|row| {
        let m = row.measured(Implementation::Lab)?;
        Some((
            format!("{} {} {}", row.op.name(), row.case, row.precision),
            m,
        ))
    });
    super::matvec::slower_note("target", rows)
}

/// A line per variant that failed, with its error.
fn failed(r: &KernelsResults) -> Vec<String> {
    let mut notes = Vec::new();
    for row in &r.rows {
        for v in row.variants.iter().filter(|v| v.measured.is_none()) {
            notes.push(format!(
                "{} {} {} {}: failed ({})",
                row.op.name(),
                row.case,
                row.precision,
                v.implementation.name(),
                v.error.as_deref().unwrap_or("no error recorded")
            ));
        }
    }
    notes
}

/// How the dram case's outputs were allocated, where the file says.
fn held_memory(r: &KernelsResults) -> Option<String> {
    let dram = r.rows.iter().any(|x| x.case == DRAM_CASE);
    let line = match r.freed_memory_kept? {
        true => {
            "note: the dram case's outputs are memory the process already holds (malloc kept \
                 what was freed), as the ladder's arrays are: its rows time the op, not the \
                 kernel faulting a fresh output in on each call"
        }
        false => {
            "note: the dram case's outputs were fresh mappings, faulted in on each call: its \
                  rows time the kernel's page zeroing too, which the ladder's arrays never pay"
        }
    };
    dram.then(|| line.to_string())
}

/// A note for the target rows that fit in the cache this machine reports.
fn large_in_cache(r: &KernelsResults, large: &[&KernelRow]) -> Option<String> {
    let cache = r.cache_bytes?;
    let inside: Vec<&KernelRow> = large
        .iter()
        .copied()
        .filter(|x| x.bytes_moved <= cache)
        .collect();
    let biggest = inside.iter().map(|x| x.bytes_moved).max()?;
    Some(format!(
        "note: {}: up to {:.0} MiB, fit in the {:.0} MiB cache: their rates are partly the \
         cache's (each bound, measured at the same footprint, says its level)",
        where_held(&inside),
        mib(biggest),
        mib(cache)
    ))
}

/// The warning for variants above [`BEATEN_PCT`] of their bound.
fn beaten(r: &KernelsResults) -> Option<String> {
    let beaten: Vec<String> = r
        .rows
        .iter()
        .flat_map(|row| {
            row.variants.iter().filter_map(move |v| {
                let m = v.measured.as_ref()?;
                let pct = m.pct_of_ceiling.max(pct_of_roofline(row, m));
                (pct > BEATEN_PCT).then(|| {
                    format!(
                        "{} {} {} {} {pct:.0}% of {}",
                        row.op.name(),
                        row.case,
                        row.precision,
                        v.implementation.name(),
                        row.roofline().1
                    )
                })
            })
        })
        .collect();
    (!beaten.is_empty()).then(|| {
        format!(
            "warning: {} variants beat their bound by more than 5% (a bound that is beaten is the \
             wrong bound): {}",
            beaten.len(),
            beaten.join(", ")
        )
    })
}

/// Every variant and every ceiling in long format: machine, experiment, op,
/// case, precision, implementation ("ceiling" for the copy), shape,
/// bytes_moved, time_ms, time_source, gb_per_s, pct_of_ceiling,
/// speedup_vs_candle, max_rel_err, pct_of_roofline, binds.
pub fn records(machine: &str, r: &KernelsResults) -> Records {
    let header = [
        "machine",
        "experiment",
        "op",
        "case",
        "precision",
        "implementation",
        "shape",
        "bytes_moved",
        "time_ms",
        "time_source",
        "gb_per_s",
        "pct_of_ceiling",
        "speedup_vs_candle",
        "max_rel_err",
        "pct_of_roofline",
        "binds",
    ];
    let mut rows = Vec::new();
    for row in &r.rows {
        let binds = row.roofline().1;
        let start = |implementation: &str| {
            vec![
                machine.to_string(),
                "kernels".into(),
                row.op.name().into(),
                row.case.clone(),
                row.precision.to_string(),
                implementation.to_string(),
                shape(&row.shape),
                row.bytes_moved.to_string(),
            ]
        };
        let c = &row.ceiling;
        let mut ceiling = start("ceiling");
        ceiling.extend([
            num(Some(c.time_ms)),
            format!("{:?}", c.time_source),
            num(Some(c.gb_per_s)),
            num(Some(100.0)),
            String::new(),
            String::new(),
            String::new(),
            binds.clone(),
        ]);
        rows.push(ceiling);
        for v in &row.variants {
            let mut rec = start(v.implementation.name());
            let m = v.measured.as_ref();
            rec.extend([
                num(m.map(|m| m.time_ms)),
                m.map_or(String::new(), |m| format!("{:?}", m.time_source)),
                num(m.map(|m| m.gb_per_s)),
                num(m.map(|m| m.pct_of_ceiling)),
                num(m.and_then(|m| m.speedup_vs_candle)),
                num(m.map(|m| m.accuracy.max_rel_err)),
                num(m.map(|m| pct_of_roofline(row, m))),
                binds.clone(),
            ]);
            rows.push(rec);
        }
    }
    rows.extend(super::matvec::records(machine, r));
    Records::new(&header, rows)
}

/// The chart beside the JSON: % of the copy ceiling per op at the target
/// rows ([`target_rows`]: per precision its case past the caches), one bar
/// per implementation and precision.
pub fn chart(file: &ResultFile, r: &KernelsResults) -> Result<String> {
    let rows = target_rows(r);
    let case = where_held(&rows);
    let ops: Vec<KernelOp> = KernelOp::ALL
        .into_iter()
        .filter(|op| rows.iter().any(|x| x.op == *op))
        .collect();
    let mut precisions: Vec<Precision> = Vec::new();
    for row in &rows {
        if !precisions.contains(&row.precision) {
            precisions.push(row.precision);
        }
    }
    let mut series = Vec::new();
    for imp in [
        Implementation::Lab,
        Implementation::Pytorch,
        Implementation::Candle,
    ] {
        for &p in &precisions {
            let values: Vec<Option<f64>> = ops
                .iter()
                .map(|&op| {
                    let row = rows.iter().find(|x| x.op == op && x.precision == p)?;
                    Some(row.measured(imp)?.pct_of_ceiling)
                })
                .collect();
            if values.iter().any(Option::is_some) {
                series.push(BarSeries {
                    label: format!("{} {p}", imp.name()),
                    values,
                });
            }
        }
    }
    let categories: Vec<String> = ops.iter().map(|op| op.name().to_string()).collect();
    let title = format!(
        "% of the bound at {case}, {} ({}); target {TARGET_PCT:.0}%",
        file.device.name, file.environment.framework
    );
    percent_bars_svg(&title, &categories, &series)
}

/// The kernels' view.
impl super::View for KernelsResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        // None when no variant ran.
        chart(file, self).ok()
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // Its tables' titles do not say the runs per variant.
        super::Section::Own(super::Own {
            heading: Some(format!(
                "{} warm-up and {} timed runs per variant",
                self.warmup, self.iters
            )),
            ..super::Own::new(
                "The suite's own kernels (`src/kernels`) beside Candle's op, the same math from \
                 primitive ops and the bandwidth ladder's bound for the same bytes, timed in \
                 turn, per op, shape and precision, and the matrix-vector rows \
                 (docs/kernels.md). In PyTorch's file its op takes the kernel's column.",
            )
        })
    }
}
