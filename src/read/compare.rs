//! `compare`: reads result files back and says, row by row, how a file B's
//! times compare with a baseline A's. Rows pair up by experiment, size,
//! precision and device kind; each pair gets the ratio of medians B/A (time,
//! so above 1 means B takes longer) and, when both sides kept their samples, a
//! verdict FAST / SLOW / SAME from a bootstrap confidence interval of that
//! ratio. Everything here but [`load`] is pure: rows in, rows and text out.
//! [`load`] is the one place that knows the file layouts (schema 2.x through
//! `serde_json::Value`, and the reference lab's file), so that it can be swapped
//! for the typed schema without touching the statistics.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::Value;

use crate::export::table::Table;
use crate::schema::{self, Body, DeviceKind, ResultFile};
use crate::stats::quantile_sorted;

/// Half-width of the "no real difference" band around a ratio of 1: ±5%.
/// The bootstrap interval measures the noise within one run only; between two
/// runs of the same binary on the same machine the median also drifts (clock
/// boost, heat, other processes, memory placement) by a few percent, which no
/// resampling of one run can see. 5% sits above that drift on a quiet machine
/// and below the differences worth acting on (a precision or build change that
/// matters moves a matmul by tens of percent). The band is symmetric in ratio
/// space, 1/1.05 to 1.05, so swapping A and B swaps FAST and SLOW.
pub const BAND: f64 = 0.05;
/// Two-sided confidence level of the bootstrap interval.
pub const CONFIDENCE: f64 = 0.95;
/// Bootstrap resamples per row: the interval's ends move by well under 1% of
/// the ratio between seeds at this count.
pub const RESAMPLES: usize = 10_000;
/// Fixed seed, fresh for every row: a rerun prints the same intervals, and a
/// row's interval does not depend on which other rows the files hold.
pub const SEED: u64 = 0x5EED_C0DE;
/// Fewer samples than this on a side give no verdict: the median of one or
/// two samples has no spread a resample could show.
pub const MIN_SAMPLES: usize = 3;

/// One timed result, whatever file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// "matmul", "cpu_vs_gpu".
    pub experiment: String,
    pub size: u64,
    /// "fp32", "fp16", ...
    pub precision: String,
    /// "cpu" or "cuda": keys a GPU run's CPU comparison apart from its GPU rows.
    pub device_kind: String,
    /// CPU model or GPU name.
    pub device_name: String,
    /// "candle 0.11.1", "pytorch 2.13.0+cu130".
    pub framework: String,
    pub median_ms: f64,
    /// Every timed wall-clock sample, when the file kept them.
    pub samples_ms: Option<Vec<f64>>,
}

impl Entry {
    fn key(&self) -> (&str, u64, &str, &str) {
        (
            &self.experiment,
            self.size,
            &self.precision,
            &self.device_kind,
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// B takes less time than A, by more than the band.
    Fast,
    /// B takes more time than A, by more than the band.
    Slow,
    /// No difference beyond the band is shown.
    Same,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Fast => "FAST",
            Verdict::Slow => "SLOW",
            Verdict::Same => "SAME",
        })
    }
}

/// A confidence interval of the ratio B/A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// One line of a comparison: a pair, or an entry that only one file has.
#[derive(Clone, Debug, PartialEq)]
pub enum Row {
    Both {
        a: Entry,
        b: Entry,
        /// B's median over A's.
        ratio: f64,
        /// `None` when a side has fewer than [`MIN_SAMPLES`] samples.
        interval: Option<Interval>,
        verdict: Option<Verdict>,
    },
    OnlyA(Entry),
    OnlyB(Entry),
}

/// Pairs `a`'s entries with `b`'s by experiment, size, precision and device
/// kind, in `a`'s order, then lists what only `b` has. A key that appears twice
/// in one file pairs with its first match.
pub fn compare(a: &[Entry], b: &[Entry]) -> Vec<Row> {
    let mut rows: Vec<Row> = a
        .iter()
        .map(|ea| match b.iter().find(|eb| eb.key() == ea.key()) {
            Some(eb) => pair(ea, eb),
            None => Row::OnlyA(ea.clone()),
        })
        .collect();
    rows.extend(
        b.iter()
            .filter(|eb| !a.iter().any(|ea| ea.key() == eb.key()))
            .map(|eb| Row::OnlyB(eb.clone())),
    );
    rows
}

