//! `results/README.md`, generated from the result files so that no number in it
//! goes stale: [`load()`] reads every machine folder under `results/` through the
//! shared loader (candle-lab and PyTorch-reference files through the typed
//! schema, the reference lab's file as `compare` reads it; links, FIFOs and odd
//! names skipped), and [`build`], a pure function, turns them into
//! the README and its charts: a section per experiment with the machines side
//! by side, each figure linked to its file, and the commit and date of every
//! column. Same files in, same bytes out: nothing depends on the clock or on the
//! order a folder lists its files in.

use std::path::Path;

use anyhow::Result;

use crate::error::error_line;
use crate::export::svg::{bars_svg, BarSeries};
use crate::formulas::gflops;
use crate::precision::Precision;
use crate::read::entries::{self, Entry};
use crate::read::folder;
use crate::read::load::{self, Loaded};
use crate::schema::{Kind, ResultFile};

mod sections;
mod shown;

/// One JSON file under a machine folder.
#[derive(Clone, Debug)]
pub struct Source {
    /// The machine folder's name: "amd-epyc-2t".
    pub machine: String,
    /// The file's name: "matmul.json".
    pub file: String,
    pub content: Content,
}

/// What a file held.
#[derive(Clone, Debug)]
pub enum Content {
    /// A result file of schema 2.x (or 1, upgraded).
    Result(Box<ResultFile>),
    /// The reference lab's file: its rows as `compare` reads them, and the
    /// date it gives (`captured_date`).
    ReferenceLab { entries: Vec<Entry>, date: String },
    /// A file that could not be read, and why (listed, not used).
    Unreadable(String),
}

/// The README and the files it links to that are drawn from the JSON (charts,
/// the sweep's CSV), as paths under `results/` with their text.
#[derive(Clone, Debug, PartialEq)]
pub struct Built {
    pub readme: String,
    /// ("amd-epyc-2t/matmul.svg", svg text), in README order.
    pub files: Vec<(String, String)>,
}

/// What [`load()`] found: the files read, and what it skipped, one line each
/// (`PATH: skipped: why`), for the program to say.
#[derive(Debug)]
pub struct Listing {
    pub sources: Vec<Source>,
    pub skipped: Vec<String>,
}

/// Reads every `*.json` in every folder directly under `results`, folders and
/// files in name order, through the shared loader. Only real folders and regular
/// files with plain names are read ([`folder::list`]); the rest is skipped and
/// listed. A file the loader refuses is kept as [`Content::Unreadable`] with the
/// reason; a folder that cannot be listed is an error.
pub fn load(results: &Path) -> Result<Listing> {
    let machines = folder::list(results, folder::Kind::Folders)?;
    let mut listing = Listing {
        sources: Vec::new(),
        skipped: machines.skipped,
    };
    for machine in machines.names {
        let dir = results.join(&machine);
        let files = folder::list(&dir, folder::Kind::JsonFiles)?;
        listing.skipped.extend(files.skipped);
        for file in files.names {
            // The reason leaves the path out: the README must not depend on where
            // the results folder is.
            let content = load::read_text(&dir.join(&file))
                .and_then(|text| content(&text))
                .unwrap_or_else(|e| Content::Unreadable(error_line(&e)));
            listing.sources.push(Source {
                machine: machine.clone(),
                file,
                content,
            });
        }
    }
    Ok(listing)
}

/// A file's text, read by the shared loader: a result file, or the reference
/// lab's file with its rows and date.
fn content(text: &str) -> Result<Content> {
    Ok(match load::parse(text)? {
        Loaded::Result(file) => Content::Result(file),
        Loaded::ReferenceLab(value) => Content::ReferenceLab {
            entries: entries::reference_lab_entries(&value)?,
            date: value["captured_date"]
                .as_str()
                .unwrap_or("unknown")
                .to_string(),
        },
    })
}

impl Source {
    /// "amd-epyc-2t/matmul.json": the path under `results/`, and its link target.
    fn path(&self) -> String {
        format!("{}/{}", self.machine, self.file)
    }

    /// The path under `results/` of a chart drawn from this file: beside it, same name.
    fn chart_path(&self) -> String {
        let stem = self.file.strip_suffix(".json").unwrap_or(&self.file);
        format!("{}/{stem}.svg", self.machine)
    }

