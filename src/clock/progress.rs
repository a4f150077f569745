//! The progress bar a timed item shows on stderr while it runs.

use indicatif::{ProgressBar, ProgressStyle};

use crate::schema::Sampling;

/// A progress bar on stderr for one timed item, shaped by its plan: a bar of
/// known length for a fixed plan, a spinner counting runs for an adaptive one.
/// Hidden when stderr is not a terminal.
pub fn progress_bar(sampling: &Sampling, label: &str) -> ProgressBar {
    let (bar, template) = match sampling.runs() {
        Some(runs) => (
            ProgressBar::new(runs as u64),
            "{prefix:>14} [{bar:30}] {pos}/{len} runs, {elapsed}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{prefix:>14} {spinner} {pos} runs, {elapsed} {msg}",
        ),
    };
    let bar = bar.with_prefix(label.to_string());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
