//! Errors as users see them: one line. Candle appends a backtrace to some
//! errors when RUST_BACKTRACE is set, and anyhow's `{:#}` joins causes with
//! ": "; [`error_line`] keeps the first line of that chain.

/// The first line of an error's text with its causes (`{e:#}`).
pub fn error_line(e: &dyn std::fmt::Display) -> String {
    let text = format!("{e:#}");
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_as_one_line_without_backtraces() {
        let e = anyhow::anyhow!("driver said no\n   0: candle_core::error::Error::bt")
            .context("--device cuda:0");
        assert_eq!(error_line(&e), "--device cuda:0: driver said no");
    }
}