fn pair(a: &Entry, b: &Entry) -> Row {
    let interval = match (&a.samples_ms, &b.samples_ms) {
        (Some(sa), Some(sb)) => bootstrap_ratio(sa, sb),
        _ => None,
    };
    Row::Both {
        ratio: b.median_ms / a.median_ms,
        verdict: interval.map(verdict),
        interval,
        a: a.clone(),
        b: b.clone(),
    }
}

/// The [`CONFIDENCE`] percentile-bootstrap interval of median(b) / median(a):
/// [`RESAMPLES`] times, resample each side with replacement (same size as the
/// side) and take the ratio of the two medians; the interval is the middle
/// [`CONFIDENCE`] share of those ratios. `None` when a side has fewer than
/// [`MIN_SAMPLES`] samples or one that is not a positive finite time.
pub fn bootstrap_ratio(a: &[f64], b: &[f64]) -> Option<Interval> {
    let usable = |s: &[f64]| s.len() >= MIN_SAMPLES && s.iter().all(|x| x.is_finite() && *x > 0.0);
    if !usable(a) || !usable(b) {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut scratch = Vec::with_capacity(a.len().max(b.len()));
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let mb = resampled_median(b, &mut rng, &mut scratch);
            mb / resampled_median(a, &mut rng, &mut scratch)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval {
        lo: quantile_sorted(&ratios, tail),
        hi: quantile_sorted(&ratios, 1.0 - tail),
    })
}

fn resampled_median(samples: &[f64], rng: &mut StdRng, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend((0..samples.len()).map(|_| samples[rng.random_range(0..samples.len())]));
    scratch.sort_by(f64::total_cmp);
    quantile_sorted(scratch, 0.5)
}

/// SLOW when the whole interval lies above 1 + [`BAND`], FAST when it lies
/// below 1 / (1 + [`BAND`]), SAME when it reaches into that band.
pub fn verdict(interval: Interval) -> Verdict {
    let upper = 1.0 + BAND;
    if interval.lo > upper {
        Verdict::Slow
    } else if interval.hi < 1.0 / upper {
        Verdict::Fast
    } else {
        Verdict::Same
    }
}

/// `--fail-if-slower PCT`: true when `row` is SLOW and B's median is more than
/// `pct` percent above A's. Rows without a verdict never trip it.
pub fn slower_than(row: &Row, pct: f64) -> bool {
    matches!(row, Row::Both { verdict: Some(Verdict::Slow), ratio, .. } if *ratio > 1.0 + pct / 100.0)
}

/// How the verdict is reached, printed under every table and in `--help`.
pub fn method() -> String {
    let pct = BAND * 100.0;
    format!(
        "B/A is B's median time over A's (A is the baseline): above 1, B takes longer.\n\
         Rows pair up by experiment, size, precision and device kind (cpu, cuda).\n\
         Verdict: a {conf:.0}% percentile-bootstrap confidence interval of B/A ({RESAMPLES} resamples \
         of each side's wall-time samples, seed {SEED:#x}: a rerun prints the same).\n\
         SLOW: the whole interval is above {hi:.2} (B takes more than {pct:.0}% longer); \
         FAST: it is below 1/{hi:.2} = {lo:.3} (B takes less time); SAME: it reaches into that band.\n\
         The ±{pct:.0}% band covers the drift between runs (clock boost, heat, other processes) that \
         resampling one run cannot see.\n\
         ratio only: a side has fewer than {MIN_SAMPLES} samples (the reference lab's file keeps medians only).",
        conf = CONFIDENCE * 100.0,
        hi = 1.0 + BAND,
        lo = 1.0 / (1.0 + BAND),
    )
}

/// [`method`] as printed under the tables: plain lines, or Markdown lines that
/// keep their breaks.
pub fn render_method(format: Format) -> String {
    match format {
        Format::Table => format!("{}\n", method()),
        Format::Md => method()
            .lines()
            .map(|l| format!("{}  \n", escape(l)))
            .collect(),
    }
}

