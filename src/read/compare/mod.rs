//! `compare`: reads result files back and says, row by row, how a file B's
//! times compare with a baseline A's. Rows pair up by experiment, size,
//! precision and device kind; each pair gets the ratio of medians B/A (time,
//! so above 1 means B takes longer) and, when both sides kept their samples, a
//! verdict FAST / SLOW / SAME from a bootstrap confidence interval of that
//! ratio. Everything here is pure: entries in (read by
//! [`entries`](crate::read::entries)), rows, verdicts and the gate's answer out;
//! `render` turns them into a table or Markdown.

pub use crate::read::entries::Entry;
pub use crate::stats::{
    bootstrap_ratio, Interval, BAND, CONFIDENCE, MAX_BOOTSTRAP_SAMPLES, MIN_SAMPLES, RESAMPLES,
    SEED,
};

mod render;
pub use render::{method, render_method, Comparison, Format};

/// The samples compare resamples from one file, over all its rows (each row
/// at most [`MAX_BOOTSTRAP_SAMPLES`] a side): the bootstrap's work is bounded
/// by the file, whatever it holds, to seconds in a release build (this
/// suite's largest file, a sweep, gives 33,000). A file past it is refused.
pub const MAX_FILE_BOOTSTRAP_SAMPLES: usize = 100_000;

/// The entries of the result file at `path`, read and checked by the shared
/// loader ([`crate::read::load::entries`]), refused in one line when its rows
/// hold more samples to resample than [`MAX_FILE_BOOTSTRAP_SAMPLES`].
pub fn load(path: &std::path::Path) -> anyhow::Result<Vec<Entry>> {
    let entries = crate::read::load::entries(path)?;
    let resampled: usize = entries
        .iter()
        .filter_map(|e| e.samples_ms.as_ref())
        .map(|s| s.len().min(MAX_BOOTSTRAP_SAMPLES))
        .sum();
    if resampled > MAX_FILE_BOOTSTRAP_SAMPLES {
        anyhow::bail!(
            "{}: its {} rows hold {resampled} samples to resample (at most {MAX_BOOTSTRAP_SAMPLES} \
             a row), more than the {MAX_FILE_BOOTSTRAP_SAMPLES} compare resamples from one file \
             in a bounded time; compare fewer rows at once",
            crate::quote::shown(path),
            entries.len()
        );
    }
    Ok(entries)
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

/// One line of a comparison: a pair, or an entry that only one file has.
#[derive(Clone, Debug, PartialEq)]
// A comparison holds tens of rows: boxing the pair would buy nothing.
#[allow(clippy::large_enum_variant)]
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
/// in one file pairs with its first match. A variant row (the suite's kernels:
/// "fp32 (lab kernels)") with no like row in the other file pairs with the
/// plain row it stands for ("fp32"), so a run of `--kernels lab` or `both`
/// pairs with a PyTorch twin's file, which has one set of kernels.
pub fn compare(a: &[Entry], b: &[Entry]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for ea in a {
        let found = partners(ea, a, b);
        if found.is_empty() {
            rows.push(Row::OnlyA(ea.clone()));
        }
        rows.extend(found.into_iter().map(|eb| pair(ea, eb)));
    }
    rows.extend(
        b.iter()
            .filter(|eb| !a.iter().any(|ea| partners(ea, a, b).contains(eb)))
            .filter(|eb| !a.iter().any(|ea| ea.key() == eb.key()))
            .map(|eb| Row::OnlyB(eb.clone())),
    );
    rows
}

/// The rows of `b` that `a`'s row `ea` pairs with: its like row (the first);
/// for a variant without one, the plain row it stands for; for a plain row,
/// also each variant of `b` standing for it that `a` has no row of.
fn partners<'b>(ea: &Entry, a: &[Entry], b: &'b [Entry]) -> Vec<&'b Entry> {
    let like = b.iter().find(|eb| eb.key() == ea.key());
    if ea.stands_for.is_some() {
        let plain = || b.iter().find(|eb| stands_for(ea, eb, b));
        return like.or_else(plain).into_iter().collect();
    }
    let variants = b.iter().filter(|eb| stands_for(eb, ea, a));
    like.into_iter().chain(variants).collect()
}

