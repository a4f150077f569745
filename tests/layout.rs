//! The crate's shape, checked from its code (docs/architecture.md): the
//! top-level modules of `src/` import each other without a circle, and so do
//! the files inside each of them; result types import
//! nothing that measures; the measurement cores never import the exporters,
//! the flags or the readers; the CUDA module is a leaf; and no source file holds
//! more than 500 lines of code outside its tests. Imports are read from
//! `crate::` paths in code, comments and strings left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines of code a file may hold before its tests.
const MAX_LINES: usize = 500;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code before a file's `#[cfg(test)] mod tests`, or none for a file of
/// tests (`tests.rs`, declared `#[cfg(test)] mod tests;` by its parent).
fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let mut end = text.len();
    let mut at = 0;
    while let Some(i) = text[at..].find("#[cfg(test)]") {
        let after = text[at + i + "#[cfg(test)]".len()..].trim_start();
        if after.starts_with("mod tests") {
            end = at + i;
            break;
        }
        at += i + 1;
    }
    text[..end].to_string()
}

/// `text` without comments, string and char literals (so that a path in a
/// doc comment or a message is not an import).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'/', Some(b'/')) => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            (b'"', _) => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal ('x', '\n'), not a lifetime ('a).
            (b'\'', _) if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                i += 1;
                while i < b.len() && b[i] != b'\'' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            (c, _) => {
                out.push(c as char);
                i += 1;
            }
        }
    }
    out
}

/// The top-level modules `code` names after `crate::` (`crate::a::b`,
/// `crate::{a, b::c}`).
fn imports(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names only: at the group's own depth, up to its `}`.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        found.insert(ident(&group[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

/// The top-level module a file belongs to: `src/stats.rs` is `stats`, and every
/// file under `src/clock/` is `clock`.
fn top_module(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every top-level module's imports of the others.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let top = top_module(&f);
        if top == "lib" {
            continue;
        }
        let mut used = imports(&strip(&code(&f)));
        used.remove(&top);
        graph.entry(top).or_default().extend(used);
    }
    graph
}

/// A circle in `graph`, as the modules around it, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut c = path[at..].to_vec();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|k| visit(k, graph, &mut Vec::new(), &mut done))
}

#[test]
fn imports_are_read_from_code_not_comments() {
    let code = "use crate::{a, b::{c, d}, e};\n// crate::zz\nlet s = \"crate::yy\";\nfn f<'a>(x: &'a crate::f::T) {}";
    let got = imports(&strip(code));
    let want: BTreeSet<String> = ["a", "b", "e", "f"].map(String::from).into();
    assert_eq!(got, want);
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("x".to_string(), ["y".to_string()].into()),
        ("y".to_string(), ["x".to_string()].into()),
    ]
    .into();
    assert_eq!(circle(&g), Some(vec!["x".into(), "y".into(), "x".into()]));
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let graph = graph();
    assert!(graph.len() > 10, "modules found: {graph:?}");
    let shown: Vec<String> = graph
        .iter()
        .map(|(k, v)| format!("{k} -> {}", v.iter().cloned().collect::<Vec<_>>().join(" ")))
        .collect();
    assert_eq!(circle(&graph), None, "import graph:\n{}", shown.join("\n"));
}

/// The module path of a file under `src/`: `src/export/views/sweep.rs` is
/// `export::views::sweep`, and `src/clock/mod.rs` is `clock` (a folder's
/// `mod.rs` is the folder).
fn module_path(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every path `code` names from `crate::` or `super::`, groups expanded
/// (`crate::a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`), as absolute
/// module paths (a `super::` path resolved against `module`).
fn paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    fn tree(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        let mut rest = text;
        loop {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                break;
            }
            path.push(name.clone());
            rest = &rest[name.len()..];
            match rest.strip_prefix("::") {
                Some(after) => rest = after,
                None => break,
            }
            if let Some(group) = rest.strip_prefix('{') {
                // Each item of the group, at the group's own depth.
                let mut depth = 0;
                let mut start = 0;
                for (j, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            tree(group[start..j].trim(), &path, out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            tree(group[start..j].trim(), &path, out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        tree(&code[i + "crate::".len()..], &[], &mut out);
    }
    for (i, _) in code.match_indices("super::") {
        // `super::super::x` counts once, from its first `super`.
        if code[..i].ends_with("super::") {
            continue;
        }
        let mut at = &code[i..];
        let mut base = module.to_vec();
        while let Some(after) = at.strip_prefix("super::") {
            base.pop();
            at = after;
        }
        tree(at, &base, &mut out);
    }
    out
}

/// Inside each top-level module, which of its files import which: an edge
/// from a file's module to the deepest file module a path it names lies in,
/// leaving out a module's own ancestors and descendants (a parent dispatching
/// to its children, and the children using the parent's types, is the usual
/// shape of a module, not a circle).
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_path(f);
        if me.len() < 2 || f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let related = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
        for path in paths(&strip(&code(f)), &me) {
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p));
            if let Some(t) = target {
                if t[0] == me[0] && !related(&t, &me) {
                    graph.entry(me.join("::")).or_default().insert(t.join("::"));
                }
            }
        }
    }
    graph
}

