//! Exporters: result values shown as terminal tables (comfy-table). Saving
//! the JSON is [`crate::export::output`]'s: it owns the output-file policy.

use std::io::Write;

use anyhow::{Context, Result};
use comfy_table::{
    presets::UTF8_FULL_CONDENSED, CellAlignment, ContentArrangement, Table as Comfy,
};

use crate::export::markdown::{cell, text};

/// The columns a table the terminal shows by default fits in (generate's
/// compact table; its full one is `--wide`'s).
pub const TERMINAL_COLUMNS: u16 = 120;

/// A titled table of text cells, for the terminal, and the same table as
/// Markdown.
pub struct Table {
    title: String,
    table: Comfy,
    /// The same cells as Markdown shows them ([`crate::export::markdown::cell`]:
    /// what a result file says stays text, and one cell).
    markdown: Comfy,
}

impl Table {
    /// Columns after the first are right-aligned: they hold numbers.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        let make = |header: Vec<String>| {
            let mut table = Comfy::new();
            table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
            for i in 1..table.column_count() {
                if let Some(col) = table.column_mut(i) {
                    col.set_cell_alignment(CellAlignment::Right);
                }
            }
            table
        };
        Self {
            title: title.into(),
            table: make(header.iter().map(|h| h.to_string()).collect()),
            markdown: make(header.iter().map(|h| cell(h)).collect()),
        }
    }

    /// Left-aligns the given columns (0-based): those that hold text.
    pub fn align_left(&mut self, columns: &[usize]) -> &mut Self {
        for &i in columns {
            for table in [&mut self.table, &mut self.markdown] {
                if let Some(col) = table.column_mut(i) {
                    col.set_cell_alignment(CellAlignment::Left);
                }
            }
        }
        self
    }

    /// Fits the terminal's table in `columns`: cells too long for their
    /// share wrap inside their cell. The width is fixed here, never the
    /// terminal's own, so the text is the same on a terminal, in a pipe and in
    /// a test. The Markdown is left whole.
    pub fn fit(&mut self, columns: u16) -> &mut Self {
        self.table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(columns);
        self
    }

    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        let cells: Vec<String> = cells.into_iter().map(|c| c.to_string()).collect();
        self.markdown
            .add_row(cells.iter().map(|c| cell(c)).collect::<Vec<_>>());
        self.table.add_row(cells);
        self
    }

    /// The same table as GitHub Markdown: the title as a heading, then a pipe
    /// table, every cell escaped as [`cell`] escapes it.
    pub fn markdown(&self) -> String {
        let mut table = self.markdown.clone();
        table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
        format!("### {}\n\n{table}\n", text(&self.title))
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "=== {} ===", self.title)?;
        writeln!(f, "{}", self.table)
    }
}

/// Where the tables go, and whether they are the run's only report: standard
/// output, or standard error when standard output carries the JSON
/// (`--output -`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// Standard output, and the tables are all the run leaves (no report file):
    /// a failure to print them fails the run.
    Stdout,
    /// Standard output, after the report was saved to a file: the tables only
    /// show it, so a failure to print them is a warning.
    StdoutBesideFile,
    /// Standard error: standard output carries the JSON, already written.
    Stderr,
}

/// Prints the tables, then `notes` one per line: the one place that prints
/// results. It runs after the JSON is saved, so a closed pipe (`| head`) loses
/// nothing; see [`print_text`] for what a failure to print means.
pub fn print_tables(tables: &[Table], notes: &[String], screen: Screen) -> Result<()> {
    let mut text = String::new();
    for t in tables {
        text.push_str(&format!("{t}\n"));
    }
    for n in notes {
        text.push_str(n);
        text.push('\n');
    }
    print_text(&text, screen)
}

/// Prints `text` where `screen` says. A reader that went away (EPIPE: `| head`,
/// `| true`) ends printing quietly, as ripgrep does. Any other failure
/// (`> /dev/full`) is an error when the text is all the run leaves
/// ([`Screen::Stdout`]), and a one-line `warning:` when the report was saved
/// already: the exit code then still says the report is there.
pub fn print_text(text: &str, screen: Screen) -> Result<()> {
    let printed = match screen {
        Screen::Stdout | Screen::StdoutBesideFile => write_flushed(std::io::stdout().lock(), text),
        Screen::Stderr => write_flushed(std::io::stderr().lock(), text),
    };
    match printed {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) if screen != Screen::Stdout => {
            // Standard error may be the stream that failed: then this says nothing.
            let _ = writeln!(
                std::io::stderr(),
                "warning: the tables could not be printed ({e}); the report was saved"
            );
            Ok(())
        }
        other => other.context("printing to standard output"),
    }
}

fn write_flushed(mut to: impl Write, text: &str) -> std::io::Result<()> {
    to.write_all(text.as_bytes())?;
    to.flush()
}