/// How to print a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A terminal table.
    Table,
    /// GitHub Markdown.
    Md,
}

/// The rows of B against A, with the names the user gave the files.
pub struct Comparison {
    pub a_name: String,
    pub b_name: String,
    a_label: String,
    b_label: String,
    pub rows: Vec<Row>,
}

impl Comparison {
    pub fn new(a_name: &str, a: &[Entry], b_name: &str, b: &[Entry]) -> Self {
        Self {
            a_name: a_name.to_string(),
            b_name: b_name.to_string(),
            a_label: label(a),
            b_label: label(b),
            rows: compare(a, b),
        }
    }

    /// True when some pair ran on two differently named devices.
    pub fn different_devices(&self) -> bool {
        self.rows
            .iter()
            .any(|r| matches!(r, Row::Both { a, b, .. } if a.device_name != b.device_name))
    }

    pub fn render(&self, format: Format) -> String {
        let md = format == Format::Md;
        let mut notes = vec![
            format!("A = {}: {}", self.a_name, self.a_label),
            format!("B = {}: {}", self.b_name, self.b_label),
        ];
        if self.different_devices() {
            notes.push(
                "A and B ran on different devices (device column: A's / B's): \
                 the ratios compare machines, not only code."
                    .to_string(),
            );
        }
        let only = |f: fn(&Row) -> bool| self.rows.iter().filter(|r| f(r)).count();
        let (only_a, only_b) = (
            only(|r| matches!(r, Row::OnlyA(_))),
            only(|r| matches!(r, Row::OnlyB(_))),
        );
        if only_a + only_b > 0 {
            notes.push(format!(
                "{only_a} row(s) only in A, {only_b} only in B: listed, not compared."
            ));
        }
        let table = self.table(md);
        if md {
            let notes: String = notes.iter().map(|n| format!("- {}\n", escape(n))).collect();
            format!("{}\n{notes}\n", table.markdown())
        } else {
            format!("{table}{}\n\n", notes.join("\n"))
        }
    }

    fn table(&self, md: bool) -> Table {
        let ci = format!("{:.0}% CI", CONFIDENCE * 100.0);
        let header = [
            "experiment",
            "size",
            "precision",
            "device",
            "A median ms",
            "B median ms",
            "B/A",
            ci.as_str(),
            "verdict",
        ];
        let title = format!("{} vs {}", self.b_name, self.a_name);
        let mut table = Table::new(if md { escape(&title) } else { title }, &header);
        for row in &self.rows {
            let cells: Vec<String> = match row {
                Row::Both {
                    a,
                    b,
                    ratio,
                    interval,
                    verdict,
                } => {
                    let device = if a.device_name == b.device_name {
                        a.device_name.clone()
                    } else {
                        format!("{} / {}", a.device_name, b.device_name)
                    };
                    let mut cells = key_cells(a, device);
                    cells.extend([
                        format!("{:.3}", a.median_ms),
                        format!("{:.3}", b.median_ms),
                        format!("{ratio:.3} ({:+.1}%)", (ratio - 1.0) * 100.0),
                        interval.map_or("-".into(), |i| format!("{:.3}-{:.3}", i.lo, i.hi)),
                        verdict.map_or("ratio only".into(), |v| v.to_string()),
                    ]);
                    cells
                }
                Row::OnlyA(a) => {
                    let mut cells = key_cells(a, a.device_name.clone());
                    cells.extend([format!("{:.3}", a.median_ms), "-".into()]);
                    cells.extend(["-".into(), "-".into(), "A only".into()]);
                    cells
                }
                Row::OnlyB(b) => {
                    let mut cells = key_cells(b, b.device_name.clone());
                    cells.extend(["-".into(), format!("{:.3}", b.median_ms)]);
                    cells.extend(["-".into(), "-".into(), "B only".into()]);
                    cells
                }
            };
            table.row(cells.iter().map(|c| if md { escape(c) } else { c.clone() }));
        }
        table
    }
}

