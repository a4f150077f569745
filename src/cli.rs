//! Flags every experiment shares, parsed once by clap, and the one place that
//! turns a run's outcome into an exit code and an error line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser};

use crate::device::DeviceArg;
use crate::report::{check_writable, write_json_atomic};
use crate::schema::{Body, DeviceInfo, ResultFile, SCHEMA_VERSION};

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Where to run: auto (CUDA GPU 0 if this build has CUDA and a GPU answers,
    /// else the CPU), cpu, cuda, or cuda:N for GPU N.
    #[arg(long, default_value = "auto", value_name = "DEVICE")]
    pub device: DeviceArg,

    /// Write the JSON report to FILE (parent folders are created).
    #[arg(long, value_name = "FILE", conflicts_with = "results_dir")]
    pub output: Option<PathBuf>,

    /// Write the JSON report to DIR/<machine>/<experiment>.json, where <machine>
    /// names the hardware: the GPU ("nvidia-h200") or the CPU model and its
    /// logical CPUs ("intel-xeon-processor-2t").
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
}

/// Wraps `body` in the envelope every result file shares (schema version,
/// time, this command line, environment, device).
pub fn result_file(device: DeviceInfo, body: Body) -> ResultFile {
    ResultFile {
        schema_version: SCHEMA_VERSION.into(),
        experiment: body.experiment().into(),
        created_utc: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: command_line(),
        environment: crate::env::capture(),
        device,
        body,
    }
}

/// Writes `body` as a result file to `path` (when there is one) and says where.
pub fn save(path: Option<&PathBuf>, device: DeviceInfo, body: Body) -> Result<()> {
    if let Some(path) = path {
        write_json_atomic(path, &result_file(device, body))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
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
            std::process::exit(2);
        }
        Err(e) => e.exit(),
    }
}

/// The exit code of a run: 0, or 1 with the error and its causes on one line.
pub fn finish(outcome: Result<()>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", crate::error::error_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// Exit code of a check the user asked for that failed (`compare
/// --fail-if-slower`): 1, as for an error, so that `compare ... || fail` guards
/// a regression; the stderr line says which of the two it was.
pub const CHECK_FAILED: u8 = 1;

/// The exit code of a run that can fail a check on purpose: 0 when it passed;
/// [`CHECK_FAILED`] with the reason on one line when it did not; an error as in
/// [`finish`].
pub fn finish_check(outcome: Result<Option<String>>) -> ExitCode {
    match outcome {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(failed)) => {
            eprintln!("{failed}");
            ExitCode::from(CHECK_FAILED)
        }
        Err(e) => finish(Err(e)),
    }
}
