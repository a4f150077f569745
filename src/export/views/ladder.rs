//! The bandwidth ladder shown: a table of every point (kernel, threads,
//! footprint, the level it lives in, calls per sample, time per call, GB/s)
//! and a chart of GB/s against footprint, one line per kernel and thread
//! count, as likwid-bench and BabelStream present theirs; and the few words
//! a row's bound is named by ("copy 2t L3 48.1 GB/s").

use anyhow::Result;

use crate::export::lines::{log2_lines_svg, Line, SeriesLabelPosition};
use crate::export::table::Table;
use crate::schema::{Bound, Ladder};
use crate::units::size;

/// A bound in a table's cell: its kernel, threads ("2t*": parts taken as
/// threads finish), level and GB/s.
pub fn bound_cell(b: &Bound) -> String {
    format!(
        "{} {}t{} {} {:.1}",
        b.kernel.name(),
        b.threads,
        if b.chunked { "*" } else { "" },
        b.level,
        b.gb_per_s
    )
}

/// The ladder's own points as a grid: a row per kernel and thread count, a
/// column per level (GB/s, the footprint beside it), as likwid-bench and
/// BabelStream tabulate theirs. The points rows asked for at their own
/// footprints are in the file and in each row's bound.
pub fn table(l: &Ladder, device: &str) -> Table {
    let caches: Vec<String> = l
        .caches
        .iter()
        .map(|c| {
            let shared = if c.shared_by > 1 {
                format!(" shared by {}", c.shared_by)
            } else {
                String::new()
            };
            format!("{} {}{shared}", c.name, size(c.bytes))
        })
        .collect();
    let standard: Vec<_> = l.points.iter().filter(|p| p.standard).collect();
    let mut levels: Vec<String> = Vec::new();
    for p in &standard {
        if !levels.contains(&p.level) {
            levels.push(p.level.clone());
        }
    }
    let mut header = vec!["kernel".to_string(), "threads".to_string()];
    header.extend(levels.iter().map(|l| format!("{l} GB/s")));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(
        format!(
            "bandwidth ladder on {device} ({}; pool of {} threads; each cell GB/s at the \
             footprint beside it, every array together; the clock's {:.0} ns subtracted)",
            if caches.is_empty() {
                "no cache reported".to_string()
            } else {
                caches.join(", ")
            },
            l.pool_threads,
            l.clock_overhead_ms * 1e6
        ),
        &header,
    );
    let mut keys: Vec<(crate::schema::LadderKernel, usize)> = Vec::new();
    for p in &standard {
        if !keys.contains(&(p.kernel, p.threads)) {
            keys.push((p.kernel, p.threads));
        }
    }
    for (kernel, threads) in keys {
        let mut cells = vec![kernel.name().to_string(), threads.to_string()];
        for level in &levels {
            let cell = standard
                .iter()
                .find(|p| p.kernel == kernel && p.threads == threads && &p.level == level)
                .map_or("-".into(), |p| {
                    format!("{:.1} ({})", p.gb_per_s, size(p.footprint_bytes))
                        + super::mark(p.timed.availability.as_ref())
                });
            cells.push(cell);
        }
        t.row(cells);
    }
    t
}

/// GB/s against footprint (log2), one line per kernel and thread count.
pub fn chart(title: &str, l: &Ladder) -> Result<String> {
    let mut lines: Vec<Line> = Vec::new();
    for p in l.points.iter().filter(|p| p.standard) {
        let label = format!(
            "{} on {} thread{}",
            p.kernel.name(),
            p.threads,
            if p.threads == 1 { "" } else { "s" }
        );
        let point = (p.footprint_bytes as f64, p.gb_per_s);
        match lines.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => lines.push(Line {
                label,
                points: vec![point],
                level: None,
            }),
        }
    }
    for s in &mut lines {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    log2_lines_svg(
        title,
        "footprint (every array together), log2 scale",
        "GB/s",
        &|x| size(x.round() as u64),
        &lines,
        SeriesLabelPosition::UpperRight,
    )
}
