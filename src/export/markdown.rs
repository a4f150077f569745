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

/// A table cell's text: `&` and `<` as entities (no tag), line breaks as
/// spaces and `|` escaped, so a value cannot end its row or the table. A
/// cell may hold the report's own markup (a link to a file), so the inline
/// markers are left as they are: a file's free text goes through [`text`].
pub fn cell(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace(['\n', '\r'], " ")
        .replace('|', "\\|")
}

/// Text from a result file for a Markdown line (a heading, a paragraph, a
/// list item, a cell): `&` and `<` as HTML's entities, so that no tag or
/// entity in it is rendered as one; CommonMark's inline markers backslashed
/// (`\\`, `` ` ``, `*`, `[`, `]`, and `_` where it could open or close an
/// emphasis: not between two letters or digits, as in `q4_1`), and a leading
/// `#` or `>`, so that no link, code span, emphasis, heading or quote is
/// made of it; line breaks as spaces, so that it stays on its line.
pub fn text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let word = |i: Option<usize>| {
        i.and_then(|i| chars.get(i))
            .is_some_and(|c| c.is_alphanumeric())
    };
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '_' if !(word(i.checked_sub(1)) && word(Some(i + 1))) => out.push_str("\\_"),
            '#' | '>' if i == 0 => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_a_file_is_never_markup() {
        assert_eq!(text("q4_1 [0.9, 1.1] x*y"), "q4_1 \\[0.9, 1.1\\] x\\*y");
        assert_eq!(
            text("_a_ `c` \\ <b> & #1"),
            "\\_a\\_ \\`c\\` \\\\ &lt;b> &amp; #1"
        );
        assert_eq!(text("# title"), "\\# title");
        assert_eq!(text("> quote\nnext"), "\\> quote next");
    }

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
