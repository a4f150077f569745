//! CSV beside the JSON, for every experiment with rows: one header, then one
//! record per row in long format (the views say which columns). Quoting is the
//! `csv` crate's.

use anyhow::{Context, Result};

use super::views::{self, Records};
use super::Format;
use crate::schema::{Kind, ResultFile};

pub struct Csv;

impl Format for Csv {
    fn extension(&self) -> &'static str {
        "csv"
    }

    fn applies_to(&self, experiment: Kind) -> bool {
        experiment.writes().records
    }

    fn render(&self, file: &ResultFile) -> Result<Option<Vec<u8>>> {
        views::records(file).map(|r| write(&r)).transpose()
    }
}

/// `records` as CSV: the header, then every row.
pub fn write(records: &Records) -> Result<Vec<u8>> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(&records.header)
        .context("writing the CSV header")?;
    for r in &records.rows {
        w.write_record(r).context("writing a CSV row")?;
    }
    w.into_inner().context("finishing the CSV")
}
