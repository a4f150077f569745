//! generate's table as the terminal shows it by default: one speed table for
//! every model the file holds, in [`TERMINAL_COLUMNS`] (llama-bench's is
//! seven columns): the model (when there are several), precision, kernels, pp
//! and tg tokens/s, tg's share of its bound and what binds tg. The free text a
//! cell cannot hold (what holds a row back, in full; a failed row's error)
//! goes to the notes under it. The full tables, 14 columns and more, are
//! `--wide`'s, the README's and the CSV's ([`super::show`]).

use super::short;
use crate::export::table::{Table, TERMINAL_COLUMNS};
use crate::export::views::{self, Shown};
use crate::schema::{
    GenerateMeasured, GenerateResults, GenerateRow, KernelChoice, ResultFile, LAB_SUFFIX,
};

/// The widest "binds tg" cell, in characters: a longer verdict is cut there
/// (its whole text is in the notes).
const BINDS_MAX: usize = 32;

/// The compact table and the notes: what the table left out, then the full
/// view's. A file without rows (`--prepare-only`) is the full view's notes.
pub(super) fn compact(file: &ResultFile, r: &GenerateResults) -> Shown {
    let full = super::show(file, r);
    let models = r.models();
    let rows: Vec<(&GenerateResults, &GenerateRow)> = models
        .iter()
        .flat_map(|m| m.rows.iter().map(move |row| (*m, row)))
        .collect();
    if rows.is_empty() {
        return full;
    }
    let (title, named) = title(file, &models);
    // The model in its own column when the title cannot name it.
    let by_model = models.len() > 1 || !named;
    // llama-bench's "t/s": the cells say the number, the title says tokens/s.
    let mut header = vec![
        "precision",
        "kernels",
        "pp t/s",
        "tg t/s",
        "% bound",
        "binds tg",
    ];
    if by_model {
        header.insert(0, "model");
    }
    let mut table = Table::new(title, &header);
    // Text: the columns before pp's (model, precision, kernels) and the last.
    let last = header.len() - 1;
    let left: Vec<usize> = (0..last - 3).chain([last]).collect();
    table.align_left(&left);
    table.fit(TERMINAL_COLUMNS);
    // What the cells cut comes first, under the table it explains; then the
    // full view's notes (prompt, answers, bounds, speedups, kernels line).
    let mut notes = Vec::new();
    for (m, row) in rows {
        let mut cells = cells(row);
        let who = format!("{} ({} kernels)", precision(row), row.kernels.name());
        let who = match by_model {
            true => format!("{}: {who}", short(&m.model)),
            false => who,
        };
        notes.extend(match &row.measured {
            Some(x) => x.held_back_by.as_ref().map(|why| {
                format!(
                    "{who}: tg at {} of its bound; what holds it back: {why}",
                    pct(x)
                )
            }),
            None => Some(format!(
                "{who}: error: {}",
                row.error.as_deref().unwrap_or("")
            )),
        });
        if by_model {
            cells.insert(0, short(&m.model));
        }
        table.row(cells);
    }
    notes.extend(full.notes);
    notes.push(
        "--wide: the full tables (threads held, each bound, time to first token, pp against the \
         roofline and its matmuls, bytes; each row against fp32; where a token's time goes)"
            .into(),
    );
    Shown {
        tables: vec![table],
        notes,
    }
}

/// The table's title, and whether it names the model: one model's file (or
/// random weights' shape) when there is one and the line fits, else none
/// (the rows name it). pp's and tg's token counts are the run's, one for
/// every model.
fn title(file: &ResultFile, models: &[&GenerateResults]) -> (String, bool) {
    let r = models[0];
    let same = models
        .iter()
        .all(|m| (m.pp_tokens, m.tg_tokens) == (r.pp_tokens, r.tg_tokens));
    let tokens = match same {
        true => format!("pp{} and tg{} tokens/s", r.pp_tokens, r.tg_tokens),
        false => "pp and tg tokens/s (each model's tokens in --wide)".into(),
    };
    let on = format!("on {} ({}): {tokens}", file.device.label, file.device.name);
    let named = format!("generate: {} {on}", r.model.key());
    // "=== " and " ===" around it.
    let fits = named.chars().count() + 8 <= TERMINAL_COLUMNS as usize;
    match models.len() == 1 && fits {
        true => (named, true),
        false => (format!("generate {on}"), false),
    }
}

