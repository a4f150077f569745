//! Flags every experiment shares, parsed once by clap, and the one place that
//! turns a run's outcome into an exit code and an error line: 0 when everything
//! ran, [`EXIT_ERROR`] when the run failed (no report), [`EXIT_USAGE`] for a bad
//! command line, [`EXIT_ROWS_FAILED`] when the report was written but some of
//! its benchmark rows failed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser};
use serde::Serialize;

use crate::device::{DeviceArg, DeviceInfo};
use crate::report::{check_writable, write_json_atomic, Report};

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Where to run: auto (CUDA GPU 0 if this build has CUDA and a GPU answers,
    /// else the CPU), cpu, cuda, or cuda:N for GPU N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceArg,

    /// Write the JSON report to FILE (parent folders are created).
    #[arg(long, value_name = "FILE", conflicts_with = "results_dir")]
    pub output: Option<PathBuf>,

    /// Write the JSON report to DIR/<device>/<experiment>.json, where <device>
    /// is "cpu" or the GPU's name ("nvidia-h200").
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
}

impl Common {
    /// The JSON path this run will write, if any, checked to be writable now.
    pub fn output_path(&self, experiment: &str, device: &DeviceInfo) -> Result<Option<PathBuf>> {
        let path = match (&self.output, &self.results_dir) {
            (Some(file), _) => file.clone(),
            (None, Some(dir)) => dir.join(device.slug()).join(format!("{experiment}.json")),
            (None, None) => return Ok(None),
        };
        check_writable(&path)?;
        Ok(Some(path))
    }
}

/// Largest `--size`: keeps every byte count (3 n^2 x 8 < 2^63) far from overflow.
pub const MAX_SIZE: u64 = 1_000_000;

/// The size and run counts of a matmul benchmark, with the reference lab's
/// defaults (4096, 20 timed runs, 5 warm-up runs).
#[derive(Args, Debug, Clone)]
pub struct BenchSize {
    /// Side n of the n x n matrices (1 to 1,000,000; the memory check refuses
    /// what does not fit).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=MAX_SIZE))]
    pub size: u64,

    /// Timed runs per row on the device (the CPU comparison makes max(3, iters/4)).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,

    /// Untimed runs before timing, per row (the CPU comparison makes one).
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,

    /// Do not check host memory before allocating. For machines whose memory
    /// grows on demand, where what the kernel reports at start understates what
    /// a run can have; a size that does not fit then aborts the process.
    #[arg(long)]
    pub skip_host_memory_check: bool,
}

impl BenchSize {
    pub fn n(&self) -> usize {
        self.size as usize
    }

    pub fn plan(&self) -> crate::timing::Plan {
        crate::timing::Plan {
            warmup: self.warmup as usize,
            iters: self.iters as usize,
        }
    }

    pub fn host_check(&self) -> crate::matmul::HostCheck {
        if self.skip_host_memory_check {
            crate::matmul::HostCheck::Skip
        } else {
            crate::matmul::HostCheck::Enforce
        }
    }
}

/// Writes `report` to `path` (when there is one) and says where.
pub fn save<T: Serialize>(path: Option<&PathBuf>, report: &Report<T>) -> Result<()> {
    if let Some(path) = path {
        write_json_atomic(path, report)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The run failed before its report was written.
pub const EXIT_ERROR: u8 = 1;
/// The command line was refused (clap's own code for usage errors).
pub const EXIT_USAGE: u8 = 2;
/// The report was written, but some benchmark rows failed: each holds its error.
pub const EXIT_ROWS_FAILED: u8 = 3;

/// How a run that wrote its report (or had none to write) ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Everything it set out to measure was measured.
    Complete,
    /// These rows (by name) failed; the others, and the report, are kept.
    RowsFailed { failed: Vec<String>, total: usize },
}

impl From<()> for Completion {
    fn from(_: ()) -> Self {
        Self::Complete
    }
}

/// Parses the command line. A bad flag or value is one line on stderr and exit
/// code 2 (clap's own report adds usage and tips); `--help` and `--version`
/// print in full.
pub fn parse<T: Parser>() -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if e.use_stderr() => {
            let text = e.render().to_string();
            eprintln!(
                "{}",
                text.lines().next().unwrap_or("error: invalid arguments")
            );
            std::process::exit(EXIT_USAGE.into());
        }
        Err(e) => e.exit(),
    }
}

/// The exit code of a run, and the one line that explains a non-zero one.
pub fn exit_code<T: Into<Completion>>(outcome: Result<T>) -> (u8, Option<String>) {
    match outcome.map(Into::into) {
        Ok(Completion::Complete) => (0, None),
        Ok(Completion::RowsFailed { failed, total }) => (
            EXIT_ROWS_FAILED,
            Some(format!(
                "error: {} of {total} rows failed ({}); the other rows and the report were kept",
                failed.len(),
                failed.join(", ")
            )),
        ),
        Err(e) => (
            EXIT_ERROR,
            Some(format!("error: {}", crate::report::error_line(&e))),
        ),
    }
}

/// Ends a run: prints the line [`exit_code`] gives, if any, and returns the code.
pub fn finish<T: Into<Completion>>(outcome: Result<T>) -> ExitCode {
    let (code, line) = exit_code(outcome);
    if let Some(line) = line {
        eprintln!("{line}");
    }
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_outcome_has_its_exit_code() {
        assert_eq!(exit_code(Ok(())), (0, None));
        let (code, line) = exit_code::<()>(Err(anyhow::anyhow!("disk full")));
        assert_eq!((code, line.as_deref()), (1, Some("error: disk full")));
        let partial = Completion::RowsFailed {
            failed: vec!["bf16-reduced".into()],
            total: 7,
        };
        let (code, line) = exit_code(Ok(partial));
        assert_eq!(code, EXIT_ROWS_FAILED);
        assert!(line.unwrap().contains("1 of 7 rows failed (bf16-reduced)"));
        // Distinct from every other outcome, clap's usage code included.
        assert!(![0, EXIT_ERROR, EXIT_USAGE].contains(&EXIT_ROWS_FAILED));
    }
}
