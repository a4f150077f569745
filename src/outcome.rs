//! What a run ended as, and the one place that turns it into an exit code and
//! an error line: 0 when everything ran, [`EXIT_ERROR`] when the run failed (no
//! report), [`EXIT_USAGE`] for a bad command line (`cli::parse`),
//! [`EXIT_ROWS_FAILED`] when the report was written but some of its rows
//! failed, and 128 + the signal (130, 143) for an interrupted run (`cli`'s
//! signal handler). The measurement cores only report their rows.

use std::process::ExitCode;

use anyhow::Result;

use crate::schema::{Row, RowStatus};

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
        let mut total = 0;
        let mut failed = Vec::new();
        for row in rows {
            total += 1;
            if row.measured.is_none() && row.status != RowStatus::Unsupported {
                failed.push(row.precision.to_string());
            }
        }
        if failed.is_empty() {
            Self::Complete
        } else {
            Self::RowsFailed { failed, total }
        }
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