fn key_cells(e: &Entry, device: String) -> Vec<String> {
    vec![
        e.experiment.clone(),
        e.size.to_string(),
        e.precision.clone(),
        device,
    ]
}

/// "candle 0.11.1 on NVIDIA H200, AMD EPYC": the frameworks and devices of a file.
fn label(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return "no rows compare reads (it reads matmul and cpu_vs_gpu results)".to_string();
    }
    let distinct = |field: fn(&Entry) -> &str| {
        let mut seen: Vec<&str> = Vec::new();
        for e in entries {
            if !seen.contains(&field(e)) {
                seen.push(field(e));
            }
        }
        seen.join(", ")
    };
    format!(
        "{} on {}",
        distinct(|e| &e.framework),
        distinct(|e| &e.device_name)
    )
}

/// A `|` would end a Markdown table cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The entries of one result file: the `matmul`, `cpu_vs_gpu` or `sweep` rows that ran
/// ("status": "ok") of a candle-lab file, read through the typed schema (which
/// checks its version), or the reference lab's medians. Other experiments hold
/// no timed rows and give none.
pub fn load(path: &Path) -> Result<Vec<Entry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    if value.get("schema_version").is_none() {
        return reference_lab_entries(&value).with_context(|| path.display().to_string());
    }
    let file = schema::from_json(&text).with_context(|| path.display().to_string())?;
    Ok(entries(&file))
}

/// The timed rows of a result file that ran, as entries.
pub fn entries(file: &ResultFile) -> Vec<Entry> {
    let env = &file.environment;
    // A debug build's times say little about the framework: the label says so.
    let debug = if env.profile.as_deref() == Some("debug") {
        " (debug build)"
    } else {
        ""
    };
    let framework = format!("{} {}{debug}", env.framework, env.framework_version);
    let entry = |size: usize, row: &schema::Row, kind: DeviceKind| {
        let m = row.measured.as_ref()?;
        let device_name = match kind {
            DeviceKind::Cpu => env.cpu_model.clone(),
            DeviceKind::Cuda => file.device.name.clone(),
        };
        Some(Entry {
            experiment: file.experiment.clone(),
            size: size as u64,
            precision: row.precision.name().to_string(),
            device_kind: kind.as_str().to_string(),
            device_name,
            framework: framework.clone(),
            median_ms: m.median_ms,
            samples_ms: Some(m.samples_wall_ms.clone()).filter(|s| !s.is_empty()),
        })
    };
    match &file.body {
        Body::Matmul(m) => m
            .precisions
            .iter()
            .filter_map(|row| entry(m.size, row, m.device))
            .chain(
                m.cpu_fp32
                    .iter()
                    .filter_map(|row| entry(m.size, row, DeviceKind::Cpu)),
            )
            .collect(),
        Body::CpuVsGpu(c) => entry(c.size, &c.cpu, DeviceKind::Cpu)
            .into_iter()
            .chain(
                c.gpu
                    .iter()
                    .filter_map(|row| entry(c.size, row, DeviceKind::Cuda)),
            )
            .collect(),
        Body::Sweep(s) => s
            .points
            .iter()
            .filter_map(|p| entry(p.size, &p.row, s.device))
            .collect(),
        // Each phase its own experiment, so prefill pairs with prefill.
        Body::Block(b) => b
            .phases
            .iter()
            .flat_map(|p| p.rows.iter().map(move |row| (p, row)))
            .filter_map(|(p, row)| {
                let m = row.measured.as_ref()?;
                Some(Entry {
                    experiment: format!("block {}", p.phase.name()),
                    size: b.shape.seq as u64,
                    precision: row.precision.name().to_string(),
                    device_kind: file.device.kind.as_str().to_string(),
                    device_name: file.device.name.clone(),
                    framework: framework.clone(),
                    median_ms: m.end_to_end.median_ms,
                    samples_ms: Some(m.end_to_end.samples_wall_ms.clone())
                        .filter(|s| !s.is_empty()),
                })
            })
            .collect(),
        Body::Basics(_) | Body::Precision(_) | Body::Memory(_) | Body::Overhead(_) => Vec::new(),
    }
}

