//! Views: each experiment's result turned into what a person reads (terminal
//! tables and notes: [`show`]) and into long-format records for the CSV
//! ([`records`]). They read result types and never measure. One module per
//! experiment; this one dispatches on the result's body.

pub mod basics;
pub mod block;
pub mod cpu_vs_gpu;
pub mod generate;
pub mod kernels;
pub mod ladder;
pub mod matmul;
pub mod matvec;
pub mod memory;
pub mod overhead;
pub mod precision;
pub mod sweep;

use crate::device::machine_slug;
use crate::export::table::Table;
use crate::schema::{Availability, Body, Kind, ResultFile};

/// What a result shows on the terminal: tables, then one line per note.
#[derive(Default)]
pub struct Shown {
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
}

/// Rows for the CSV: a header, then records of the same length, in long format
/// (one record per measured row, the file's machine and experiment in each).
#[derive(Clone, Debug, PartialEq)]
pub struct Records {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Records {
    pub fn new(header: &[&str], rows: Vec<Vec<String>>) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows,
        }
    }
}

/// A number for a CSV cell, written as the JSON writes it (shortest form that
/// reads back to the same f64: "2.0", "0.5", "1e-7"); empty when absent or not
/// finite.
pub fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => serde_json::to_string(&v).unwrap_or_default(),
        _ => String::new(),
    }
}

/// The machine folder a file's results belong to (`results/<machine>/`), from
/// the file itself.
pub fn machine(file: &ResultFile) -> String {
    let tag = file.environment.cpu.as_ref().and_then(|c| c.model_tag());
    machine_slug(
        file.device.kind,
        &file.device.name,
        file.environment.cpu_threads_available,
        tag.as_deref(),
    )
}

/// The suite's speed against Candle's with its 95% interval (the two timed
/// in turn: 2.5), or the ratio alone (an older file, or under 3 samples).
pub fn speedup(m: Option<&crate::schema::VariantMeasured>) -> String {
    match m.map(|m| (m.speedup_vs_candle, m.speedup_interval)) {
        Some((Some(s), Some(i))) => format!("{s:.2}x [{:.2}, {:.2}]", i.lo, i.hi),
        Some((Some(s), None)) => format!("{s:.2}x"),
        _ => "-".into(),
    }
}

/// The mark a contended row carries in a table cell: " contended", or nothing.
pub fn mark(a: Option<&Availability>) -> &'static str {
    if a.is_some_and(|a| a.contended) {
        " contended"
    } else {
        ""
    }
}

/// A CPU row's threads held in a table cell: "1.9 of 2", with " idle" when it
/// held under 75% of them ([`Availability::idle_threads`]); "-" unknown.
pub fn threads_cell(a: Option<&Availability>) -> String {
    let Some(a) = a else { return "-".into() };
    match (a.threads_held, a.row_kind) {
        (Some(h), crate::schema::RowKind::Cpu) => {
            let idle = if a.idle_threads().is_some() {
                " idle"
            } else {
                ""
            };
            format!("{h:.1} of {}{idle}", a.threads)
        }
        _ => "-".into(),
    }
}

/// Every timed row of `file` with its availability, named for a message
/// (the names and the clocks are the body's own: [`Body::timed_rows`]).
pub fn availabilities(file: &ResultFile) -> Vec<(String, &Availability)> {
    let timings = file.body.timed_rows().into_iter().flat_map(|r| r.timings);
    timings
        .filter_map(|t| Some((t.name, t.clock.availability?)))
        .collect()
}

/// One line when rows ran on a contended machine: how many, what was seen on
/// the first, and what to do. `None` when every judged row had the machine.
pub fn contention_warning(file: &ResultFile) -> Option<String> {
    let all = availabilities(file);
    let judged = all.iter().filter(|(_, a)| a.judged).count();
    let contended: Vec<&(String, &Availability)> =
        all.iter().filter(|(_, a)| a.contended).collect();
    let (name, first) = contended.first()?;
    Some(format!(
        "warning: {} of {judged} timed rows ran on a contended machine (first, {name}: {}): \
         their times understate this machine; stop other work and run again, or pass \
         --require-quiet to wait for a quiet machine",
        contended.len(),
        first.reasons.join("; ")
    ))
}

