//! Reports: what an experiment found, as plain `Serialize` data with the
//! environment it came from, shown as terminal tables (comfy-table) and saved as
//! JSON (serde_json). A JSON file is written whole or not at all: to a temporary
//! file in the same folder, then renamed over the target.

use std::io::Write;
use std::path::{Path, PathBuf};

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
            command: command_line(),
            environment: Environment::capture(),
            device,
            results,
        }
    }
}

fn command_line() -> String {
    let quote = |a: String| {
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            format!("'{}'", a.replace('\'', r"'\''"))
        } else {
            a
        }
    };
    std::env::args().map(quote).collect::<Vec<_>>().join(" ")
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

    /// The same table as GitHub Markdown: the title as a heading, then a pipe table.
    pub fn markdown(&self) -> String {
        let mut table = self.table.clone();
        table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
        format!("### {}\n\n{table}\n", self.title)
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "=== {} ===", self.title)?;
        writeln!(f, "{}", self.table)
    }
}

pub fn print_tables(tables: &[Table]) {
    for t in tables {
        println!("{t}");
    }
}

/// Fails now, with the path and the reason, if `path` cannot be written later;
/// creates missing parent folders. Run before an experiment starts, so that a
/// long run does not end in a write error.
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("cannot write {}: it is a directory", path.display());
    }
    temp_file_beside(path).map(drop)
}

/// Writes `value` as pretty JSON to `path` atomically: a temporary file in the
/// same folder, flushed and synced, then renamed over `path`. On any error the
/// target is left as it was and the temporary file is removed.
pub fn write_json_atomic(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut json = serde_json::to_vec_pretty(value).context("serializing the report")?;
    json.push(b'\n');
    let mut tmp = temp_file_beside(path)?;
    tmp.write_all(&json)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// A temporary file in `path`'s folder (created if missing), so that a rename
/// onto `path` stays on one filesystem; deleted when dropped unless persisted.
fn temp_file_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = parent_dir(path);
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "cannot write {}: creating {}",
            path.display(),
            dir.display()
        )
    })?;
    tempfile::NamedTempFile::new_in(&dir).with_context(|| {
        format!(
            "cannot write {}: {} is not writable",
            path.display(),
            dir.display()
        )
    })
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
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
    fn writes_json_whole_and_creates_folders() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/out.json");
        write_json_atomic(&path, &serde_json::json!({"x": 1})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["x"], 1);
        // Nothing but the target is left in the folder.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn failed_write_leaves_no_file_and_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        // The target is an existing directory: the rename must fail.
        let target = dir.path().join("taken");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let err = write_json_atomic(&target, &serde_json::json!({})).unwrap_err();
        assert!(format!("{err:#}").contains("taken"), "{err:#}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["taken"], "no temporary file is left behind");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_paths_are_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        // A path below a regular file can never be created.
        let err = check_writable(&file.join("out.json")).unwrap_err();
        assert!(format!("{err:#}").contains("out.json"), "{err:#}");
        assert!(
            check_writable(dir.path()).is_err(),
            "a directory is not a file"
        );
        check_writable(&dir.path().join("new/out.json")).unwrap();
    }

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