#[test]
fn paths_are_resolved_with_groups_and_super() {
    let me: Vec<String> = ["export", "views", "sweep"].map(String::from).into();
    let got = paths(
        "use crate::export::{svg::{a, b}, table::T};\nuse super::super::csv::C;\nsuper::Records",
        &me,
    );
    let want: Vec<Vec<String>> = vec![
        vec!["export".into(), "svg".into(), "a".into()],
        vec!["export".into(), "svg".into(), "b".into()],
        vec!["export".into(), "table".into(), "T".into()],
        vec!["export".into(), "csv".into(), "C".into()],
        vec!["export".into(), "views".into(), "Records".into()],
    ];
    assert_eq!(got, want);
}

#[test]
fn no_import_circle_between_files_inside_one_module() {
    let graph = file_graph();
    let shown: Vec<String> = graph
        .iter()
        .map(|(k, v)| format!("{k} -> {}", v.iter().cloned().collect::<Vec<_>>().join(" ")))
        .collect();
    assert_eq!(
        circle(&graph),
        None,
        "file import graph:\n{}",
        shown.join("\n")
    );
}

#[test]
fn each_layer_imports_only_what_its_place_allows() {
    let graph = graph();
    let uses = |m: &str| graph.get(m).cloned().unwrap_or_default();
    // Result types import nothing that measures (and nothing that shows).
    let measuring = ["bench", "clock", "cuda", "device", "memory", "telemetry"];
    let showing = ["export", "read", "cli", "outcome"];
    for m in measuring.iter().chain(&showing) {
        assert!(!uses("schema").contains(*m), "schema imports {m}");
    }
    // The cores never import the exporters, the flags or the readers.
    for m in ["export", "cli", "read", "outcome"] {
        assert!(!uses("bench").contains(m), "bench imports {m}");
    }
    // The readers read result types back: they measure nothing and take the
    // formulas from their own module, not from the cores.
    for m in [
        "bench",
        "clock",
        "device",
        "memory",
        "telemetry",
        "cuda",
        "cli",
        "experiment",
    ] {
        assert!(!uses("read").contains(m), "read imports {m}");
    }
    // CUDA-only code is a leaf.
    assert!(uses("cuda").is_empty(), "cuda imports {:?}", uses("cuda"));
    // Exporters never measure.
    for m in measuring.iter().filter(|&&m| m != "device") {
        assert!(!uses("export").contains(*m), "export imports {m}");
    }
}

#[test]
fn no_source_file_is_over_500_lines_of_code() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, code(f).lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(f, n)| format!("{}: {n}", f.display()))
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines before the tests: {long:?}"
    );
}

/// The experiments as the registry declares them: the variants of
/// `schema::Body`.
fn experiments() -> Vec<String> {
    let text = std::fs::read_to_string(src().join("schema/mod.rs")).unwrap();
    let body = text.split("pub enum Body {").nth(1).unwrap();
    let body = &body[..body.find("\n}").unwrap()];
    body.lines()
        .map(str::trim)
        .filter_map(|l| Some(l.split_once('(')?.0.to_string()))
        .filter(|v| !v.starts_with('#') && !v.is_empty())
        .collect()
}

