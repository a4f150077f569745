//! What a run ended as: everything measured, or some rows failed (their
//! errors kept in the report). The programs turn it into an exit code in one
//! place (`cli::finish`); the measurement cores only report their rows.

use crate::schema::Row;

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
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Self {
        let mut total = 0;
        let mut failed = Vec::new();
        for row in rows {
            total += 1;
            if row.measured.is_none() {
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
