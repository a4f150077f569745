//! The overhead experiment shown: first calls, launch overhead, cold and hot
//! cache, as terminal tables.

use super::{num, Records, Shown};
use crate::export::table::Table;
use crate::schema::{OverheadResults, ResultFile};
use crate::units::mib;

/// The terminal tables of a run.
pub fn tables(r: &OverheadResults, device: &str) -> Vec<Table> {
    vec![first_calls(r, device), launch(r), cache(r)]
}

/// `-` for a value a file (or a CPU run) does not have.
fn opt(v: Option<f64>, f: &dyn Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

/// Each op's first call in the process against its warm calls.
fn first_calls(r: &OverheadResults, device: &str) -> Table {
    let jit = match &r.jit_cache {
        None => String::new(),
        Some(c) if c.disabled => "; the driver's JIT cache disabled".into(),
        Some(c) => format!(
            "; the driver's JIT cache {}: {} files in it before",
            if c.warm { "warm" } else { "cold" },
            c.files_before
        ),
    };
    let mut first = Table::new(
        format!(
            "first call in this process vs warm, on {device} (device opened in {:.1} ms{jit})",
            r.device_open_ms
        ),
        &[
            "op",
            "size",
            "first ms",
            "first GPU ms",
            "warm ms",
            "warm GPU ms",
            "first / warm",
        ],
    );
    for f in &r.first_calls {
        first.row([
            f.op.clone(),
            f.size.to_string(),
            format!("{:.3}", f.first_ms),
            opt(f.first_gpu_ms, &|v| format!("{v:.3}")),
            format!("{:.3}", f.warm.median_ms),
            opt(f.warm.gpu_median_ms, &|v| format!("{v:.3}")),
            format!("{:.1}x", f.first_over_warm),
        ]);
    }
    first
}

/// The smallest ops' time per call, gross and net of the clock's own cost.
fn launch(r: &OverheadResults) -> Table {
    let launch_title = match &r.clock_overhead {
        Some(o) => format!(
            "launch overhead: the smallest operations (net: less the clock's own {:.2} us{} per sample)",
            o.wall_median_ms * 1e3,
            o.gpu_median_ms
                .map_or(String::new(), |g| format!(", {:.2} us in events", g * 1e3)),
        ),
        None => "launch overhead: the smallest operations".into(),
    };
    let mut launch = Table::new(
        launch_title,
        &[
            "op",
            "mode",
            "calls/sample",
            "us/call",
            "net us/call",
            "GPU us/call",
            "net GPU us/call",
            "calls/s",
        ],
    );
    for l in &r.launch {
        launch.row([
            l.op.clone(),
            format!("{:?}", l.mode).to_lowercase(),
            l.calls_per_sample.to_string(),
            format!("{:.2}", l.per_call_us) + super::mark(l.timed.availability.as_ref()),
            opt(l.per_call_net_us, &|v| format!("{v:.2}")),
            opt(l.per_call_gpu_us, &|v| format!("{v:.2}")),
            opt(l.per_call_gpu_net_us, &|v| format!("{v:.2}")),
            format!("{:.0}", l.calls_per_s),
        ]);
    }
    launch
}

/// A matmul from a cache flushed before each sample against a hot one.
fn cache(r: &OverheadResults) -> Table {
    let c = &r.cache;
    let title = match (&c.cache, c.cache_bytes, c.flush_bytes) {
        (Some(name), Some(size), Some(flush)) => format!(
            "cold vs hot cache: f32 matmul, {name} {:.0} MiB, {:.0} MiB written before each cold sample",
            mib(size),
            mib(flush)
        ),
        _ => format!(
            "cold vs hot cache: skipped ({})",
            c.reason.as_deref().unwrap_or("")
        ),
    };
    let mut cache = Table::new(
        title,
        &[
            "size",
            "working set MiB",
            "fits",
            "hot ms",
            "cold ms",
            "cold / hot",
            "hot GPU ms",
            "cold GPU ms",
        ],
    );
    for row in &c.rows {
        cache.row([
            row.size.to_string(),
            format!("{:.2}", mib(row.working_set_bytes)),
            row.fits_in_cache.to_string(),
            format!("{:.3}", row.hot.median_ms),
            format!("{:.3}", row.cold.median_ms),
            format!("{:.2}x", row.cold_over_hot),
            opt(row.hot.gpu_median_ms, &|v| format!("{v:.3}")),
            opt(row.cold.gpu_median_ms, &|v| format!("{v:.3}")),
        ]);
    }
    cache
}

/// The overhead experiment's tables.
pub fn show(file: &ResultFile, r: &OverheadResults) -> Shown {
    Shown {
        tables: tables(r, &file.device.label),
        notes: Vec::new(),
    }
}

/// First calls, launch rows and cache rows in long format: machine,
/// experiment, section, op, size, mode, median_ms, gpu_median_ms, per_call_us,
/// per_call_net_us, ratio (first / warm, or cold / hot).
pub fn records(machine: &str, r: &OverheadResults) -> Records {
    let header = [
        "machine",
        "experiment",
        "section",
        "op",
        "size",
        "mode",
        "median_ms",
        "gpu_median_ms",
        "per_call_us",
        "per_call_net_us",
        "ratio",
    ];
    let row = |cells: [String; 9]| {
        let mut r = vec![machine.to_string(), "overhead".into()];
        r.extend(cells);
        r
    };
    let mut rows: Vec<Vec<String>> = r
        .first_calls
        .iter()
        .map(|f| {
            row([
                "first_call".into(),
                f.op.clone(),
                f.size.to_string(),
                "first".into(),
                num(Some(f.first_ms)),
                num(f.first_gpu_ms),
                String::new(),
                String::new(),
                num(Some(f.first_over_warm)),
            ])
        })
        .collect();
    rows.extend(r.launch.iter().map(|l| {
        row([
            "launch".into(),
            l.op.clone(),
            String::new(),
            format!("{:?}", l.mode).to_lowercase(),
            num(Some(l.timed.median_ms)),
            num(l.timed.gpu_median_ms),
            num(Some(l.per_call_us)),
            num(l.per_call_net_us),
            String::new(),
        ])
    }));
    rows.extend(r.cache.rows.iter().map(|c| {
        row([
            "cache".into(),
            "matmul".into(),
            c.size.to_string(),
            "cold".into(),
            num(Some(c.cold.median_ms)),
            num(c.cold.gpu_median_ms),
            String::new(),
            String::new(),
            num(Some(c.cold_over_hot)),
        ])
    }));
    Records::new(&header, rows)
}

/// overhead's view (no chart).
impl super::View for OverheadResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, _file: &ResultFile) -> Option<String> {
        None
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        super::Section::Own(super::Own::new(
            "A first call against warm ones, the launch overhead of the smallest ops, and a \
             matmul from a cold cache against a hot one (docs/measuring.md).",
        ))
    }
}