/// The tables and notes of `file`.
pub fn show(file: &ResultFile) -> Shown {
    match &file.body {
        Body::Basics(r) => basics::show(r),
        Body::Precision(r) => precision::show(r),
        Body::Matmul(r) => matmul::show(file, r),
        Body::CpuVsGpu(r) => cpu_vs_gpu::show(file, r),
        Body::Sweep(r) => sweep::show(file, r),
        Body::Memory(r) => memory::show(file, r),
        Body::Overhead(r) => overhead::show(file, r),
        Body::Block(r) => block::show(file, r),
        Body::Generate(r) => generate::show(file, r),
        Body::Kernels(r) => kernels::show(file, r),
    }
}

/// Whether results of `kind` have records (a CSV beside the JSON): known
/// before the run, so that the CSV's path is checked then. Every experiment
/// is named, so a new one must say.
pub fn has_records(kind: Kind) -> bool {
    match kind {
        Kind::Basics | Kind::Precision => false,
        Kind::Matmul
        | Kind::CpuVsGpu
        | Kind::Sweep
        | Kind::Memory
        | Kind::Overhead
        | Kind::Block
        | Kind::Generate
        | Kind::Kernels => true,
    }
}

/// Whether results of `kind` have a chart beside the JSON ([`chart`]).
pub fn has_chart(kind: Kind) -> bool {
    match kind {
        Kind::Sweep | Kind::Kernels | Kind::Generate | Kind::Memory => true,
        Kind::Basics
        | Kind::Precision
        | Kind::Matmul
        | Kind::CpuVsGpu
        | Kind::Overhead
        | Kind::Block => false,
    }
}

/// The SVG chart of `file` written beside its JSON, for the kinds
/// [`has_chart`] names; `None` while there is nothing to draw.
pub fn chart(file: &ResultFile) -> Option<String> {
    match &file.body {
        Body::Sweep(r) => {
            let title = sweep::title(&file.device, &file.environment, r);
            sweep::chart(&title, r).ok()
        }
        // None when no variant ran.
        Body::Kernels(r) => kernels::chart(file, r).ok(),
        Body::Generate(r) => generate::chart(file, r).ok(),
        // The bandwidth ladder; none in files before 2.4.
        Body::Memory(r) => memory::chart(file, r).ok(),
        // Named, not `_`: a new experiment must say whether it draws one.
        Body::Basics(_)
        | Body::Precision(_)
        | Body::Matmul(_)
        | Body::CpuVsGpu(_)
        | Body::Overhead(_)
        | Body::Block(_) => None,
    }
}

/// The CSV records of `file`, for the experiments with rows.
pub fn records(file: &ResultFile) -> Option<Records> {
    let m = machine(file);
    match &file.body {
        Body::Basics(_) | Body::Precision(_) => None,
        Body::Matmul(r) => Some(matmul::records(
            &m,
            "matmul",
            r.size,
            r.precisions.iter().chain(&r.cpu_fp32),
        )),
        Body::CpuVsGpu(r) => Some(matmul::records(
            &m,
            "cpu_vs_gpu",
            r.size,
            std::iter::once(&r.cpu).chain(&r.gpu),
        )),
        Body::Sweep(r) => Some(sweep::records(&m, r)),
        Body::Memory(r) => Some(memory::records(&m, r)),
        Body::Overhead(r) => Some(overhead::records(&m, r)),
        Body::Block(r) => Some(block::records(&m, r)),
        Body::Generate(r) => Some(generate::records(&m, r)),
        Body::Kernels(r) => Some(kernels::records(&m, r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_with_rows_has_records_and_only_those() {
        for e in Kind::all() {
            let rows = !matches!(e, Kind::Basics | Kind::Precision);
            assert_eq!(has_records(e), rows, "{e:?}");
        }
        assert_eq!(num(Some(0.5)), "0.5");
        assert_eq!(num(Some(2.0)), "2.0");
        assert_eq!(num(None), "");
        assert_eq!(num(Some(f64::NAN)), "");
    }
}
