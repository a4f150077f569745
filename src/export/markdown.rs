//! Markdown, made one way: GitHub pipe tables whose cells escape `|` and keep
//! to one line, used for `summary.md` and `results/README.md`, and [`text`]:
//! what a result file says (a device's name, a model's) as Markdown shows it,
//! never as markup (a device named `<script>` is text on the page).

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

/// A cell's text: [`text`], and `|` escaped, so a value cannot end its row or
/// the table.
pub fn cell(s: &str) -> String {
    text(s).replace('|', "\\|")
}

/// Text from a result file for a Markdown line (a heading, a paragraph, a
/// list item): `&` and `<` as HTML's entities, so that no tag or entity in it
/// is rendered as one, and line breaks as spaces, so that it stays on its line.
pub fn text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace(['\n', '\r'], " ")
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

    #[test]
    fn what_a_file_says_is_shown_as_text_never_as_markup() {
        assert_eq!(
            cell("<script>alert(1)</script> & co | x"),
            "&lt;script>alert(1)&lt;/script> &amp; co \\| x"
        );
        assert_eq!(text("a\r\n<b>"), "a  &lt;b>");
        assert_eq!(text("f32->f16"), "f32->f16", "a lone > is no markup");
    }
}