/// The reference lab's `week05-results-gb10.json`: no schema version, a
/// `hardware` object and a `matmul` object with medians only.
pub fn reference_lab_entries(file: &Value) -> Result<Vec<Entry>> {
    let hardware = |key: &str| file.pointer(&format!("/hardware/{key}"))?.as_str();
    let (Some(gpu), Some(torch)) = (hardware("device"), hardware("torch")) else {
        bail!("no schema_version, and not the reference lab's file: not a result compare reads");
    };
    let framework = format!("pytorch {torch}");
    let source = Source {
        experiment: "matmul",
        size: whole(file, "/matmul/size")?,
        framework: &framework,
    };
    let kind = text(file, "/matmul/device")?;
    let mut out = Vec::new();
    for (i, row) in list(file, "/matmul/precisions")?.iter().enumerate() {
        out.extend(source.entry(row, &format!("/matmul/precisions/{i}"), kind, gpu)?);
    }
    if file.pointer("/matmul/cpu_fp32_ms").is_some() {
        out.push(Entry {
            precision: "fp32".to_string(),
            device_kind: "cpu".to_string(),
            device_name: format!("{gpu}'s CPU"),
            median_ms: number(file, "/matmul/cpu_fp32_ms")?,
            samples_ms: None,
            experiment: source.experiment.to_string(),
            size: source.size,
            framework: framework.clone(),
        });
    }
    Ok(out)
}

/// What every entry of one file shares.
struct Source<'a> {
    experiment: &'a str,
    size: u64,
    framework: &'a str,
}

impl Source<'_> {
    /// The entry of one result row (found at `at`), `None` when it did not run.
    fn entry(&self, row: &Value, at: &str, kind: &str, device: &str) -> Result<Option<Entry>> {
        let read = || -> Result<Option<Entry>> {
            // The reference lab's rows have no status: all of them ran.
            if row.get("status").is_some_and(|s| s != "ok") {
                return Ok(None);
            }
            let median_ms = number(row, "/median_ms")?;
            ensure!(median_ms > 0.0, "median_ms is {median_ms}, not a time");
            let samples_ms = row
                .get("samples_wall_ms")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>())
                .filter(|s| !s.is_empty());
            Ok(Some(Entry {
                experiment: self.experiment.to_string(),
                size: self.size,
                precision: text(row, "/precision")?.to_string(),
                device_kind: kind.to_string(),
                device_name: device.to_string(),
                framework: self.framework.to_string(),
                median_ms,
                samples_ms,
            }))
        };
        read().with_context(|| at.to_string())
    }
}

fn text<'v>(v: &'v Value, pointer: &str) -> Result<&'v str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("{pointer} is missing or not text"))
}

fn number(v: &Value, pointer: &str) -> Result<f64> {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .with_context(|| format!("{pointer} is missing or not a number"))
}

fn whole(v: &Value, pointer: &str) -> Result<u64> {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .with_context(|| format!("{pointer} is missing or not a whole number"))
}