/// A row's cells: precision, kernels, pp and tg tokens/s, % of the bound and
/// what binds tg; a failed row says "error" (its error is in the notes).
fn cells(row: &GenerateRow) -> Vec<String> {
    let mut cells = vec![precision(row), row.kernels.name().to_string()];
    let Some(x) = &row.measured else {
        cells.extend(["error", "-", "-", "see the notes"].map(String::from));
        return cells;
    };
    let mark = views::mark(x.tg.availability.as_ref());
    cells.extend([
        format!("{:.1}", x.pp_tokens_per_s),
        format!("{:.1}{mark}", x.tg_tokens_per_s),
        pct(x),
        binds(x),
    ]);
    cells
}

/// The precision without the lab kernels' suffix: the kernels have a column.
fn precision(row: &GenerateRow) -> String {
    let p = &row.precision;
    match row.kernels {
        KernelChoice::Lab => p.strip_suffix(LAB_SUFFIX).unwrap_or(p).to_string(),
        _ => p.clone(),
    }
}

/// tg as a percentage of its bound, "-" without one.
fn pct(x: &GenerateMeasured) -> String {
    super::opt(x.tg_pct_of_bound, |v| format!("{v:.0}%"))
}

/// What binds tg: what holds it back, shortened ([`short_reason`]), where
/// the row is held back (under half its bound, or its threads idle); else,
/// from half its bound up, reading the weights where they live, the level its
/// bound was read in; "-" where the file says neither.
fn binds(x: &GenerateMeasured) -> String {
    let level = x.tg_bound.as_ref().map(|b| b.level.as_str());
    match (&x.held_back_by, x.tg_pct_of_bound) {
        (Some(why), _) => short_reason(why),
        (None, Some(pct)) if pct >= 50.0 => match level {
            Some(l) if l.contains("memory") => l.to_string(),
            Some(l) => format!("memory ({l})"),
            None => "memory".into(),
        },
        _ => "-".into(),
    }
}

