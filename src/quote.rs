//! Text as bash reads it back: the recorded command line of a result file,
//! and paths in messages, quoted so a newline or a stray byte cannot break a
//! line or be misread.

use std::ffi::OsStr;

/// The command line as typed, to paste back into bash: read with
/// `args_os` (so bytes that are not UTF-8 survive) and each argument quoted only
/// when it needs it.
pub fn command_line() -> String {
    std::env::args_os()
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` as bash reads it back: as is when it is only letters, digits and
/// `,._+:@/-`, else ANSI-C quoted (`$'a b'`, `$'\xFF.json'`). Valid UTF-8 stays
/// readable; other bytes become `\xHH`, so nothing is lost and the result is text.
pub fn shell_quote(arg: &OsStr) -> String {
    use shell_quote::Bash;
    let quoted = match arg.to_str() {
        Some(text) => Bash::quote_vec(text),
        None => Bash::quote_vec(arg),
    };
    // Always text: UTF-8 kept as is, every other byte escaped as ASCII.
    String::from_utf8_lossy(&quoted).into_owned()
}

/// A path for a message: as given, shell-quoted when it holds anything a shell or
/// a terminal would misread (spaces, newlines, bytes that are not UTF-8).
pub fn shown(path: &std::path::Path) -> String {
    shell_quote(path.as_os_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn arguments_are_quoted_only_when_they_need_it() {
        let q = |s: &str| shell_quote(OsStr::new(s));
        assert_eq!(q("--size"), "--size");
        assert_eq!(q("/tmp/out.json"), "/tmp/out.json");
        assert_eq!(q("a b"), "$'a b'");
        assert_eq!(q("a;b$c`d`*"), "$'a;b$c`d`*'");
        assert_eq!(q("it's"), r"$'it\'s'");
        assert_eq!(q(""), "''");
        assert_eq!(q("été"), "$'été'");
        assert_eq!(
            shell_quote(OsStr::from_bytes(b"\xff.json")),
            r"$'\xFF.json'"
        );
    }
}