/// Whether the variant row `v` stands for the plain row `p`, of a file
/// (`p_file`) with no row of `v`'s own key.
fn stands_for(v: &Entry, p: &Entry, p_file: &[Entry]) -> bool {
    p.stands_for.is_none()
        && v.plain_key() == Some(p.key())
        && !p_file.iter().any(|o| o.key() == v.key())
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

/// `--fail-if-slower PCT` over every file's comparison with the baseline: `None`
/// when it passes, else why, on one line. A gate passes only what it judged, so
/// it fails a file that pairs no row with the baseline (nothing was compared),
/// a paired row without a verdict (ratio only: too few samples to judge), a
/// baseline row the file lacks (a row that failed or did not run), and a row
/// that is SLOW by more than `pct` percent ([`slower_than`]).
pub fn gate(comparisons: &[Comparison], pct: f64) -> Option<String> {
    let mut failures = Vec::new();
    for c in comparisons {
        let mut problems = Vec::new();
        let both = c
            .rows
            .iter()
            .filter(|r| matches!(r, Row::Both { .. }))
            .count();
        if both == 0 {
            problems.push("nothing compared (no row pairs with the baseline's)".to_string());
        }
        let unjudged: Vec<String> = c
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::Both {
                    b, verdict: None, ..
                } => Some(b.describe()),
                _ => None,
            })
            .collect();
        if !unjudged.is_empty() {
            problems.push(format!(
                "no verdict for {} (ratio only: a side has fewer than {MIN_SAMPLES} samples)",
                unjudged.join(", ")
            ));
        }
        let missing: Vec<String> = c
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::OnlyA(a) => Some(a.describe()),
                _ => None,
            })
            .collect();
        if !missing.is_empty() {
            problems.push(format!("missing the baseline's {}", missing.join(", ")));
        }
        let slower: Vec<String> = c
            .rows
            .iter()
            .filter(|r| slower_than(r, pct))
            .filter_map(|r| match r {
                Row::Both { b, ratio, .. } => {
                    Some(format!("{} ({:+.1}%)", b.describe(), (ratio - 1.0) * 100.0))
                }
                _ => None,
            })
            .collect();
        if !slower.is_empty() {
            problems.push(format!("slower: {}", slower.join(", ")));
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}", c.b_name, problems.join("; ")));
        }
    }
    (!failures.is_empty())
        .then(|| format!("--fail-if-slower {pct} failed: {}", failures.join(" | ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twenty samples around `median` with a ±2% spread, in a fixed shuffled order.
    fn samples(median: f64) -> Vec<f64> {
        (0..20)
            .map(|i| median * (1.0 + 0.002 * f64::from((i * 7) % 21 - 10)))
            .collect()
    }

    pub(super) fn entry(precision: &str, kind: &str, median: f64, with_samples: bool) -> Entry {
        Entry {
            experiment: "matmul".into(),
            size: 256,
            precision: precision.into(),
            stands_for: precision.strip_suffix(" (lab kernels)").map(str::to_string),
            device_kind: kind.into(),
            device_name: "AMD EPYC".into(),
            framework: "candle 0.11.1".into(),
            median_ms: median,
            samples_ms: with_samples.then(|| samples(median)),
            contended: false,
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
    fn the_suites_kernels_pair_with_a_file_that_has_one_set_of_kernels() {
        let both = [
            entry("fp32", "cpu", 10.0, true),
            entry("fp32 (lab kernels)", "cpu", 5.0, true),
        ];
        let twin = [entry("fp32", "cpu", 8.0, true)];
        let names = |rows: &[Row]| -> Vec<(String, String)> {
            let name = |e: &Entry| e.precision.clone();
            rows.iter()
                .map(|r| match r {
                    Row::Both { a, b, .. } => (name(a), name(b)),
                    Row::OnlyA(a) => (name(a), "-".into()),
                    Row::OnlyB(b) => ("-".into(), name(b)),
                })
                .collect()
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        // Both rows of a `--kernels both` run pair with the twin's fp32, either way round.
        assert_eq!(
            names(&compare(&both, &twin)),
            [pair("fp32", "fp32"), pair("fp32 (lab kernels)", "fp32")]
        );
        assert_eq!(
            names(&compare(&twin, &both)),
            [pair("fp32", "fp32"), pair("fp32", "fp32 (lab kernels)")]
        );
        // A lab-only run pairs with the twin, and two runs' lab rows pair with each other,
        // never with the other's plain row.
        assert_eq!(
            names(&compare(&both[1..], &twin)),
            [pair("fp32 (lab kernels)", "fp32")]
        );
        assert_eq!(
            names(&compare(&twin, &both[1..])),
            [pair("fp32", "fp32 (lab kernels)")]
        );
        assert_eq!(
            names(&compare(&both, &both[1..])),
            [
                pair("fp32", "-"),
                pair("fp32 (lab kernels)", "fp32 (lab kernels)")
            ]
        );
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

    fn gate_of(a: &[Entry], b: &[Entry], pct: f64) -> Option<String> {
        gate(&[Comparison::new("a.json", a, "b.json", b)], pct)
    }

    #[test]
    fn the_gate_fails_what_it_could_not_judge() {
        let a = [
            entry("fp32", "cpu", 10.0, true),
            entry("fp16", "cpu", 20.0, true),
        ];
        assert_eq!(gate_of(&a, &a, 10.0), None);
        let slow = [
            entry("fp32", "cpu", 13.0, true),
            entry("fp16", "cpu", 20.0, true),
        ];
        assert_eq!(
            gate_of(&a, &slow, 10.0).unwrap(),
            "--fail-if-slower 10 failed: b.json: slower: matmul 256 fp32 cpu (+30.0%)"
        );
        assert_eq!(gate_of(&a, &slow, 40.0), None);
        let other = [entry("bf16", "cuda", 1.0, true)];
        let why = gate_of(&a, &other, 10.0).unwrap();
        assert!(why.contains("b.json: nothing compared"), "{why}");
        assert!(
            why.contains("missing the baseline's matmul 256 fp32 cpu, matmul 256 fp16 cpu"),
            "{why}"
        );
        let medians_only = [
            entry("fp32", "cpu", 10.0, false),
            entry("fp16", "cpu", 20.0, true),
        ];
        let why = gate_of(&a, &medians_only, 10.0).unwrap();
        assert!(why.ends_with("b.json: no verdict for matmul 256 fp32 cpu (ratio only: a side has fewer than 3 samples)"), "{why}");
        assert_eq!(
            gate_of(
                &a,
                &[a[0].clone(), a[1].clone(), entry("fp64", "cpu", 1.0, true)],
                10.0
            ),
            None,
            "a row only B has is not judged"
        );
    }
}
