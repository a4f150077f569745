//! How a comparison is shown: a terminal table or GitHub Markdown, the notes
//! that name both files and their devices, and the method under every table.

use super::{
    compare, Entry, Row, BAND, CONFIDENCE, MAX_BOOTSTRAP_SAMPLES, MIN_SAMPLES, RESAMPLES, SEED,
};
use crate::export::table::Table;

/// How the verdict is reached, printed under every table and in `--help`.
pub fn method() -> String {
    let pct = BAND * 100.0;
    format!(
        "B/A is B's median time over A's (A is the baseline): above 1, B takes longer.\n\
         Rows pair up by experiment, size, precision and device kind (cpu, cuda); a row on the \
         suite's kernels (\"fp32 (lab kernels)\") pairs with the plain row (\"fp32\") of a file that has none of its own.\n\
         Verdict: a {conf:.0}% percentile-bootstrap confidence interval of B/A ({RESAMPLES} resamples \
         of each side's wall-time samples, seed {SEED:#x}: a rerun prints the same; a side of more than \
         {MAX_BOOTSTRAP_SAMPLES} samples is resampled from a seeded random {MAX_BOOTSTRAP_SAMPLES} of them, \
         drawn without replacement, so a row's work is bounded).\n\
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
        // A first, as the columns (A's median, then B's) and the legend below
        // (A = ..., then B = ...) have it.
        let title = format!("A = {} vs B = {}", self.a_name, self.b_name);
        // The Markdown heading escapes its own text (`Table::markdown`): a
        // `|` ends no cell there.
        let mut table = Table::new(title, &header);
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
                        verdict.map_or("ratio only".into(), |v| v.to_string())
                            + contention(a.contended, b.contended),
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

/// What a verdict between rows of unequal machines is worth: said beside it
/// when either row was measured on a contended machine.
fn contention(a: bool, b: bool) -> &'static str {
    match (a, b) {
        (false, false) => "",
        (true, false) => " (A contended: B's quiet run against a slowed A)",
        (false, true) => " (B contended: its times understate its machine)",
        (true, true) => " (both contended)",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::compare::tests::entry;

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
        assert!(md.starts_with("### A = a.json vs B = b|c.json\n"), "{md}");
        let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 3, "header, rule, one row:\n{md}");
        assert!(table[1].starts_with("|--"), "{md}");
        assert!(render_method(Format::Table).contains("±5%"));
        // Title, columns and legend name A first and B second, as B/A reads.
        let lines: Vec<&str> = text.lines().collect();
        let at = |l: &str, s: &str| l.find(s).unwrap_or_else(|| panic!("{s} missing in {l}"));
        let title = lines[0];
        assert!(
            at(title, "A = a.json") < at(title, "B = b|c.json"),
            "{title}"
        );
        let header = lines.iter().find(|l| l.contains("median ms")).unwrap();
        assert!(
            at(header, "A median ms") < at(header, "B median ms"),
            "{header}"
        );
        let legend = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap();
        assert!(legend("A = a.json") < legend("B = b|c.json"), "{text}");
        assert!(!Comparison::new("a", &a, "a", &a)
            .render(Format::Table)
            .contains("different devices"));
    }
}
