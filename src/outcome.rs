//! What a run ended as, and the one place that decides exit codes and the
//! line that explains them: 0 when everything ran, [`EXIT_ERROR`] when the run
//! failed (no report; a failed allocation too, [`EXIT_ERROR`] from the
//! allocator's hook), [`EXIT_USAGE`] for a bad command line ([`usage`]),
//! [`EXIT_ROWS_FAILED`] when the report was written but some of its rows
//! failed, [`CHECK_FAILED`] for a check asked for that failed, and 128 + the
//! signal (130, 143) for an interrupted run ([`signal_exit_code`]). The
//! measurement cores only report their rows; the programs call [`finish`].

use std::process::ExitCode;

use anyhow::Result;

use crate::schema::{Body, Row, RowStatus};

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

impl Completion {
    /// [`Completion::RowsFailed`] naming every row that failed, else complete.
    /// A row the GPU's library refused as unsupported did not fail: it is a
    /// fact about this GPU, recorded, and counts as neither failed nor measured.
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Self {
        Self::of_names(rows.into_iter().map(|row| {
            (
                row.precision.to_string(),
                failed(row.status, row.measured.is_some()),
            )
        }))
    }
}

impl Completion {
    /// What the rows of `body` ended as: every experiment's rule is this one
    /// (a row without a measurement failed, and its error is in the row),
    /// over the rows and names the body gives ([`Body::timed_rows`]).
    /// Bodies whose rows cannot fail one by one (a section is measured or the
    /// run ends with an error) are complete.
    pub fn of_body(body: &Body) -> Self {
        let rows = body.timed_rows().into_iter();
        Self::of_names(rows.filter_map(|r| Some((r.name, failed(r.status?, r.measured)))))
    }

    /// From (name, failed) pairs.
    fn of_names(rows: impl IntoIterator<Item = (String, bool)>) -> Self {
        let mut total = 0;
        let mut failed = Vec::new();
        for (name, failed_row) in rows {
            total += 1;
            if failed_row {
                failed.push(name);
            }
        }
        if failed.is_empty() {
            Self::Complete
        } else {
            Self::RowsFailed { failed, total }
        }
    }
}

/// Whether a row failed: it has no measurement and was not refused by the
/// GPU's library as unsupported (a fact about the GPU, recorded as such).
fn failed(status: RowStatus, measured: bool) -> bool {
    !measured && status != RowStatus::Unsupported
}

/// The exit code of a process stopped by `signal` (SIGINT: 130, SIGTERM:
/// 143), as a shell reports a process killed by it.
pub fn signal_exit_code(signal: i32) -> i32 {
    128 + signal
}

/// A command line clap refused: one line on stderr and [`EXIT_USAGE`];
/// `--help` and `--version` print in full and exit 0.
pub fn usage(e: &clap::Error) -> ExitCode {
    if e.use_stderr() {
        crate::note!("{}", usage_line(&e.render().to_string()));
        ExitCode::from(EXIT_USAGE)
    } else {
        let _ = e.print();
        ExitCode::SUCCESS
    }
}

/// clap's message on one line: the lines that say what is wrong, joined (a
/// missing argument's name is on the line after "not provided:"), without the
/// usage and tips that follow the first blank line.
pub fn usage_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if lines.is_empty() {
        "error: invalid arguments".to_string()
    } else {
        lines.join(" ")
    }
}

/// The exit code of a run, and the one line that explains a non-zero one.
pub fn exit_code<T: Into<Completion>>(outcome: Result<T>) -> (u8, Option<String>) {
    match outcome.map(Into::into) {
        Ok(Completion::Complete) => (0, None),
        Ok(Completion::RowsFailed { failed, total }) => {
            let kept = if failed.len() < total {
                "the other rows and the report were kept"
            } else {
                "the report was kept, each row with its error"
            };
            (
                EXIT_ROWS_FAILED,
                Some(format!(
                    "error: {} of {total} rows failed ({}); {kept}",
                    failed.len(),
                    failed.join(", ")
                )),
            )
        }
        Err(e) => {
            // A failed run leaves no temporary file and none of the folders it created.
            drop(crate::export::output::abandon());
            (
                EXIT_ERROR,
                Some(format!("error: {}", crate::error::error_line(&e))),
            )
        }
    }
}

/// Ends a run: prints the line [`exit_code`] gives, if any, and returns the code.
pub fn finish<T: Into<Completion>>(outcome: Result<T>) -> ExitCode {
    let (code, line) = exit_code(outcome);
    if let Some(line) = line {
        crate::note!("{line}");
    }
    ExitCode::from(code)
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
            crate::note!("{failed}");
            ExitCode::from(CHECK_FAILED)
        }
        Err(e) => finish::<()>(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_keep_what_is_wrong_on_one_line() {
        let missing = "error: the following required arguments were not provided:\n  <FILE>...\n\nUsage: compare <BASELINE> <FILE>...\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_line(missing),
            "error: the following required arguments were not provided: <FILE>..."
        );
        let value = "error: invalid value 'x' for '--format <FORMAT>'\n  [possible values: table, md]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_line(value),
            "error: invalid value 'x' for '--format <FORMAT>' [possible values: table, md]"
        );
        assert_eq!(usage_line(""), "error: invalid arguments");
        assert_eq!((signal_exit_code(2), signal_exit_code(15)), (130, 143));
    }

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
        let line = line.unwrap();
        assert!(line.contains("1 of 7 rows failed (bf16-reduced)"), "{line}");
        assert!(
            line.contains("the other rows and the report were kept"),
            "{line}"
        );
        let all = Completion::RowsFailed {
            failed: vec!["fp32".into(), "fp16".into()],
            total: 2,
        };
        let line = exit_code(Ok(all)).1.unwrap();
        assert!(
            line.ends_with(
                "2 of 2 rows failed (fp32, fp16); the report was kept, each row with its error"
            ),
            "no other rows to speak of: {line}"
        );
        // Distinct from every other outcome, clap's usage code included.
        assert!(![0, EXIT_ERROR, EXIT_USAGE].contains(&EXIT_ROWS_FAILED));
    }
}
