//! Exporters: result types out to the world, behind one seam. A program hands
//! its finished result file to [`Outputs::save_all`], which writes the JSON and,
//! beside it, every [`Format`] that applies to the experiment (CSV, the SVG
//! chart), then to [`show`], which prints the experiment's [`views`] as tables.
//! [`output`] is the output-file policy every file goes through (checked before
//! running, atomic, signal-safe); [`markdown`] is the one way Markdown tables
//! are made. Nothing here measures.
//!
//! A new format is one file here implementing [`Format`], and its line in
//! [`FORMATS`].

mod chart;
pub mod csv;
pub mod lines;
pub mod log_panels;
pub mod markdown;
pub mod output;
pub mod panels;
pub mod roofline;
pub mod svg;
pub mod table;
pub mod views;

use anyhow::Result;

use crate::schema::{Kind, ResultFile};
use output::Output;
use table::Screen;

/// A format a result is written in beside its JSON (`sweep.json` ->
/// `sweep.csv`).
pub trait Format: Sync {
    /// The file name's extension, which replaces the JSON's.
    fn extension(&self) -> &'static str;
    /// Whether results of `experiment` have anything in this format. Known
    /// before the run, so that the file's path is checked then.
    fn applies_to(&self, experiment: Kind) -> bool;
    /// The file's bytes for `file`; `None` while there is nothing to write yet
    /// (a chart before its first point).
    fn render(&self, file: &ResultFile) -> Result<Option<Vec<u8>>>;
}

/// Every format written beside the JSON.
pub const FORMATS: &[&dyn Format] = &[&csv::Csv, &chart::Chart];

/// Where one run's result goes: the JSON, and beside it each format that
/// applies to the experiment, every path checked by [`Outputs::new`] before
/// anything is measured. With `--output -` only the JSON is written.
pub struct Outputs {
    json: Output,
    beside: Vec<(&'static dyn Format, Output)>,
}

impl Outputs {
    pub fn new(json: Output, experiment: Kind) -> Result<Self> {
        let mut beside = Vec::new();
        for &format in FORMATS.iter().filter(|f| f.applies_to(experiment)) {
            let target = json.beside(format.extension())?;
            if !matches!(target, Output::None) {
                beside.push((format, target));
            }
        }
        Ok(Self { json, beside })
    }

    /// Writes the JSON and every other format, each file atomically, and says
    /// where on stderr. The set is written as one ([`output::write_together`]),
    /// so the files always hold the same result.
    pub fn save_all(&self, file: &ResultFile) -> Result<()> {
        self.write(file, true)
    }

    /// [`Self::save_all`] without the messages, for files rewritten as a run
    /// goes (the sweep, after every point).
    pub fn save_quietly(&self, file: &ResultFile) -> Result<()> {
        self.write(file, false)
    }

    fn write(&self, file: &ResultFile, say: bool) -> Result<()> {
        let mut files: Vec<(&Output, Vec<u8>)> = Vec::new();
        for (format, out) in &self.beside {
            if let Some(bytes) = format.render(file)? {
                files.push((out, bytes));
            }
        }
        // The JSON last: a reader that finds it finds the others in place.
        files.push((&self.json, output::to_json(file)?));
        let refs: Vec<(&Output, &[u8])> = files.iter().map(|(o, b)| (*o, b.as_slice())).collect();
        output::write_together(&refs)?;
        if say {
            for (out, _) in &files {
                out.say_written();
            }
        }
        Ok(())
    }

    /// Every file this run's result goes to: the JSON and those beside it.
    pub fn paths(&self) -> Vec<&std::path::Path> {
        std::iter::once(&self.json)
            .chain(self.beside.iter().map(|(_, o)| o))
            .filter_map(Output::path)
            .collect()
    }

    /// Whether the JSON goes to standard output (`--output -`).
    pub fn is_stdout(&self) -> bool {
        matches!(self.json, Output::Stdout)
    }

    /// Where the tables go: standard error when standard output carries the JSON.
    pub fn screen(&self) -> Screen {
        self.json.screen()
    }
}

/// Prints `file`'s views (its tables and notes, at `width`: see
/// [`views::Width`]), then `notes`: the one place that prints results, after
/// they are saved.
/// A run whose rows were contended ends with one warning line on stderr.
pub fn show(
    file: &ResultFile,
    notes: &[String],
    screen: Screen,
    width: views::Width,
) -> Result<()> {
    let mut shown = views::terminal(file, width);
    shown.notes.extend_from_slice(notes);
    table::print_tables(&shown.tables, &shown.notes, screen)?;
    if let Some(warning) = views::contention_warning(file) {
        crate::note!("{warning}");
    }
    Ok(())
}