    /// The experiment, device, framework, commit and date, for the tables.
    fn facts(&self) -> Facts {
        match &self.content {
            Content::Result(f) => Facts {
                experiment: f.experiment.clone(),
                device: format!("{} ({})", f.device.name, f.device.label),
                framework: format!(
                    "{} {}",
                    f.environment.framework, f.environment.framework_version
                ),
                commit: f.environment.git_commit.clone().unwrap_or("-".into()),
                date: f.created_utc.clone(),
            },
            Content::ReferenceLab { entries, date } => Facts {
                experiment: "matmul".into(),
                device: entries.first().map_or("-".into(), |e| {
                    format!("{} ({})", e.device_name, e.device_kind)
                }),
                framework: entries.first().map_or("-".into(), |e| e.framework.clone()),
                commit: "- (not a candle-lab run)".into(),
                date: date.clone(),
            },
            Content::Unreadable(why) => Facts {
                experiment: format!("not read: {why}"),
                device: "-".into(),
                framework: "-".into(),
                commit: "-".into(),
                date: "-".into(),
            },
        }
    }

    /// The timed rows `compare` reads from this file.
    fn entries(&self) -> Vec<Entry> {
        match &self.content {
            Content::Result(f) => entries::entries(f),
            Content::ReferenceLab { entries, .. } => entries.clone(),
            Content::Unreadable(_) => Vec::new(),
        }
    }

    fn experiment(&self) -> Option<&str> {
        match &self.content {
            Content::Result(f) => Some(&f.experiment),
            Content::ReferenceLab { .. } => Some("matmul"),
            Content::Unreadable(_) => None,
        }
    }
}

struct Facts {
    experiment: String,
    device: String,
    framework: String,
    commit: String,
    date: String,
}

/// The README and its charts from `sources` (in [`load()`]'s order).
pub fn build(sources: &[Source]) -> Result<Built> {
    let mut built = Built {
        readme: String::new(),
        files: Vec::new(),
    };
    let out = &mut built.readme;
    out.push_str(HEADER);
    files_section(out, sources);
    bounds_section(out, sources);
    let of = |experiment: &str| -> Vec<&Source> {
        sources
            .iter()
            .filter(|s| s.experiment() == Some(experiment))
            .collect()
    };
    // The tables across machines, beside the reference lab's.
    matmul_section(&mut built, &of("matmul"))?;
    sections::cpu_vs_gpu(&mut built.readme, &of("cpu_vs_gpu"), &of("matmul"));
    // Then each experiment's files, as their views describe them.
    for kind in Kind::all() {
        shown::section(&mut built, kind, &of(kind.name()))?;
    }
    Ok(built)
}

const HEADER: &str = "# Results\n\n\
Generated by `just report` (`tools/report.rs`) from every machine folder under `results/`: do not \
edit it by hand, run `just report` after adding results. Each column or row names the file, \
commit and date its numbers came from. Times are medians of wall time per matmul with the device \
synchronized; GFLOP/s is 2n^3 over that median. A value marked (contended) was measured on a \
busy machine (docs/measuring.md): it understates the machine. Results vary \
run to run: compare ratios measured in one run.\n\n";

