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
pub mod scaling;
pub mod sweep;

use crate::device::machine_slug;
use crate::export::table::Table;
use crate::schema::{Availability, Body, ResultFile};

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
/// held under 75% of them ([`Availability::idle_threads`]), and ", 1.4 at
/// work" where the threads at work are known (the suite's kernels: Candle's
/// pool spins before it parks, so a thread held may be waiting); "-"
/// unknown.
pub fn threads_cell(a: Option<&Availability>) -> String {
    let Some(a) = a else { return "-".into() };
    match (a.threads_held, a.row_kind) {
        (Some(h), crate::schema::RowKind::Cpu) => {
            let idle = if a.idle_threads().is_some() {
                " idle"
            } else {
                ""
            };
            let work = a
                .threads_at_work
                .map_or(String::new(), |w| format!(", {w:.1} at work"));
            format!("{h:.1} of {}{idle}{work}", a.threads)
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

/// Which tables the terminal shows: those that fit
/// [`crate::export::table::TERMINAL_COLUMNS`] (the default), or the full ones
/// (generate's `--wide`). The README, CSV and JSON always hold the full ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Width {
    #[default]
    Compact,
    Wide,
}

/// One experiment's view of its results: what the terminal shows, the CSV's
/// records and the SVG chart. Each experiment's module implements it for its
/// result type, every method but [`View::compact`] required so that a new one
/// says what it draws; [`view`] is the one match from a body to its view.
pub trait View {
    /// The tables and notes, for the file this body is in: the full tables,
    /// as the README and `--wide` show them.
    fn show(&self, file: &ResultFile) -> Shown;
    /// What the terminal shows by default: tables that fit
    /// [`crate::export::table::TERMINAL_COLUMNS`], the free text a cell
    /// cannot hold in the notes. A view whose full tables fit already is its
    /// [`View::show`] (the default); generate's are 14 columns wide.
    fn compact(&self, file: &ResultFile) -> Shown {
        self.show(file)
    }
    /// The CSV records, for the experiments [`crate::schema::Kind::writes`] says have them.
    fn records(&self, machine: &str) -> Option<Records>;
    /// The SVG chart written beside the JSON, for the experiments
    /// [`crate::schema::Kind::writes`] says have one; `None` while there is nothing to draw.
    fn chart(&self, file: &ResultFile) -> Option<String>;
    /// What `results/README.md` shows of the file this body is in.
    fn section(&self, file: &ResultFile) -> Section;
}

/// What `results/README.md` shows of one result file. The report lays out
/// the sections; each experiment's view says what goes into its own, so that
/// the README and the terminal draw from one description of the tables.
pub enum Section {
    /// No subsection of its own: the file's facts are the same on every
    /// machine and are read under Files (basics, precision), or its rows stand
    /// across machines in the report's own tables, beside the reference lab's
    /// (matmul, cpu_vs_gpu).
    Across,
    /// A subsection for the file under its experiment's heading.
    Own(Own),
}

/// A file's own subsection: its tables and notes as the terminal shows them
/// ([`View::show`]), its chart ([`View::chart`]), then `figures`.
pub struct Own {
    /// The paragraph under the experiment's heading (one per experiment: the
    /// first file's is used).
    pub intro: &'static str,
    /// Words for the file's heading after "<framework> on <machine>": the
    /// model it ran, the shape it timed.
    pub heading: Option<String>,
    /// Charts for the README beyond the view's own, each with the suffix
    /// its file name takes after the JSON's stem ("-roofline").
    pub figures: Vec<(&'static str, String)>,
}

impl Own {
    /// A subsection with no words for its heading and no more charts.
    pub fn new(intro: &'static str) -> Self {
        Self {
            intro,
            heading: None,
            figures: Vec::new(),
        }
    }
}

/// The view of `body`: the one match over bodies here.
fn view(body: &Body) -> &dyn View {
    match body {
        Body::Basics(r) => r,
        Body::Precision(r) => r,
        Body::Matmul(r) => r,
        Body::CpuVsGpu(r) => r,
        Body::Sweep(r) => r,
        Body::Memory(r) => r,
        Body::Overhead(r) => r,
        Body::Block(r) => r,
        Body::Generate(r) => r,
        Body::Kernels(r) => r,
        Body::Scaling(r) => r,
    }
}

/// The tables and notes of `file`.
pub fn show(file: &ResultFile) -> Shown {
    view(&file.body).show(file)
}

/// What the terminal shows of `file` at `width`: [`show`]'s full tables, or
/// the compact ones.
pub fn terminal(file: &ResultFile, width: Width) -> Shown {
    match width {
        Width::Wide => show(file),
        Width::Compact => view(&file.body).compact(file),
    }
}

/// The SVG chart of `file`, for the kinds [`writes`] says have one; `None`
/// while there is nothing to draw.
pub fn chart(file: &ResultFile) -> Option<String> {
    view(&file.body).chart(file)
}

/// The CSV records of `file`, for the experiments with rows.
pub fn records(file: &ResultFile) -> Option<Records> {
    view(&file.body).records(&machine(file))
}

/// What `results/README.md` shows of `file`.
pub fn section(file: &ResultFile) -> Section {
    view(&file.body).section(file)
}

#[cfg(test)]
mod tests {
    /// A kernels variant's measurement for the views' tests: `gb_per_s` at
    /// `pct_of_ceiling`, one call a sample, exact, three 1 ms samples.
    pub(crate) fn measured_for_tests(
        gb_per_s: f64,
        pct_of_ceiling: f64,
    ) -> crate::schema::VariantMeasured {
        crate::schema::VariantMeasured {
            time_ms: 1.0,
            time_source: crate::schema::TimeSource::MedianMs,
            gb_per_s,
            pct_of_ceiling,
            speedup_vs_candle: None,
            speedup_interval: None,
            accuracy: crate::schema::KernelAccuracy {
                elements_checked: 0,
                max_rel_err: 0.0,
                mean_rel_err: 0.0,
            },
            calls_per_sample: 1,
            threads_held: None,
            timed: crate::telemetry::timed_at(&[1.0; 3], &[]),
        }
    }

    use super::*;
    use crate::schema::Kind;

    #[test]
    fn a_threads_cell_says_the_threads_at_work_where_they_are_known() {
        let held = |at_work: Option<f64>| {
            let mut a = serde_json::json!({
                "row_kind": "cpu", "wall_s": 1.0, "process_cpu_s": 2.0, "threads": 2,
                "threads_held": 2.0, "held_fraction": 1.0, "logical_cpus": 2,
                "others_cpu_pct": 0.0, "steal_pct": 0.0, "procs_running_before": 3,
                "procs_running_after": 3, "load_1m_before": 2.0, "load_1m_after": 2.0,
                "judged": true, "contended": false, "reasons": [],
            });
            if let Some(w) = at_work {
                a["threads_at_work"] = w.into();
            }
            serde_json::from_value::<Availability>(a).unwrap()
        };
        assert_eq!(threads_cell(Some(&held(None))), "2.0 of 2");
        assert_eq!(
            threads_cell(Some(&held(Some(1.43)))),
            "2.0 of 2, 1.4 at work"
        );
        assert_eq!(threads_cell(None), "-");
    }

    #[test]
    fn every_experiment_with_rows_has_records_and_only_those() {
        for e in Kind::all() {
            let rows = !matches!(e, Kind::Basics | Kind::Precision);
            assert_eq!(e.writes().records, rows, "{e:?}");
        }
        assert_eq!(num(Some(0.5)), "0.5");
        assert_eq!(num(Some(2.0)), "2.0");
        assert_eq!(num(None), "");
        assert_eq!(num(Some(f64::NAN)), "");
    }

    /// Each view writes what [`crate::schema::Kind::writes`] promised before the run: records
    /// exactly when it says, a chart never where it says none (one may be
    /// missing where there is nothing to draw), on every committed result.
    #[test]
    fn every_view_writes_what_its_kind_promised() {
        let files = crate::schema::tests::committed_results();
        let mut charted = std::collections::BTreeSet::new();
        for path in &files {
            let file = crate::schema::read(path).unwrap();
            let kind = Kind::from_name(file.body.experiment()).unwrap();
            let promised = kind.writes();
            let name = path.display();
            assert_eq!(records(&file).is_some(), promised.records, "{name}");
            let chart = chart(&file);
            assert!(promised.chart || chart.is_none(), "{name}");
            if chart.is_some() {
                charted.insert(file.experiment.clone());
            }
        }
        // The committed results draw every chart they promise.
        for kind in ["generate", "kernels", "memory", "block"] {
            assert!(
                charted.contains(kind),
                "no committed {kind} file drew its chart"
            );
        }
    }
}