/// The `match` expressions of `code` (comments and strings stripped), each
/// as the patterns of its arms: the text before each `=>` at the top of its
/// block (nested matches are read from their own `match`).
fn matches(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    for (at, _) in code.match_indices("match") {
        let before = at.checked_sub(1).map(|i| b[i]);
        let after = b.get(at + 5).copied();
        if before.is_some_and(ident) || !after.is_some_and(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let Some(open) = code[at..].find('{').map(|i| at + i) else {
            continue;
        };
        out.push(arms(&code[open + 1..]));
    }
    out
}

/// The arms' patterns of a match block whose `{` came just before `block`.
fn arms(block: &str) -> Vec<String> {
    let (mut depth, mut arms, mut pattern) = (0i32, Vec::new(), String::new());
    // In an arm's body; `Some(d)`: a body in braces, which ends back at `d`.
    let (mut in_body, mut braced) = (false, None);
    let mut chars = block.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' | '(' | '[' => {
                if in_body && depth == 0 && c == '{' && braced.is_none() {
                    braced = Some(0);
                }
                depth += 1;
            }
            '}' | ')' | ']' => {
                depth -= 1;
                if depth < 0 {
                    break;
                }
                if in_body && depth == 0 && c == '}' && braced == Some(0) {
                    (in_body, braced) = (false, None);
                    continue;
                }
            }
            ',' if depth == 0 && in_body => {
                in_body = false;
                braced = None;
                continue;
            }
            '=' if depth == 0 && !in_body && chars.peek() == Some(&'>') => {
                chars.next();
                arms.push(pattern.trim().trim_start_matches(',').trim().to_string());
                pattern.clear();
                in_body = true;
                continue;
            }
            _ => {}
        }
        if !in_body {
            pattern.push(c);
        }
    }
    arms
}

/// Whether `pattern` names the experiment `v` by its body or its kind
/// (`Body::Sweep(r)`, `Kind::Matmul | Kind::Sweep`, and in an `impl Body` or
/// `impl Kind` (`in_impl`), `Self::Sweep(r)`).
fn names(pattern: &str, v: &str, in_impl: bool) -> bool {
    let prefixes: &[&str] = if in_impl {
        &["Body::", "Kind::", "Self::"]
    } else {
        &["Body::", "Kind::"]
    };
    prefixes.iter().any(|p| {
        let needle = format!("{p}{v}");
        pattern.match_indices(&needle).any(|(i, _)| {
            !pattern[i + needle.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        })
    })
}

/// Whether an arm's pattern takes whatever is left (`_`, `other`, `_ if x`):
/// a match with one needs no new arm for a new experiment.
fn catches_all(pattern: &str) -> bool {
    let last = pattern.rsplit('|').next().unwrap_or(pattern);
    let head = last.split(" if ").next().unwrap_or(last).trim();
    let binding = !head.is_empty() && head.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    head == "_" || (binding && !matches!(head, "true" | "false"))
}

/// Adding an experiment costs at most two match arms the compiler names,
/// outside the experiment's own files (the schema's rows, `Body::rows`, and
/// its view, `views::view`): every other reader goes through those two. The
/// compiler names a match that lists experiments and has no arm for the rest.
#[test]
fn a_new_experiment_needs_at_most_two_match_arms() {
    let found = matches("match &f.body {\n Body::Sweep(r) => r.x(),\n Body::Kind { a, .. } => { match a { _ => 1 } }\n _ => None,\n}");
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0], ["Body::Sweep(r)", "Body::Kind { a, .. }", "_"]);
    assert_eq!(found[1], ["_"]);
    let two = "Kind::Matmul | Kind::Sweep";
    assert!(names(two, "Sweep", false) && !names(two, "Swee", false));
    assert!(names("Self::Sweep(r)", "Sweep", true) && !names("Self::Sweep(r)", "Sweep", false));
    assert!(catches_all("_") && catches_all("other") && catches_all("Kind::A | _"));
    assert!(!catches_all("Body::Sweep(r)") && !catches_all("None") && !catches_all("true"));

    let variants = experiments();
    assert!(variants.len() >= 10, "{variants:?}");
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut exhaustive = Vec::new();
    for f in &files {
        let code = strip(&code(f));
        let in_impl = code.contains("impl Body") || code.contains("impl Kind");
        for arms in matches(&code) {
            let listed = arms
                .iter()
                .any(|a| variants.iter().any(|v| names(a, v, in_impl)));
            if listed && !arms.iter().any(|a| catches_all(a)) {
                exhaustive.push(format!("{}: {}", f.display(), arms.join(" | ")));
            }
        }
    }
    assert!(
        exhaustive.len() <= 2,
        "{} matches over the experiments need an arm for a new one: {exhaustive:#?}",
        exhaustive.len()
    );
}

/// Lines a function may span outside the tests, from `fn` to its closing
/// brace: past this, its parts get names of their own.
const MAX_FN_LINES: usize = 80;

/// The functions of `code` (comments and strings stripped), each as its
/// name and the lines it spans from `fn` to its closing brace (a function
/// without a body, in a trait, is left out).
fn functions(code: &str) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        if at > 0 && ident(b[at - 1]) {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // The body opens at the first `{` outside the signature's brackets,
        // unless a `;` ends a declaration first (`[u8; 4]` is a type).
        let rest = &code[at..];
        let mut brackets = 0;
        let end = rest.char_indices().find(|&(_, c)| {
            match c {
                '(' | '[' => brackets += 1,
                ')' | ']' => brackets -= 1,
                _ => {}
            }
            brackets == 0 && (c == '{' || c == ';')
        });
        let Some((open, '{')) = end else {
            continue;
        };
        // A macro's pattern or template (`fn $name(...) $body`) is no function.
        if name.is_empty() || rest[..open].contains('$') {
            continue;
        }
        let mut depth = 0;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i)
        });
        if let Some(close) = close {
            out.push((name, rest[..=close].lines().count()));
        }
    }
    out
}

