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
    let text = "see src/bench/square/mod.rs, `pytorch/matmul/cli.py`; src/bench/block/ and \
                src/schema/NAME.rs, results/<machine>/x.json, tests/*.rs, cuda/src/lib.rs.";
    assert_eq!(
        named_paths(text),
        [
            "src/bench/square/mod.rs",
            "src/bench/block/",
            "pytorch/matmul/cli.py"
        ]
    );
}

// ------------------------------------------------ docs/architecture.md's layout

/// The lines of docs/architecture.md's layout: the text block under `## Layout`.
fn layout_block() -> Vec<String> {
    let text = read(&root().join("docs/architecture.md"));
    let after = text
        .split_once("## Layout")
        .expect("docs/architecture.md has a ## Layout section")
        .1;
    let block = after
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("the layout is a ```text block")
        .0;
    block.lines().map(String::from).collect()
}

/// The file extensions a layout word must end in to be read as a file name.
const EXTENSIONS: [&str; 8] = ["rs", "py", "sh", "md", "json", "toml", "cu", "svg"];

/// The paths the layout names, each with where it resolves in the tree (or
/// `None`). A line starting at column 0 opens an entry (`src/read/`; a file
/// entry, `src/cli.rs`, opens its folder); a word ending in `/` or in a file
/// extension is a path, read from the entry's folder, else from the root,
/// else as a name anywhere under the entry's folder (`side.rs` in
/// `summary/ (side.rs ...)`). A word with a placeholder (`<machine>`, `*`,
/// `NAME`) is a pattern, not a path.
fn layout_paths(lines: &[String]) -> Vec<(String, Option<PathBuf>)> {
    let mut folder = root();
    let mut out = Vec::new();
    for line in lines {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || "(),;:`'\"".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        if !line.starts_with(' ') {
            if let Some(first) = words.first() {
                let entry = root().join(first);
                folder = if first.ends_with('/') {
                    entry
                } else {
                    entry.parent().unwrap().to_path_buf()
                };
            }
        }
        for word in words {
            let word = word.trim_end_matches('.');
            let is_path = word.ends_with('/')
                || word
                    .rsplit_once('.')
                    .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext));
            let pattern = word.contains(['<', '*']) || word.contains("NAME");
            if !is_path || pattern || word.starts_with('.') || word.contains("://") {
                continue;
            }
            let rel = word.trim_end_matches('/');
            let found = [folder.join(rel), root().join(rel)]
                .into_iter()
                .find(|p| p.exists())
                .or_else(|| find_under(&folder, rel));
            out.push((word.to_string(), found));
        }
    }
    out
}

/// The first path under `dir` (depth first, sorted) whose tail is `rel`.
fn find_under(dir: &Path, rel: &str) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.join(rel).exists() && path.is_dir() {
            return Some(path.join(rel));
        }
        if path.is_dir() && !path.ends_with("__pycache__") {
            if let Some(found) = find_under(&path, rel) {
                return Some(found);
            }
        }
    }
    None
}

#[test]
fn every_path_in_the_architecture_layout_exists() {
    let paths = layout_paths(&layout_block());
    assert!(paths.len() > 40, "paths read from the layout: {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|(_, found)| found.is_none())
        .map(|(word, _)| word)
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md's layout names paths that do not exist: {missing:?}"
    );
}

/// The modules src/lib.rs declares (`pub mod NAME;`, `mod NAME;`).
fn lib_modules() -> BTreeSet<String> {
    read(&root().join("src/lib.rs"))
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("pub ").unwrap_or(l.trim());
            l.strip_prefix("mod ")?.strip_suffix(';').map(String::from)
        })
        .collect()
}