/// A held-back verdict in a cell: each of its clauses up to its reason
/// ("matmuls (79% of the token): they read ..." is "matmuls (79%)", "held 1.0
/// of 2 threads: ..." is "1.0 of 2 threads"), cut at [`BINDS_MAX`] with "..."
/// where that is still too long. The whole verdict is in the notes.
fn short_reason(why: &str) -> String {
    let clauses: Vec<String> = why
        .split("; ")
        .map(|c| {
            let head = c.split(": ").next().unwrap_or(c);
            let head = head.strip_prefix("held ").unwrap_or(head);
            head.replace(" of the token)", ")")
        })
        .collect();
    let short = clauses.join("; ");
    match short.chars().count() > BINDS_MAX {
        true => short.chars().take(BINDS_MAX - 3).collect::<String>() + "...",
        false => short,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Body;

    /// Every line of `text`, measured as comfy-table measures a cell (its
    /// characters: the tables hold no double-width ones).
    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    /// The tables as the terminal prints them ([`crate::export::table::print_tables`]).
    fn printed(shown: &Shown) -> String {
        shown.tables.iter().map(|t| format!("{t}\n")).collect()
    }

    /// Every committed generate file: its default terminal tables fit
    /// [`TERMINAL_COLUMNS`], a several-model file among them; `--wide`'s are
    /// the full ones, as the README shows them.
    #[test]
    fn every_committed_generate_file_fits_the_terminal_and_wide_is_the_full_table() {
        let mut several = 0;
        let mut files = Vec::new();
        for path in crate::schema::tests::committed_results() {
            let file = crate::schema::read(&path).unwrap();
            if let Body::Generate(r) = &file.body {
                files.push((path.display().to_string(), file.clone(), r.clone()));
            }
        }
        // A file of several models, whether or not one is committed (`just
        // results-then-test` replaces this machine's folder with the small
        // preset's one-model file before the tests run): the first file's
        // model again, named as another file.
        if let Some((name, file, r)) = files.first().cloned() {
            let mut other = r.clone();
            other.model.file = Some(format!("other-{}", other.model.file.unwrap_or_default()));
            other.model.shape = other.model.shape.map(|s| format!("other-{s}"));
            let mut nested = r.clone();
            nested.more_models = vec![other];
            let mut file = file.clone();
            file.body = Body::Generate(nested.clone());
            files.push((format!("{name}, nested"), file, nested));
        }
        for (name, file, r) in &files {
            let compact = views::terminal(file, views::Width::Compact);
            let text = printed(&compact);
            assert!(
                widest(&text) <= TERMINAL_COLUMNS as usize,
                "{name}:\n{text}"
            );
            assert_eq!(compact.tables.len(), 1, "{name}");
            several += usize::from(r.models().len() > 1);
            // Every held-back verdict is whole in the notes.
            for row in r.models().iter().flat_map(|m| &m.rows) {
                if let Some(why) = row.measured.as_ref().and_then(|x| x.held_back_by.as_ref()) {
                    assert!(
                        compact.notes.iter().any(|n| n.ends_with(why.as_str())),
                        "{why}"
                    );
                }
            }
            let wide = views::terminal(file, views::Width::Wide);
            let full = views::show(file);
            assert_eq!(printed(&wide), printed(&full), "{name}");
            assert_eq!(wide.notes, full.notes, "{name}");
            assert!(printed(&wide).contains("where a generated token's time goes"));
            assert!(
                widest(&printed(&wide)) > TERMINAL_COLUMNS as usize,
                "{name}"
            );
        }
        assert!(
            several > 0,
            "no committed generate file holds several models"
        );
    }

    /// A failed row is one line saying "error", its error in the notes; a
    /// held-back row's verdict is shortened in its cell and whole in a note.
    #[test]
    fn a_failed_row_and_a_verdict_go_to_the_notes() {
        let mut f = super::super::tests::file();
        let Body::Generate(r) = &mut f.body else {
            panic!("not generate")
        };
        let why = "matmuls (92% of the token): they read the weights at 5% of the ladder's read";
        r.rows[0].measured.as_mut().unwrap().held_back_by = Some(why.into());
        let r = r.clone();
        let shown = compact(&f, &r);
        let table = shown.tables[0].to_string();
        let line = |p: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("│ {p} ")))
                .unwrap_or_else(|| panic!("no {p} row:\n{table}"))
                .to_string()
        };
        assert!(
            line("q4_1 (stored)").contains("┆ matmuls (92%) "),
            "{table}"
        );
        assert!(line("bf16").contains(" error ┆ "), "{table}");
        // Under half its bound with no verdict: no claim on what binds it.
        assert!(line("fp32").ends_with("┆ -             │"), "{table}");
        for note in [
            format!(
                "q4_1 (stored) (candle kernels): tg at 20% of its bound; what holds it back: {why}"
            ),
            "bf16 (candle kernels): error: out of memory".to_string(),
        ] {
            assert!(shown.notes.contains(&note), "{note}: {:?}", shown.notes);
        }
        assert!(table.starts_with("=== generate: m.gguf on cpu (Xeon): pp64 and tg32 tokens/s"));
    }

    #[test]
    fn a_verdict_is_shortened_to_its_reasons() {
        let why = "held 1.1 of 2 threads: the matmuls at one token run single-threaded; matmuls \
                   (79% of the token): they read the weights at 45% of the ladder's read (DRAM 2 \
                   threads)";
        assert_eq!(short_reason(why), "1.1 of 2 threads; matmuls (79%)");
        assert_eq!(
            short_reason("element-wise (4% of the token)"),
            "element-wise (4%)"
        );
        let long = short_reason(&"x".repeat(100));
        assert_eq!(
            (long.chars().count(), long.ends_with("...")),
            (BINDS_MAX, true)
        );
    }
}
