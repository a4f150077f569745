//! The bandwidth ladder shown: a table of every point (kernel, threads,
//! footprint, the level it lives in, calls per sample, time per call, GB/s)
//! and a chart of GB/s against footprint, one line per kernel and thread
//! count, as likwid-bench and BabelStream present theirs; and the few words
//! a row's bound is named by ("copy 2t L3 48.1 GB/s"), and the notes that
//! say what its figures past the caches are: the cores' limit or memory's,
//! each store kind's copy, fixed parts against parts taken as threads finish.

use anyhow::Result;

use crate::export::lines::{log2_lines_svg, Line, SeriesLabelPosition};
use crate::export::table::Table;
use crate::schema::{Bound, Ladder, LadderKernel};
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
    let mut header = vec![
        "kernel".to_string(),
        "stores".to_string(),
        "threads".to_string(),
    ];
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
        let mut cells = vec![
            kernel.name().to_string(),
            kernel.stores().to_string(),
            threads.to_string(),
        ];
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

/// What the ladder's figures past the caches are, in words: whether the
/// pool's read there is the cores' limit (each core keeps so many misses in
/// flight: N threads read N times one thread's) or memory's own; the copy
/// with each store kind against the read; fixed parts against parts taken
/// as threads finish, for each kernel. None where the points are missing
/// (a GPU, one thread, a ladder capped inside the caches).
pub fn notes(l: &Ladder) -> Vec<String> {
    // Memory's points: at a level no cache is named by (each kernel's
    // arrays are fitted to whole elements, so their footprints differ).
    let in_memory = |p: &&crate::schema::LadderPoint| !l.caches.iter().any(|c| c.name == p.level);
    if !l
        .points
        .iter()
        .filter(|p| p.standard)
        .any(|p| in_memory(&p))
    {
        return Vec::new();
    }
    let at = |kernel: LadderKernel, threads: usize, chunked: bool| {
        l.points
            .iter()
            .filter(in_memory)
            .filter(|p| (p.kernel, p.threads, p.chunked) == (kernel, threads, chunked))
            .map(|p| p.gb_per_s)
            .reduce(f64::max)
    };
    let n = l.pool_threads;
    let mut out = Vec::new();
    if let (Some(one), Some(all)) = (
        at(LadderKernel::Read, 1, false),
        at(LadderKernel::Read, n, false),
    ) {
        if n > 1 {
            out.push(cores_or_memory(one, all, n));
        }
    }
    let copies: Vec<String> = [LadderKernel::Copy, LadderKernel::CopyNt]
        .into_iter()
        .filter_map(|k| {
            Some(format!(
                "{:.1} with {} stores",
                at(k, n, false)?,
                k.stores()
            ))
        })
        .collect();
    if copies.len() == 2 {
        let read = at(LadderKernel::Read, n, false)
            .map_or(String::new(), |r| format!(" (the read {r:.1})"));
        out.push(format!(
            "past the caches the copy on {n} thread(s) moves {}{read}: an ordinary store reads \
             its line before writing it (three lines of traffic for the two counted), a \
             non-temporal one does not, so a copy can outrun the read; an op is held to the \
             store kind it uses (the norms, softmax and adds ordinary, a memcpy copy either)",
            copies.join(" and ")
        ));
    }
    let parts: Vec<String> = LadderKernel::CPU
        .into_iter()
        .filter_map(|k| {
            let (fixed, chunked) = (at(k, n, false)?, at(k, n, true)?);
            Some(format!(
                "{} {fixed:.1}/{chunked:.1} ({:+.0}%)",
                k.name(),
                100.0 * (chunked / fixed - 1.0)
            ))
        })
        .collect();
    if !parts.is_empty() && n > 1 {
        out.push(format!(
            "past the caches on {n} threads, fixed parts against parts taken as threads finish \
             (GB/s): {}",
            parts.join(", ")
        ));
    }
    out
}

/// The pool's read past the caches against `n` times one thread's: within
/// 15% of it, the figure is what the cores keep in flight, not memory's limit.
fn cores_or_memory(one: f64, all: f64, n: usize) -> String {
    let scaled = n as f64 * one;
    if all >= 0.85 * scaled {
        format!(
            "DRAM here is the cores' limit, not memory's: past the caches {n} threads read \
             {all:.1} GB/s and one {one:.1} ({scaled:.1} for {n}): each core reads as fast as \
             the misses it keeps in flight allow, so more cores would read more"
        )
    } else {
        format!(
            "DRAM here is memory's limit: past the caches {n} threads read {all:.1} GB/s, \
             under {n} x one thread's {one:.1} ({scaled:.1}): the cores wait on memory itself"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::LadderPoint;

    fn point(kernel: LadderKernel, threads: usize, chunked: bool, gb_per_s: f64) -> LadderPoint {
        // A triad's three arrays fit the footprint a few bytes short.
        let short = if kernel == LadderKernel::Triad { 32 } else { 0 };
        LadderPoint {
            kernel,
            threads,
            footprint_bytes: (2 << 30) - short,
            level: "DRAM".into(),
            standard: !chunked,
            bytes_moved: 2 << 30,
            calls_per_sample: 1,
            time_per_call_ms: 1.0,
            gb_per_s,
            chunked,
            from_fastest_sample: true,
            timed: crate::telemetry::timed_at(&[1.0; 3], &[]),
        }
    }

    #[test]
    fn notes_name_the_cores_limit_the_store_kinds_and_the_parts() {
        use LadderKernel::{Copy, CopyNt, Read, Triad};
        let ladder = |two_threads_read: f64| Ladder {
            caches: vec![crate::schema::CacheLevel {
                name: "L3".into(),
                bytes: 480 << 20,
                shared_by: 2,
            }],
            pool_threads: 2,
            clock_overhead_ms: 0.0,
            points: vec![
                point(Read, 1, false, 17.0),
                point(Read, 2, false, two_threads_read),
                point(Read, 2, true, 33.0),
                point(Copy, 2, false, 26.0),
                point(Copy, 2, true, 25.0),
                point(CopyNt, 2, false, 46.0),
                point(CopyNt, 2, true, 45.0),
                point(Triad, 2, false, 30.0),
                point(Triad, 2, true, 29.0),
            ],
        };
        let n = notes(&ladder(33.9));
        assert!(n[0].starts_with("DRAM here is the cores' limit"), "{n:?}");
        assert!(n[0].contains("2 threads read 33.9 GB/s and one 17.0 (34.0 for 2)"));
        assert!(n[1].contains(
            "26.0 with ordinary stores and 46.0 with non-temporal stores (the read 33.9)"
        ));
        assert!(n[2].contains("read 33.9/33.0 (-3%)"), "{n:?}");
        assert!(
            n[2].contains("copy 26.0/25.0 (-4%), copy nt 46.0/45.0 (-2%)"),
            "{n:?}"
        );
        // Two threads that read little more than one: memory's own limit.
        let n = notes(&ladder(20.0));
        assert!(n[0].starts_with("DRAM here is memory's limit"), "{n:?}");
        // No point past the caches: nothing to say.
        let mut inside = ladder(33.9);
        inside.points.iter_mut().for_each(|p| p.level = "L3".into());
        assert!(notes(&inside).is_empty());
    }
}
