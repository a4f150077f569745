//! A README section drawn from the same tables the terminal prints: per file,
//! where its numbers came from, then its view's tables ([`views::show`]) in
//! Markdown, its notes, and its chart (drawn again from the JSON). The
//! `generate`, `kernels`, `overhead` and `block` sections are these, so that
//! a column added to a view reaches the README with no second description of
//! it.

use anyhow::Result;

use super::{figure, link, Built, Source};
use crate::export::markdown::cell;
use crate::export::views;
use crate::schema::Kind;

/// The section `## <kind>` with `intro`, one subsection per result file of
/// `files`, headed "<framework> on <machine>" and `heading`'s words for the
/// file (the model it ran, say) when it has some.
pub(super) fn section(
    built: &mut Built,
    kind: Kind,
    intro: &str,
    files: &[&Source],
    heading: impl Fn(&crate::schema::Body) -> Option<String>,
) -> Result<()> {
    let results: Vec<(&Source, &crate::schema::ResultFile)> = files
        .iter()
        .filter_map(|s| Some((*s, s.result()?)))
        .collect();
    if results.is_empty() {
        return Ok(());
    }
    built
        .readme
        .push_str(&format!("## {}\n\n{intro}\n\n", kind.name()));
    for (s, file) in results {
        let f = s.facts();
        let what = heading(&file.body).map_or(String::new(), |w| format!(": {w}"));
        built.readme.push_str(&format!(
            "### {} on {}{what}\n\nFrom {} ({}, commit {}, {}).\n\n",
            f.framework,
            s.machine,
            link(&s.file, &s.path()),
            f.device,
            f.commit,
            f.date,
        ));
        let shown = views::show(file);
        for t in &shown.tables {
            built.readme.push_str(&t.markdown());
            built.readme.push('\n');
        }
        for n in &shown.notes {
            built.readme.push_str(&format!("- {}\n", cell(n)));
        }
        built.readme.push('\n');
        if let Some(svg) = views::chart(file) {
            let path = s.chart_path();
            let alt = format!("{} on {}", kind.name(), s.machine);
            built.readme.push_str(&figure(&alt, &path, &s.path()));
            built.files.push((path, svg));
        }
    }
    Ok(())
}
