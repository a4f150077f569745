//! The `report` program on a copy of the committed results: it writes
//! README.md and the charts, and a second run writes the same bytes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copies every machine folder's JSON files from the repository's results/.
fn copy_results(to: &Path) {
    for machine in fs::read_dir(repo().join("results")).unwrap() {
        let machine = machine.unwrap().path();
        if !machine.is_dir() {
            continue;
        }
        let dest = to.join(machine.file_name().unwrap());
        fs::create_dir_all(&dest).unwrap();
        for file in fs::read_dir(&machine).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|e| e == "json") {
                fs::copy(&file, dest.join(file.file_name().unwrap())).unwrap();
            }
        }
    }
}

/// Every file under `dir` with its bytes, in path order.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn report(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_report"))
        .arg("--results-dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn report_is_deterministic_and_links_what_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    copy_results(dir.path());
    report(dir.path());
    let first = snapshot(dir.path());
    report(dir.path());
    assert_eq!(first, snapshot(dir.path()), "a second run changes nothing");

    let readme = fs::read_to_string(dir.path().join("README.md")).unwrap();
    assert!(readme.starts_with("# Results\n"));
    for section in ["## Files", "## matmul", "## cpu_vs_gpu"] {
        assert!(readme.contains(section), "{section}");
    }
    assert!(readme.contains("reference-lab-gb10/week05-results-gb10.json"));
    // Every link in the README leads to a file that exists.
    for target in readme.split("](").skip(1).filter_map(|t| t.split_once(')')) {
        let path = dir.path().join(target.0);
        assert!(path.is_file(), "broken link {}", target.0);
    }
    // Each machine with a matmul file has its bar chart beside it.
    assert!(dir.path().join("amd-epyc-2t/matmul.svg").is_file());
}

#[test]
fn a_missing_results_folder_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_report"))
        .arg("--results-dir")
        .arg(dir.path().join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: cannot list"), "{stderr}");
}

/// The committed results/README.md and its charts are what `report` makes of
/// the committed JSON: a new result file needs `just report` (as `just results`
/// runs it).
#[test]
fn committed_readme_is_up_to_date() {
    let results = repo().join("results");
    let built = candle_lab::read::report::build(&candle_lab::read::report::load(&results).unwrap())
        .unwrap();
    let stale = "results/README.md is stale: run `just report` and commit what it writes";
    let committed = fs::read_to_string(results.join("README.md")).unwrap_or_default();
    assert!(committed == built.readme, "{stale}");
    for (path, text) in &built.files {
        let committed = fs::read_to_string(results.join(path)).unwrap_or_default();
        assert!(&committed == text, "{path}: {stale}");
    }
}
