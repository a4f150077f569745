//! Reports: what an experiment found, as plain `Serialize` data with the
//! environment it came from, shown as terminal tables (comfy-table). Saving the
//! JSON is [`crate::output`]'s: it owns the output-file policy.

use std::io::Write;

use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table as Comfy};
use serde::Serialize;

use crate::device::DeviceInfo;
use crate::env::Environment;

/// Bumped when a field changes meaning or goes away (not when one is added).
pub const SCHEMA_VERSION: u32 = 1;

/// One JSON file: the header every report shares, then the experiment's own
/// fields at the top level.
#[derive(Serialize)]
pub struct Report<T: Serialize> {
    pub schema_version: u32,
    pub experiment: &'static str,
    /// RFC 3339, UTC, seconds.
    pub created_utc: String,
    /// The exact command line, to rerun it.
    pub command: String,
    pub environment: Environment,
    pub device: DeviceInfo,
    #[serde(flatten)]
    pub results: T,
}

impl<T: Serialize> Report<T> {
    pub fn new(experiment: &'static str, device: DeviceInfo, results: T) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            experiment,
            created_utc: humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                .to_string(),
            command: crate::cli::command_line(),
            environment: Environment::capture(),
            device,
            results,
        }
    }
}

/// A titled table of text cells, for the terminal.
pub struct Table {
    title: String,
    table: Comfy,
}

impl Table {
    /// Columns after the first are right-aligned: they hold numbers.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        let mut table = Comfy::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_header(header.to_vec());
        for i in 1..header.len() {
            if let Some(col) = table.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        Self {
            title: title.into(),
            table,
        }
    }

    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        self.table
            .add_row(cells.into_iter().map(|c| c.to_string()).collect::<Vec<_>>());
        self
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "=== {} ===", self.title)?;
        writeln!(f, "{}", self.table)
    }
}

/// Where the tables go: standard output, or standard error when standard
/// output carries the JSON (`--output -`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    Stdout,
    Stderr,
}

/// Prints the tables, then `notes` one per line: the one place that prints
/// results. It runs after the JSON is saved, so a closed pipe (`| head`) loses
/// nothing, and printing then stops quietly, as ripgrep does.
pub fn print_tables(tables: &[Table], notes: &[String], screen: Screen) -> Result<()> {
    let mut text = String::new();
    for t in tables {
        text.push_str(&format!("{t}\n"));
    }
    for n in notes {
        text.push_str(n);
        text.push('\n');
    }
    let printed = match screen {
        Screen::Stdout => write_flushed(std::io::stdout().lock(), &text),
        Screen::Stderr => write_flushed(std::io::stderr().lock(), &text),
    };
    match printed {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("printing the tables"),
    }
}

fn write_flushed(mut to: impl Write, text: &str) -> std::io::Result<()> {
    to.write_all(text.as_bytes())?;
    to.flush()
}

/// serde `serialize_with` for `Vec<f64>` that may hold inf or NaN: finite values
/// stay JSON numbers, the others (which JSON cannot hold, and serde_json would
/// write as null) become the strings "inf", "-inf" and "NaN".
pub fn floats_keeping_inf<S: serde::Serializer>(values: &[f64], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(untagged)]
    enum Value {
        Number(f64),
        Text(String),
    }
    s.collect_seq(values.iter().map(|&v| {
        if v.is_finite() {
            Value::Number(v)
        } else {
            Value::Text(v.to_string())
        }
    }))
}

/// The first line of an error's text with its causes (`{e:#}`). Candle appends a
/// backtrace to some errors when RUST_BACKTRACE is set; users get one line.
pub fn error_line(e: &dyn std::fmt::Display) -> String {
    let text = format!("{e:#}");
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// Formats a byte count with its binary-prefixed size: "4194304 (4.0 MiB)".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{n} ({value:.1} {})", UNITS[unit])
    }
}

/// Bytes to MiB (1 MiB = 1024 x 1024 bytes), as the reference lab reports.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinities_survive_in_json() {
        #[derive(Serialize)]
        struct S {
            #[serde(serialize_with = "floats_keeping_inf")]
            v: Vec<f64>,
        }
        let json = serde_json::to_string(&S {
            v: vec![1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
        })
        .unwrap();
        assert_eq!(json, r#"{"v":[1.5,"inf","-inf","NaN"]}"#);
    }

    #[test]
    fn errors_print_as_one_line_without_backtraces() {
        let e = anyhow::anyhow!("driver said no\n   0: candle_core::error::Error::bt")
            .context("--device cuda:0");
        assert_eq!(error_line(&e), "--device cuda:0: driver said no");
    }

    #[test]
    fn byte_formatting() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(4_194_304), "4194304 (4.0 MiB)");
        assert_eq!(mib(201_326_592), 192.0);
    }

    #[test]
    fn report_header_and_results_share_one_object() {
        #[derive(Serialize)]
        struct R {
            answer: u32,
        }
        let (_, info) = crate::device::select(crate::device::DeviceArg::Cpu).unwrap();
        let v = serde_json::to_value(Report::new("t", info, R { answer: 42 })).unwrap();
        assert_eq!(v["answer"], 42);
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert!(v["created_utc"].as_str().unwrap().ends_with('Z'));
        assert_eq!(v["device"]["kind"], "cpu");
        assert!(v["environment"]["cpu_threads_available"].as_u64().unwrap() >= 1);
    }
}
