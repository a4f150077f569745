//! The documentation stays true to the tree: every relative link in README.md
//! and docs/ resolves, every public `just` recipe is in the README's recipe
//! table, and every path of this repository that a doc, a docstring or a
//! comment names (`src/...`, `pytorch/...`, `scripts/...`) exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and every Markdown file under docs/.
fn docs() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    if let Ok(dir) = std::fs::read_dir(root().join("docs")) {
        let mut md: Vec<PathBuf> = dir
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        md.sort();
        out.extend(md);
    }
    out
}

/// The targets of `[text](target)` links in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for doc in docs() {
        let dir = doc.parent().unwrap();
        for target in links(&read(&doc)) {
            let path = target.split('#').next().unwrap_or("");
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            if !dir.join(path).exists() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere: {broken:#?}");
}

/// The justfile's public recipes: lines `name ...:` at the start, not `_name`.
fn recipes() -> BTreeSet<String> {
    read(&root().join("justfile"))
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .filter(|l| !l.contains(":=") && l.contains(':'))
        .map(|l| l.split([' ', ':']).next().unwrap().to_string())
        .collect()
}

#[test]
fn every_recipe_is_in_the_readmes_table() {
    let readme = read(&root().join("README.md"));
    let table: String = readme
        .lines()
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    let all = recipes();
    assert!(all.len() > 20, "recipes found: {all:?}");
    let missing: Vec<&String> = all
        .iter()
        .filter(|r| {
            !table.contains(&format!("just {r}`")) && !table.contains(&format!("just {r} "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "recipes not in the README's table: {missing:?}"
    );
}

/// Every file of the tree the checks below read: sources, scripts, docs.
fn texts(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if ![
                "target",
                "results",
                "fixtures",
                ".git",
                "__pycache__",
                "schema",
            ]
            .contains(&name.as_str())
                && !name.starts_with('.')
            {
                texts(&path, out);
            }
        } else if [".rs", ".py", ".sh", ".md", ".toml"]
            .iter()
            .any(|x| name.ends_with(x))
            || name == "justfile"
            || name == "run"
        {
            out.push(path);
        }
    }
}

/// Paths of this repository named in `text`: `src/...`, `pytorch/...`,
/// `scripts/...`, `experiments/...`, `tools/...`, `tests/...`, `docs/...`
/// ending in a file name with an extension, or in `/` for a folder. A path
/// with a placeholder (`NAME`, `<machine>`, `*`) is a pattern, not a path.
fn named_paths(text: &str) -> Vec<String> {
    const ROOTS: [&str; 7] = [
        "src/",
        "pytorch/",
        "scripts/",
        "experiments/",
        "tools/",
        "tests/",
        "docs/",
    ];
    let ok = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    for r in ROOTS {
        for (i, _) in text.match_indices(r) {
            // A whole path: not the tail of another (`cuda/src/x`).
            if text[..i]
                .chars()
                .last()
                .is_some_and(|c| ok(c) || c == '$' || c == '}')
            {
                continue;
            }
            let path: String = text[i..].chars().take_while(|&c| ok(c)).collect();
            let path = path.trim_end_matches('.').to_string();
            let after = text[i + path.len()..].chars().next();
            if after.is_some_and(|c| c == '<' || c == '*' || c == '{' || c == '$') {
                continue;
            }
            let file = path
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains('.') && !last.ends_with('.'));
            if (file || path.ends_with('/')) && !path.contains("NAME") && path.len() > r.len() {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn every_path_the_docs_and_comments_name_exists() {
    let mut files = Vec::new();
    texts(&root(), &mut files);
    let mut stale = BTreeSet::new();
    for f in &files {
        let text = read(f);
        for p in named_paths(&text) {
            if !root().join(&p).exists() {
                let rel = f.strip_prefix(root()).unwrap().display().to_string();
                stale.insert(format!("{rel}: {p}"));
            }
        }
    }
    assert!(stale.is_empty(), "paths that do not exist: {stale:#?}");
}

#[test]
fn paths_are_found_whole_and_patterns_skipped() {
    let text = "see src/bench/matmul.rs, `pytorch/matmul/cli.py`; src/bench/block/ and \
                src/schema/NAME.rs, results/<machine>/x.json, tests/*.rs, cuda/src/lib.rs.";
    assert_eq!(
        named_paths(text),
        [
            "src/bench/matmul.rs",
            "src/bench/block/",
            "pytorch/matmul/cli.py"
        ]
    );
}