fn files_section(out: &mut String, sources: &[Source]) {
    out.push_str("## Files\n\n");
    out.push_str("| machine | file | experiment | device | framework | commit | date |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
    for s in sources {
        let f = s.facts();
        row(
            out,
            &[
                s.machine.clone(),
                link(&s.file, &s.path()),
                f.experiment,
                f.device,
                f.framework,
                f.commit,
                f.date,
            ],
        );
    }
    out.push('\n');
}

/// Every row that beats its bound by more than 5%, by file: a bound that is
/// beaten is the wrong bound (`crate::read::bounds`).
fn bounds_section(out: &mut String, sources: &[Source]) {
    let beaten: Vec<(String, Vec<String>)> = sources
        .iter()
        .filter_map(|s| match &s.content {
            Content::Result(f) => Some((s.path(), crate::read::bounds::beaten(f))),
            _ => None,
        })
        .filter(|(_, rows)| !rows.is_empty())
        .collect();
    out.push_str(
        "## Bounds

",
    );
    if beaten.is_empty() {
        out.push_str(&format!(
            "No row of any file is above {:.0}% of the bound it is held against.

",
            crate::schema::BEATEN_PCT
        ));
        return;
    }
    out.push_str(&format!(
        "Rows above {:.0}% of the bound they are held against: each bound is wrong (its threads, \
         footprint or cache level), not beaten.\n\n",
        crate::schema::BEATEN_PCT
    ));
    for (path, rows) in beaten {
        let rows = crate::export::markdown::text(&rows.join("; "));
        out.push_str(&format!("- {}: {rows}\n", link(&path, &path)));
    }
    out.push('\n');
}

/// Precision x file: median and GFLOP/s, one column per file; a bar chart per file.
fn matmul_section(built: &mut Built, files: &[&Source]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let out = &mut built.readme;
    out.push_str("## matmul\n\n");
    out.push_str(
        "Median ms and GFLOP/s per precision, one column per file; a GPU run's CPU fp32 \
         comparison is its `(cpu)` row.\n\n",
    );
    let entries: Vec<Vec<Entry>> = files.iter().map(|s| s.entries()).collect();
    let mut keys: Vec<(String, String)> = entries
        .iter()
        .flatten()
        .map(|e| (e.precision.clone(), e.device_kind.clone()))
        .collect();
    keys.sort_by_key(|(p, kind)| (kind != "cuda", precision_rank(p), p.clone()));
    keys.dedup();
    let mut header = vec!["precision (device)".to_string()];
    header.extend(files.iter().map(|s| link(&s.machine, &s.path())));
    row(out, &header);
    row(out, &vec!["---".to_string(); header.len()]);
    let facts: Vec<Facts> = files.iter().map(|s| s.facts()).collect();
    let size = |es: &Vec<Entry>| es.first().map_or("-".into(), |e| e.size.to_string());
    for (label, cells) in [
        (
            "device",
            facts.iter().map(|f| f.device.clone()).collect::<Vec<_>>(),
        ),
        ("size n", entries.iter().map(size).collect()),
        ("commit", facts.iter().map(|f| f.commit.clone()).collect()),
        ("date", facts.iter().map(|f| f.date.clone()).collect()),
    ] {
        row(out, &[vec![format!("*{label}*")], cells].concat());
    }
    for (precision, kind) in &keys {
        let mut cells = vec![format!("{precision} ({kind})")];
        for es in &entries {
            let e = es
                .iter()
                .find(|e| &e.precision == precision && &e.device_kind == kind);
            cells.push(e.map_or("-".into(), |e| {
                let mark = if e.contended { " (contended)" } else { "" };
                format!(
                    "{:.3} ms, {} GFLOP/s{mark}",
                    e.median_ms,
                    rate(entry_gflops(e))
                )
            }));
        }
        row(out, &cells);
    }
    out.push('\n');
    for (s, es) in files.iter().zip(&entries) {
        let Some(svg) = matmul_bars(s, es)? else {
            continue;
        };
        let path = s.chart_path();
        built.readme.push_str(&figure(
            &format!("matmul on {}", s.machine),
            &path,
            &s.path(),
        ));
        built.files.push((path, svg));
    }
    Ok(())
}

/// One bar per row of a matmul file; `None` when no row ran.
fn matmul_bars(s: &Source, entries: &[Entry]) -> Result<Option<String>> {
    let Some(first) = entries.first() else {
        return Ok(None);
    };
    let categories: Vec<String> = entries
        .iter()
        .map(|e| format!("{} ({})", e.precision, e.device_kind))
        .collect();
    let series = [BarSeries {
        label: s.machine.clone(),
        values: entries.iter().map(|e| Some(entry_gflops(e))).collect(),
    }];
    let title = format!(
        "matmul {n}x{n}, {} on {}",
        first.framework,
        first.device_name,
        n = first.size
    );
    Ok(Some(bars_svg(&title, &categories, &series)?))
}

fn entry_gflops(e: &Entry) -> f64 {
    gflops(e.size as usize, e.median_ms)
}

/// Throughput to about three significant digits, whole numbers from 1000.
fn rate(g: f64) -> String {
    if g >= 1000.0 {
        format!("{g:.0}")
    } else {
        format!("{g:.1}")
    }
}

/// Where a precision name sorts: the command line's order, unknown names last.
fn precision_rank(name: &str) -> usize {
    Precision::ALL
        .iter()
        .position(|p| p.name() == name)
        .unwrap_or(Precision::ALL.len())
}

/// An image linked to its own file, with the JSON it was drawn from.
fn figure(alt: &str, svg: &str, json: &str) -> String {
    format!("[![{alt}]({svg})]({svg})\n\nDrawn from [{json}]({json}).\n\n")
}

/// A Markdown link (a `|` in it is escaped by [`row`], as every cell's).
fn link(text: &str, target: &str) -> String {
    format!("[{text}]({target})")
}

/// One Markdown table row, made the one way (`export::markdown`).
fn row(out: &mut String, cells: &[String]) {
    out.push_str(&crate::export::markdown::row(cells));
}

#[cfg(test)]
mod tests;