#[test]
fn no_function_outside_the_tests_is_over_80_lines() {
    let two = "fn a(x: [u8; 2]) -> u8 {\n    if x[0] > 1 { 2 } else { 3 }\n}\nfn b();\nfn c() { d(|| { 1 }) }\n(fn $f:ident() $b:block) => { fn $f() $b }";
    assert_eq!(
        functions(two),
        [("a".to_string(), 3), ("c".to_string(), 1)],
        "a declaration has no body, braces inside count, and a macro's template is no function"
    );
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            functions(&strip(&code(f)))
                .into_iter()
                .filter(|(_, n)| *n > MAX_FN_LINES)
                .map(|(name, n)| format!("{}: {name} {n}", f.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_FN_LINES} lines, name their parts: {long:#?}"
    );
}

/// A CamelCase variant's snake_case name (`CpuVsGpu` -> `cpu_vs_gpu`).
fn snake(v: &str) -> String {
    let mut out = String::new();
    for (i, c) in v.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// No experiment's core (`src/bench/NAME.rs` or `src/bench/NAME/`, NAME an
/// experiment of the registry) names another's: what two experiments share
/// lives below them (the model layer, the ladder, the clock), so that an
/// experiment can change without another changing with it.
#[test]
fn no_experiment_core_imports_another() {
    let names: BTreeSet<String> = experiments().iter().map(|v| snake(v)).collect();
    assert!(
        names.contains("generate") && names.contains("cpu_vs_gpu"),
        "{names:?}"
    );
    let mut files = Vec::new();
    rust_files(&src().join("bench"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let me = module_path(f);
        let Some(own) = me.get(1).filter(|n| names.contains(*n)) else {
            continue;
        };
        for path in paths(&strip(&code(f)), &me) {
            if let [bench, other, ..] = &path[..] {
                if bench == "bench" && names.contains(other) && other != own {
                    found.push(format!("{}: {}", f.display(), path.join("::")));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "experiment cores importing another: {found:#?}"
    );
}

/// One struct says a model's sizes (`model::Config`): outside the result
/// types (which record them), no other struct holds a width and a head
/// count, as five did before the model layer (a Llama's dims, a layer's
/// config, a block's dims...).
#[test]
fn one_struct_says_a_models_sizes() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut found = Vec::new();
    for f in files
        .iter()
        .filter(|f| !f.starts_with(src().join("schema")))
    {
        let text = strip(&code(f));
        for (at, _) in text.match_indices("struct ") {
            let rest = &text[at + "struct ".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let Some(open) = rest.find('{').filter(|&o| !rest[..o].contains(';')) else {
                continue;
            };
            let body = &rest[open..rest[open..].find('}').map_or(rest.len(), |e| open + e)];
            let field =
                |n: &str| body.contains(&format!("pub {n}:")) || body.contains(&format!(" {n}:"));
            if field("hidden") && (field("heads") || field("mlp")) {
                found.push(format!("{}: {name}", f.display()));
            }
        }
    }
    let want = src().join("model/config.rs");
    assert_eq!(
        found,
        [format!("{}: Config", want.display())],
        "structs holding a model's sizes"
    );
}

/// One file per architecture in `src/model/arch/`, named as GGUF names the
/// architecture, each declared there: what docs/architecture.md says a new
/// architecture is.
#[test]
fn every_architecture_is_one_file_of_the_model_layer() {
    let dir = src().join("model/arch");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    files.sort();
    let mut archs: Vec<String> = candle_lab::model::Arch::ALL
        .iter()
        .map(|a| a.name().to_string())
        .collect();
    archs.sort();
    assert_eq!(files, archs, "src/model/arch/ against model::Arch::ALL");
    let seam = std::fs::read_to_string(src().join("model/arch.rs")).unwrap();
    for a in &archs {
        assert!(
            seam.contains(&format!("mod {a};")),
            "arch.rs declares no mod {a}"
        );
    }
    let doc = std::fs::read_to_string(src().join("../docs/architecture.md")).unwrap();
    assert!(
        doc.contains("`src/model/arch/NAME.rs`"),
        "docs/architecture.md says where an architecture goes"
    );
}