/// Every module src/lib.rs declares (as `src/NAME.rs` or `src/NAME/`), every folder
/// under src/, and every package under pytorch/ is in the layout: a new
/// module cannot go unlisted.
#[test]
fn every_module_and_package_is_in_the_architecture_layout() {
    let listed: BTreeSet<PathBuf> = layout_paths(&layout_block())
        .into_iter()
        .filter_map(|(_, found)| found)
        .collect();
    let mut unlisted = Vec::new();
    let modules = lib_modules();
    assert!(
        modules.len() > 15,
        "modules read from src/lib.rs: {modules:?}"
    );
    for m in &modules {
        let (file, dir) = (
            root().join(format!("src/{m}.rs")),
            root().join("src").join(m),
        );
        if !listed.contains(&file) && !listed.contains(&dir) {
            unlisted.push(format!("src/{m} (mod {m} in src/lib.rs)"));
        }
    }
    for parent in ["src", "pytorch"] {
        for entry in std::fs::read_dir(root().join(parent)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() && !name.starts_with(['.', '_']) && !listed.contains(&path) {
                unlisted.push(format!("{parent}/{name}/"));
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "not in docs/architecture.md's layout: {unlisted:?}"
    );
}

// ------------------------------------------- the files docs/results.md names

/// The files the programs and tools write into a machine folder (and
/// `results/README.md`), by file name, per writer. The truth the docs describe
/// is the code, not the committed folders (a CPU machine's holds no sweep and
/// no cpu_vs_gpu: `just results` leaves them out in a CPU-only build):
/// each experiment's JSON and every `export::FORMATS` entry that applies to
/// it; what `report` builds from the committed results (its charts and the
/// README); and `summary`'s file, which tools/summary.rs names.
fn written_files() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    use candle_lab::export::FORMATS;
    use candle_lab::schema::Kind;
    let mut out = std::collections::BTreeMap::new();
    for kind in Kind::all() {
        let n = kind.name();
        let mut files = BTreeSet::from([format!("{n}.json")]);
        for format in FORMATS.iter().filter(|f| f.applies_to(kind)) {
            files.insert(format!("{n}.{}", format.extension()));
        }
        out.insert(n.to_string(), files);
    }
    let results = root().join("results");
    let listing = candle_lab::read::report::load(&results).unwrap();
    let built = candle_lab::read::report::build(&listing.sources).unwrap();
    assert!(built.readme.starts_with("# Results"));
    let mut report = BTreeSet::from(["README.md".to_string()]);
    for (path, _) in &built.files {
        report.insert(path.rsplit('/').next().unwrap().to_string());
    }
    out.insert("report".into(), report);
    let summary = read(&root().join("tools/summary.rs"));
    assert!(
        summary.contains("join(\"summary.md\")"),
        "summary writes summary.md"
    );
    out.insert("summary".into(), BTreeSet::from(["summary.md".to_string()]));
    out
}

/// The file names (`name.json`, `results/README.md` as `README.md`) in `text`'s
/// backticked words.
fn file_names(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.rsplit_once('.')
                .is_some_and(|(s, x)| !s.is_empty() && ["json", "csv", "svg", "md"].contains(&x))
        })
        .map(|w| w.rsplit('/').next().unwrap().to_string())
        .collect()
}

/// docs/results.md's table of files is what the code writes: each
/// experiment's row names exactly the files its program writes, every
/// experiment has its row, `report`'s and `summary`'s rows name only files
/// they write, and every `results/<machine>/FILE` the page names elsewhere is
/// one of them.
#[test]
fn every_results_file_the_docs_name_is_one_the_programs_write() {
    let text = read(&root().join("docs/results.md"));
    let written = written_files();
    let mut rows = std::collections::BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| program | files in") {
            in_table = true;
            continue;
        }
        if !in_table || line.starts_with("| ---") {
            continue;
        }
        let Some(row) = line.strip_prefix("| ") else {
            break;
        };
        let (writer, files) = row.split_once(" | ").expect("| program | files |");
        rows.insert(writer.trim().to_string(), file_names(files));
    }
    let mut wrong = Vec::new();
    for (writer, named) in &rows {
        match written.get(writer) {
            None => wrong.push(format!("{writer}: no such program")),
            Some(files) if candle_lab::schema::Kind::from_name(writer).is_some() => {
                if named != files {
                    wrong.push(format!(
                        "{writer}: the docs say {named:?}, it writes {files:?}"
                    ));
                }
            }
            Some(files) => wrong.extend(
                named
                    .difference(files)
                    .map(|f| format!("{writer}: the docs name {f}, it writes {files:?}")),
            ),
        }
    }
    for writer in written.keys() {
        if !rows.contains_key(writer) {
            wrong.push(format!("{writer}: no row in the table"));
        }
    }
    let all: BTreeSet<&String> = written.values().flatten().collect();
    for (i, _) in text.match_indices("<machine>/") {
        let name: String = text[i + "<machine>/".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c))
            .collect();
        let name = name.trim_end_matches('.').to_string();
        if name.contains('.') && !all.contains(&name) {
            wrong.push(format!("results/<machine>/{name}: no program writes it"));
        }
    }
    assert!(rows.len() > 10, "rows read from docs/results.md: {rows:?}");
    assert!(wrong.is_empty(), "docs/results.md: {wrong:#?}");
}