fn list<'v>(v: &'v Value, pointer: &str) -> Result<&'v Vec<Value>> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .with_context(|| format!("{pointer} is missing or not a list"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Twenty samples around `median` with a ±2% spread, in a fixed shuffled order.
    fn samples(median: f64) -> Vec<f64> {
        (0..20)
            .map(|i| median * (1.0 + 0.002 * f64::from((i * 7) % 21 - 10)))
            .collect()
    }

    fn entry(precision: &str, kind: &str, median: f64, with_samples: bool) -> Entry {
        Entry {
            experiment: "matmul".into(),
            size: 256,
            precision: precision.into(),
            device_kind: kind.into(),
            device_name: "AMD EPYC".into(),
            framework: "candle 0.11.1".into(),
            median_ms: median,
            samples_ms: with_samples.then(|| samples(median)),
        }
    }

    fn verdicts(rows: &[Row]) -> Vec<Option<Verdict>> {
        rows.iter()
            .map(|r| match r {
                Row::Both { verdict, .. } => *verdict,
                _ => panic!("unpaired row {r:?}"),
            })
            .collect()
    }

    #[test]
    fn a_file_against_itself_is_same() {
        let a = [
            entry("fp32", "cpu", 10.0, true),
            entry("fp16", "cpu", 30.0, true),
        ];
        let rows = compare(&a, &a);
        assert_eq!(verdicts(&rows), [Some(Verdict::Same); 2]);
        for r in &rows {
            let Row::Both {
                ratio, interval, ..
            } = r
            else {
                unreachable!()
            };
            let i = interval.unwrap();
            assert_eq!(*ratio, 1.0);
            assert!(i.lo < 1.0 && i.hi > 1.0, "{i:?}");
        }
    }

    #[test]
    fn thirty_percent_more_time_is_slow_and_less_is_fast() {
        let a = [entry("fp32", "cpu", 10.0, true)];
        let b = [entry("fp32", "cpu", 13.0, true)];
        let rows = compare(&a, &b);
        assert_eq!(verdicts(&rows), [Some(Verdict::Slow)]);
        let Row::Both {
            ratio, interval, ..
        } = &rows[0]
        else {
            unreachable!()
        };
        let i = interval.unwrap();
        assert!((ratio - 1.3).abs() < 1e-12);
        assert!(i.lo <= 1.3 && 1.3 <= i.hi && i.lo > 1.05, "{i:?}");
        assert_eq!(verdicts(&compare(&b, &a)), [Some(Verdict::Fast)]);
    }

    #[test]
    fn a_small_shift_inside_the_band_is_same() {
        let a = [entry("fp32", "cpu", 10.0, true)];
        let b = [entry("fp32", "cpu", 10.2, true)];
        assert_eq!(verdicts(&compare(&a, &b)), [Some(Verdict::Same)]);
    }

    #[test]
    fn without_samples_there_is_a_ratio_and_no_verdict() {
        let a = [entry("fp32", "cpu", 10.0, true)];
        let b = [entry("fp32", "cpu", 20.0, false)];
        let rows = compare(&a, &b);
        assert_eq!(verdicts(&rows), [None]);
        assert!(matches!(rows[0], Row::Both { ratio, interval: None, .. } if ratio == 2.0));
        // Too few samples count as none.
        assert_eq!(bootstrap_ratio(&[1.0, 1.1], &samples(1.0)), None);
        assert_eq!(bootstrap_ratio(&samples(1.0), &[1.0, f64::NAN, 1.0]), None);
    }

    #[test]
    fn the_interval_is_reproducible_and_holds_the_ratio() {
        let (a, b) = (samples(10.0), samples(12.0));
        let first = bootstrap_ratio(&a, &b).unwrap();
        assert_eq!(Some(first), bootstrap_ratio(&a, &b));
        assert!(first.lo < 1.2 && 1.2 < first.hi, "{first:?}");
        // Wider spread, wider interval.
        let noisy: Vec<f64> = a.iter().map(|x| 10.0 + (x - 10.0) * 10.0).collect();
        let wide = bootstrap_ratio(&noisy, &b).unwrap();
        assert!(
            wide.hi - wide.lo > first.hi - first.lo,
            "{wide:?} {first:?}"
        );
    }

    #[test]
    fn verdict_follows_the_band() {
        let v = |lo, hi| verdict(Interval { lo, hi });
        assert_eq!(v(1.06, 1.2), Verdict::Slow);
        assert_eq!(v(1.04, 1.2), Verdict::Same, "reaches into the band");
        assert_eq!(v(0.8, 0.95), Verdict::Fast);
        assert_eq!(v(0.8, 0.96), Verdict::Same, "1/1.05 = 0.952");
        assert_eq!(v(0.8, 1.3), Verdict::Same, "straddles the band");
        assert_eq!(v(0.99, 1.01), Verdict::Same);
    }

    #[test]
    fn rows_on_one_side_are_listed_and_devices_kinds_kept_apart() {
        let a = [
            entry("fp32", "cuda", 1.0, true),
            entry("fp32", "cpu", 100.0, true),
            entry("bf16", "cuda", 0.5, true),
        ];
        let b = [
            entry("fp32", "cpu", 100.0, true),
            entry("fp64", "cuda", 4.0, true),
        ];
        let rows = compare(&a, &b);
        assert!(
            matches!(&rows[0], Row::OnlyA(e) if e.device_kind == "cuda" && e.precision == "fp32")
        );
        assert!(
            matches!(&rows[1], Row::Both { a, verdict: Some(Verdict::Same), .. } if a.device_kind == "cpu")
        );
        assert!(matches!(&rows[2], Row::OnlyA(e) if e.precision == "bf16"));
        assert!(matches!(&rows[3], Row::OnlyB(e) if e.precision == "fp64"));
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn fail_if_slower_is_a_threshold_on_slow_rows() {
        let a = [entry("fp32", "cpu", 10.0, true)];
        let slow = &compare(&a, &[entry("fp32", "cpu", 13.0, true)])[0];
        assert!(slower_than(slow, 10.0));
        assert!(slower_than(slow, 29.0));
        assert!(!slower_than(slow, 50.0));
        let same = &compare(&a, &a)[0];
        assert!(!slower_than(same, 0.0), "SAME never trips it");
        let unsure = &compare(&a, &[entry("fp32", "cpu", 13.0, false)])[0];
        assert!(!slower_than(unsure, 0.0), "no verdict, no failure");
        assert!(!slower_than(
            &Row::OnlyB(entry("fp32", "cpu", 99.0, true)),
            0.0
        ));
    }

    #[test]
    fn rendering_names_both_files_devices_and_the_method() {
        let a = [entry("fp32", "cpu", 10.0, true)];
        let mut gpu = entry("fp32", "cpu", 13.0, true);
        gpu.device_name = "Other CPU".into();
        let c = Comparison::new("a.json", &a, "b|c.json", &[gpu]);
        assert!(c.different_devices());
        let text = c.render(Format::Table);
        for want in [
            "a.json",
            "b|c.json",
            "AMD EPYC / Other CPU",
            "different devices",
            "SLOW",
            "1.300 (+30.0%)",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
        let md = c.render(Format::Md);
        assert!(md.starts_with("### b\\|c.json vs a.json\n"), "{md}");
        let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 3, "header, rule, one row:\n{md}");
        assert!(table[1].starts_with("|--"), "{md}");
        assert!(render_method(Format::Table).contains("±5%"));
        assert!(!Comparison::new("a", &a, "a", &a)
            .render(Format::Table)
            .contains("different devices"));
    }

    /// A schema 2.0 file on an H200 whose CPU is an AMD EPYC.
    fn schema2(experiment: &str, body: Value) -> Value {
        let mut file = json!({
            "schema_version": "2.0",
            "experiment": experiment,
            "created_utc": "2026-11-30T06:00:00Z",
            "command": "test",
            "environment": {
                "framework": "candle", "framework_version": "0.11.1", "suite_version": "0.1.0",
                "git_commit": null, "os": "Debian", "arch": "x86_64", "cpu_model": "AMD EPYC",
                "cpu_threads_available": 2, "compute_threads": 2, "build_features": [],
                "target_features": [], "profile": "release", "cuda_build_version": null
            },
            "device": {"kind": "cuda", "label": "cuda:0", "name": "NVIDIA H200", "chosen_because": "test"},
        });
        file[experiment] = body;
        file
    }

    /// A row that ran, with three samples at `median` ms.
    fn row(precision: &str, median: f64) -> Value {
        let summary = serde_json::to_value(crate::stats::summarize(&[median; 3])).unwrap();
        json!({"precision": precision, "dtype": "f32", "element_bytes": 4,
               "gemm_reduced_precision": false, "memory_source": "test",
               "status": "ok", "error": null, "median_ms": median, "gflops": 1.0,
               "payload_mib": 1.0, "payload_bytes": 1048576, "wall_ms": summary,
               "samples_wall_ms": [median, median, median], "samples_gpu_ms": [],
               "accuracy": {"rows_checked": 1, "max_rel_err": 0.0, "mean_rel_err": 0.0}})
    }

    fn matmul_body(device: &str, precisions: Vec<Value>, cpu_fp32: Value) -> Value {
        json!({"size": 4096, "warmup": 5, "iters": 20, "device": device,
               "precisions": precisions, "cpu_fp32": cpu_fp32, "flops_per_matmul": 1.0})
    }

    fn entries_of(file: &Value) -> Result<Vec<Entry>> {
        Ok(entries(&schema::from_json(&file.to_string())?))
    }

    #[test]
    fn reads_schema2_matmul_and_cpu_vs_gpu() {
        let failed = json!({"precision": "fp64", "dtype": "f64", "element_bytes": 8,
                            "gemm_reduced_precision": false, "memory_source": "test",
                            "status": "error", "error": "out of memory"});
        let matmul = schema2(
            "matmul",
            matmul_body(
                "cuda",
                vec![row("fp32", 7.0), failed, row("bf16", 1.5)],
                row("fp32", 300.0),
            ),
        );
        let got = entries_of(&matmul).unwrap();
        let summary: Vec<_> = got
            .iter()
            .map(|e| {
                (
                    e.precision.as_str(),
                    e.device_kind.as_str(),
                    e.device_name.as_str(),
                    e.median_ms,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("fp32", "cuda", "NVIDIA H200", 7.0),
                ("bf16", "cuda", "NVIDIA H200", 1.5),
                ("fp32", "cpu", "AMD EPYC", 300.0)
            ]
        );
        assert_eq!(got[0].samples_ms, Some(vec![7.0; 3]));
        assert_eq!(
            (got[0].size, got[0].framework.as_str()),
            (4096, "candle 0.11.1")
        );

        let mut debug = matmul.clone();
        debug["environment"]["profile"] = json!("debug");
        assert_eq!(
            entries_of(&debug).unwrap()[0].framework,
            "candle 0.11.1 (debug build)"
        );

        let cvg = schema2(
            "cpu_vs_gpu",
            json!({"size": 64, "precision": "fp32", "cpu_threads": 2, "cpu_warmup": 1,
                   "cpu_iters": 3, "gpu_warmup": 1, "gpu_iters": 3,
                   "cpu": row("fp32", 2.0), "gpu": null}),
        );
        let got = entries_of(&cvg).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].experiment.as_str(), got[0].device_kind.as_str()),
            ("cpu_vs_gpu", "cpu")
        );
    }

    #[test]
    fn refuses_other_schema_versions_in_one_line() {
        let mut file = schema2("matmul", matmul_body("cuda", vec![], Value::Null));
        for version in [json!("3.0"), json!(7), json!("1.2")] {
            file["schema_version"] = version.clone();
            let err = format!("{:#}", entries_of(&file).unwrap_err());
            assert_eq!(
                err,
                format!("schema_version {version}: this build reads 2.x (and 1)")
            );
        }
        file["schema_version"] = json!("2.7");
        assert_eq!(entries_of(&file).unwrap(), []);
    }

    #[test]
    fn reads_the_reference_labs_file() {
        let text = include_str!("../../tests/fixtures/reference-lab-gb10/week05-results-gb10.json");
        let got = reference_lab_entries(&serde_json::from_str(text).unwrap()).unwrap();
        let summary: Vec<_> = got
            .iter()
            .map(|e| (e.precision.as_str(), e.device_kind.as_str(), e.median_ms))
            .collect();
        assert_eq!(
            summary,
            [
                ("fp32", "cuda", 7.44),
                ("fp16", "cuda", 1.548),
                ("bf16", "cuda", 1.576),
                ("fp32", "cpu", 168.281)
            ]
        );
        assert!(got.iter().all(|e| e.samples_ms.is_none() && e.size == 4096));
        assert_eq!(got[0].device_name, "NVIDIA GB10");
        assert_eq!(got[0].framework, "pytorch 2.13.0+cu130");
    }

    #[test]
    fn load_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let err = format!("{:#}", load(&missing).unwrap_err());
        assert!(
            err.starts_with("cannot read ") && err.contains("missing.json"),
            "{err}"
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "not json").unwrap();
        let err = format!("{:#}", load(&bad).unwrap_err());
        assert!(err.contains("bad.json is not JSON"), "{err}");
    }
}
