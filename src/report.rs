//! Exporters: result values shown as terminal tables (comfy-table) and saved as
//! JSON (serde_json) or Markdown. A file is written whole or not at all: to a
//! temporary file in the same folder, then renamed over the target.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, CellAlignment, Table as Comfy};
use serde::Serialize;

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

    /// Left-aligns the given columns (0-based): those that hold text.
    pub fn align_left(&mut self, columns: &[usize]) -> &mut Self {
        for &i in columns {
            if let Some(col) = self.table.column_mut(i) {
                col.set_cell_alignment(CellAlignment::Left);
            }
        }
        self
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
    write_atomic(path, &json)
}

/// Writes `bytes` to `path` as [`write_json_atomic`] does: whole or not at all.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = temp_file_beside(path)?;
    tmp.write_all(bytes)
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
    fn byte_formatting() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(4_194_304), "4194304 (4.0 MiB)");
        assert_eq!(mib(201_326_592), 192.0);
    }
}
