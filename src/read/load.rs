//! The one way a result file is read back, shared by compare, summary and
//! report: open without waiting (a FIFO is refused, not read), refuse anything
//! but a regular file and anything past [`MAX_FILE_BYTES`] before parsing (a
//! parsed file takes many times its size in memory, so a huge file would take
//! the machine's memory, not only time), parse, [`check`](super::check) the
//! numbers the schema cannot, then read it through the typed schema (which
//! checks the version) or as the reference lab's file, and refuse a file that
//! holds one row twice ([`entries::unique`]).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use rustix::fs::{Mode, OFlags};
use serde_json::Value;

use super::entries::{self, Entry};
use crate::quote::shown;
use crate::schema::{self, ResultFile};

/// The largest result file a reader takes: far above any run's (a matmul's
/// JSON is tens of KiB; 100,000 samples per row in seven precisions a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// [`MAX_FILE_BYTES`] as the messages and `--help` say it.
pub const MAX_FILE_SIZE: &str = "64 MiB";

/// A file read and checked.
#[derive(Clone, Debug)]
pub enum Loaded {
    /// A candle-lab or PyTorch-reference result file (schema 2.x, or 1 upgraded).
    Result(Box<ResultFile>),
    /// A file without a schema version: the reference lab's, as JSON, for its
    /// reader to take apart.
    ReferenceLab(Value),
}

/// Reads and checks `path`: `cannot read PATH: why` when the file cannot be
/// read, `PATH: why` when its content is refused, on one line.
pub fn load(path: &Path) -> Result<Loaded> {
    let text = read_text(path).with_context(|| format!("cannot read {}", shown(path)))?;
    parse(&text).with_context(|| shown(path))
}

/// The entries of one result file (what `compare` reads): the rows that ran
/// ("status": "ok") of a candle-lab file, or the reference lab's medians, read
/// and checked by [`load`]. Experiments whose rows pair with nothing (basics,
/// precision, memory, overhead) give none.
pub fn entries(path: &Path) -> Result<Vec<Entry>> {
    match load(path)? {
        Loaded::Result(file) => Ok(entries::entries(&file)),
        Loaded::ReferenceLab(value) => {
            entries::reference_lab_entries(&value).with_context(|| shown(path))
        }
    }
}

/// The text of a regular file of at most [`MAX_FILE_BYTES`]; errors do not name
/// the path (the caller does, or leaves it out of a generated README).
pub fn read_text(path: &Path) -> Result<String> {
    // Non-blocking: opening a FIFO for reading would wait for a writer.
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!(
            "it is {}, not a regular file",
            super::folder::what(meta.file_type())
        );
    }
    too_big(meta.len())?;
    let mut text = String::new();
    // One byte past the limit tells a file that grew since it was measured.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => anyhow::anyhow!("not UTF-8 text"),
            _ => e.into(),
        })?;
    too_big(text.len() as u64)?;
    Ok(text)
}

fn too_big(bytes: u64) -> Result<()> {
    if bytes > MAX_FILE_BYTES {
        bail!(
            "it is {bytes} bytes, more than the {MAX_FILE_SIZE} a result file may have (refused before parsing)"
        );
    }
    Ok(())
}

/// A file's text as JSON whose numbers a measurement can have ([`check`](super::check)),
/// for a reader of one known layout.
pub fn checked_json(text: &str) -> Result<Value> {
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    super::check::check(&value)?;
    Ok(value)
}

/// A file's text, checked: JSON, numbers a measurement can have, and a
/// candle-lab result file (any schema this build reads) or a file without a
/// schema version (the reference lab's).
pub fn parse(text: &str) -> Result<Loaded> {
    let value = checked_json(text)?;
    if value.get("schema_version").is_none() {
        return Ok(Loaded::ReferenceLab(value));
    }
    // One parsed copy at a time: the typed reader parses the text again.
    drop(value);
    let file = schema::from_json(text)?;
    entries::unique(&entries::entries(&file))?;
    Ok(Loaded::Result(Box::new(file)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_small_regular_file_with_the_path_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope\nerror: fake.json");
        let err = format!("{:#}", load(&missing).unwrap_err());
        assert!(
            err.starts_with("cannot read ") && err.contains(r"nope\nerror"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");

        let fifo = dir.path().join("x.json");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        let err = format!("{:#}", load(&fifo).unwrap_err());
        assert!(
            err.ends_with("x.json: it is a FIFO, not a regular file"),
            "{err}"
        );
        let err = format!("{:#}", load(dir.path()).unwrap_err());
        assert!(err.ends_with("it is a folder, not a regular file"), "{err}");

        // Sparse: the size is refused before a byte is read.
        let big = dir.path().join("big.json");
        File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let err = format!("{:#}", load(&big).unwrap_err());
        assert!(
            err.ends_with("it is 67108865 bytes, more than the 64 MiB a result file may have (refused before parsing)"),
            "{err}"
        );
    }

    #[test]
    fn names_the_file_when_its_content_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "not json").unwrap();
        let err = format!("{:#}", load(&bad).unwrap_err());
        assert!(
            err.starts_with(&format!("{}: not JSON", bad.display())),
            "{err}"
        );
        std::fs::write(&bad, r#"{"matmul": {"cpu_fp32_ms": 0}}"#).unwrap();
        let err = format!("{:#}", load(&bad).unwrap_err());
        assert!(
            err.ends_with("bad.json: /matmul: cpu_fp32_ms is 0, not a time in ms (1e-6 to 1e9)"),
            "{err}"
        );
    }

    #[test]
    fn reads_result_files_and_the_reference_labs() {
        // Relative to the working folder: the package root under `cargo test`,
        // the folder gpu-run.sh links tests/fixtures into in a bundle run (where
        // the build machine's CARGO_MANIFEST_DIR does not exist).
        let fixtures = Path::new("tests/fixtures");
        let got = load(&fixtures.join("amd-epyc-2t/matmul.json")).unwrap();
        assert!(matches!(got, Loaded::Result(f) if f.experiment == "matmul"));
        let got = load(&fixtures.join("reference-lab-gb10/week05-results-gb10.json")).unwrap();
        assert!(matches!(got, Loaded::ReferenceLab(v) if v["hardware"]["device"] == "NVIDIA GB10"));
    }

    #[test]
    fn load_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let err = format!("{:#}", entries(&missing).unwrap_err());
        assert!(
            err.starts_with("cannot read ") && err.contains("missing.json"),
            "{err}"
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"hardware": {"device": "x"}}"#).unwrap();
        let err = format!("{:#}", entries(&bad).unwrap_err());
        assert!(
            err.contains("bad.json: no schema_version, and not the reference lab's"),
            "{err}"
        );
    }
}
