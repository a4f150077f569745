//! A README section drawn from the same tables the terminal prints (the full
//! ones: generate's under `--wide`, its compact table is the terminal's
//! alone): per file, where its numbers came from, then its view's tables
//! ([`views::show`]) in Markdown, its notes, and its charts (drawn again from
//! the JSON). Every
//! experiment's section but the tables across machines is this, so that a
//! column added to a view reaches the README with no second description of
//! it, and a new experiment's view says what its section holds.

use anyhow::Result;

use super::{figure, link, Built, Source};
use crate::export::markdown::text;
use crate::export::views::{self, Own, Section};
use crate::schema::{Kind, ResultFile};

/// The section `## <kind>`: one subsection per result file of `files` that
/// its view gives one ([`views::section`]), headed "<framework> on
/// <machine>" and the view's words for the file (the model it ran, say),
/// under the first file's intro; nothing when none has.
pub(super) fn section(built: &mut Built, kind: Kind, files: &[&Source]) -> Result<()> {
    let own: Vec<(&Source, &ResultFile, Own)> = files
        .iter()
        .filter_map(|s| {
            let file = s.result()?;
            match views::section(file) {
                Section::Own(own) => Some((*s, file, own)),
                Section::Across => None,
            }
        })
        .collect();
    let Some((_, _, first)) = own.first() else {
        return Ok(());
    };
    built
        .readme
        .push_str(&format!("## {}\n\n{}\n\n", kind.name(), first.intro));
    for (s, file, own) in own {
        subsection(built, kind, s, file, own);
    }
    Ok(())
}

/// One file's subsection: where its numbers came from, its tables and notes
/// in Markdown, its chart and the view's other figures.
fn subsection(built: &mut Built, kind: Kind, s: &Source, file: &ResultFile, own: Own) {
    let f = s.facts();
    // What the file says is text on the page, never markup (`<script>`).
    let what = own
        .heading
        .map_or(String::new(), |w| format!(": {}", text(&w)));
    built.readme.push_str(&format!(
        "### {} on {}{what}\n\nFrom {} ({}, commit {}, {}).\n\n",
        text(&f.framework),
        s.machine,
        link(&s.file, &s.path()),
        text(&f.device),
        text(&f.commit),
        text(&f.date),
    ));
    let shown = views::show(file);
    for t in &shown.tables {
        built.readme.push_str(&t.markdown());
        built.readme.push('\n');
    }
    for n in &shown.notes {
        built.readme.push_str(&format!("- {}\n", text(n)));
    }
    built.readme.push('\n');
    let charts = views::chart(file).map(|svg| ("", svg));
    for (suffix, svg) in charts.into_iter().chain(own.figures) {
        let path = s.chart_path().replace(".svg", &format!("{suffix}.svg"));
        let alt = format!("{}{suffix} on {}", kind.name(), s.machine);
        built.readme.push_str(&figure(&alt, &path, &s.path()));
        built.files.push((path, svg));
    }
}
