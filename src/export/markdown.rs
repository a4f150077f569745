//! Markdown, made one way: GitHub pipe tables whose cells escape `|` and keep
//! to one line, used for `summary.md` and `results/README.md`.

/// One table row: `| a | b |`.
pub fn row(cells: &[String]) -> String {
    let mut out = String::from("|");
    for c in cells {
        out.push(' ');
        out.push_str(&cell(c));
        out.push_str(" |");
    }
    out.push('\n');
    out
}

/// A whole table: header, the alignment row (`---`, or `---:` for the columns
/// in `right`), then the rows.
pub fn table(header: &[String], right: &[usize], rows: &[Vec<String>]) -> String {
    let mut out = row(header);
    let align: Vec<String> = (0..header.len())
        .map(|i| if right.contains(&i) { "---:" } else { "---" }.to_string())
        .collect();
    out.push('|');
    for a in &align {
        out.push(' ');
        out.push_str(a);
        out.push_str(" |");
    }
    out.push('\n');
    for r in rows {
        out.push_str(&row(r));
    }
    out
}

/// A cell's text: `|` escaped and line breaks as spaces, so a value cannot end
/// its row or the table.
pub fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_their_row() {
        assert_eq!(row(&["a|b".into(), "c\nd".into()]), "| a\\|b | c d |\n");
        let t = table(
            &["x".into(), "n".into()],
            &[1],
            &[vec!["a".into(), "1".into()]],
        );
        assert_eq!(t, "| x | n |\n| --- | ---: |\n| a | 1 |\n");
    }
}
