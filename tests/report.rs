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
    let listing = candle_lab::read::report::load(&results).unwrap();
    assert_eq!(listing.skipped, Vec::<String>::new());
    let built = candle_lab::read::report::build(&listing.sources).unwrap();
    let stale = "results/README.md is stale: run `just report` and commit what it writes";
    let committed = fs::read_to_string(results.join("README.md")).unwrap_or_default();
    assert!(committed == built.readme, "{stale}");
    for (path, text) in &built.files {
        let committed = fs::read_to_string(results.join(path)).unwrap_or_default();
        assert!(&committed == text, "{path}: {stale}");
    }
}

// ---------------------------------------- issue 19: report stays inside results/

fn run_report(dir: &Path) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_report"))
        .arg("--results-dir")
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A run that hangs (a FIFO read) fails the test instead of the suite.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("report did not end in 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// One machine folder with the committed CPU matmul, under `root/results`.
fn one_machine(root: &Path) -> PathBuf {
    let results = root.join("results");
    fs::create_dir_all(results.join("m")).unwrap();
    fs::copy(
        repo().join("tests/fixtures/amd-epyc-2t/matmul.json"),
        results.join("m/matmul.json"),
    )
    .unwrap();
    results
}

#[test]
fn a_link_inside_results_is_never_written_through() {
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    let elsewhere = root.path().join("elsewhere.txt");
    fs::write(&elsewhere, "theirs").unwrap();
    std::os::unix::fs::symlink("../../elsewhere.txt", results.join("m/matmul.svg")).unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("m/matmul.svg: it is a symbolic link")
            && errors[0].contains("never through a link"),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(&elsewhere).unwrap(), "theirs");
    assert!(
        !results.join("README.md").exists(),
        "checked before anything is written"
    );
}

#[test]
fn a_machine_folder_that_is_a_link_is_skipped_and_said() {
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    let outside = root.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::copy(results.join("m/matmul.json"), outside.join("matmul.json")).unwrap();
    std::os::unix::fs::symlink(&outside, results.join("other")).unwrap();
    std::os::unix::fs::symlink("..", results.join("up")).unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for name in ["other", "up"] {
        assert!(
            stderr.contains(&format!(
                "warning: {}: skipped: a symbolic link",
                results.join(name).display()
            )),
            "{name}: {stderr}"
        );
    }
    assert!(
        !outside.join("matmul.svg").exists(),
        "nothing written through other"
    );
    assert!(
        !root.path().join("matmul.svg").exists(),
        "nothing written through up"
    );
    assert!(results.join("m/matmul.svg").is_file());
    let readme = fs::read_to_string(results.join("README.md")).unwrap();
    assert!(
        !readme.contains("other") && !readme.contains("(up/"),
        "{readme}"
    );
}

#[test]
fn a_fifo_is_skipped_without_waiting() {
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        results.join("m/x.json"),
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("m/x.json: skipped: a FIFO, not a regular file"),
        "{stderr}"
    );
    assert!(results.join("README.md").is_file());
}

#[test]
fn odd_machine_names_are_skipped_and_said_not_written_into_the_readme() {
    use std::os::unix::ffi::OsStrExt;
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    let names: [&std::ffi::OsStr; 4] = [
        "new\nline".as_ref(),
        "a space".as_ref(),
        "x](javascript:alert(1))".as_ref(),
        std::ffi::OsStr::from_bytes(b"caf\xe9"),
    ];
    for name in names {
        fs::create_dir(results.join(name)).unwrap();
        fs::copy(
            results.join("m/matmul.json"),
            results.join(name).join("matmul.json"),
        )
        .unwrap();
    }
    fs::copy(
        results.join("m/matmul.json"),
        results.join("m/odd name.json"),
    )
    .unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 5, "one line each: {stderr}");
    for want in [
        r"new\nline'",
        "a space'",
        "javascript:alert(1))'",
        r"caf\xE9'",
        "odd name.json'",
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(want) && w.contains("skipped: its name is not only letters")),
            "{want}: {stderr}"
        );
    }
    let readme = fs::read_to_string(results.join("README.md")).unwrap();
    for bad in ["javascript", "a space", "new\nline", "odd name"] {
        assert!(!readme.contains(bad), "{bad} in\n{readme}");
    }
}

#[test]
fn impossible_numbers_and_huge_files_are_listed_not_used() {
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    let mut file: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(results.join("m/matmul.json")).unwrap()).unwrap();
    file["matmul"]["precisions"][0]["median_ms"] = serde_json::json!(-5);
    fs::write(results.join("m/bad.json"), file.to_string()).unwrap();
    fs::File::create(results.join("m/big.json"))
        .unwrap()
        .set_len(64 * 1024 * 1024 + 1)
        .unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let readme = fs::read_to_string(results.join("README.md")).unwrap();
    for want in [
        "[bad.json](m/bad.json) | not read: /matmul/precisions/0 (fp32): median_ms is -5, not a time in ms (1e-6 to 1e9) |",
        "[big.json](m/big.json) | not read: it is 67108865 bytes, more than the 64 MiB a result file may have (refused before parsing) |",
    ] {
        assert!(readme.contains(want), "{want} missing in\n{readme}");
    }
}

/// A block file gets its section and its chart of where the time goes, and a
/// row measured on a contended machine carries the mark.
#[test]
fn a_block_and_a_contended_row_show_in_the_readme() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m");
    let bin = |name: &str| match name {
        "block" => env!("CARGO_BIN_EXE_block"),
        _ => env!("CARGO_BIN_EXE_matmul"),
    };
    let run = |name: &str, args: &[&str]| {
        let out = Command::new(bin(name))
            .args(["--device", "cpu", "--output"])
            .arg(m.join(format!("{name}.json")))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(
        "block",
        &[
            "--hidden", "32", "--heads", "2", "--mlp", "48", "--seq", "8", "--iters", "2",
        ],
    );
    run(
        "matmul",
        &["--size", "64", "--iters", "2", "--dtypes", "fp32"],
    );
    let path = m.join("matmul.json");
    let mut file: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    file["matmul"]["precisions"][0]["availability"] = serde_json::json!({
        "row_kind": "cpu", "wall_s": 1.0, "process_cpu_s": 1.0, "threads": 2,
        "threads_held": 1.0, "held_fraction": 0.5, "logical_cpus": 2, "others_cpu_pct": 50.0,
        "steal_pct": 0.0, "procs_running_before": 3, "procs_running_after": 3,
        "load_1m_before": 2.0, "load_1m_after": 2.0, "judged": true, "contended": true,
        "reasons": ["held 1.00 of 2 threads"],
    });
    fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
    report(dir.path());
    let readme = fs::read_to_string(dir.path().join("README.md")).unwrap();
    assert!(readme.contains("## block"), "{readme}");
    // The block's own tables, as its program prints them: a table per phase.
    assert!(readme.contains("### block prefill:"), "{readme}");
    assert!(readme.lines().any(|l| l.starts_with("| fp32 ")), "{readme}");
    // One clock per table, named; tokens/s is a layer's.
    assert!(readme.contains("times from the wall clock"), "{readme}");
    assert!(
        readme.contains("| tokens/s through one layer |"),
        "{readme}"
    );
    assert!(readme.contains("2 heads (2 key/value)"), "{readme}");
    assert!(readme.contains("GFLOP/s (contended) |"), "{readme}");
    let svg = fs::read_to_string(m.join("block.svg")).unwrap();
    assert!(
        svg.contains("time per call (ms)") && svg.contains("attention matmul"),
        "{svg}"
    );
}

#[test]
fn no_output_is_an_input_even_by_a_hard_link() {
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    let input = results.join("m/matmul.json");
    let before = fs::read(&input).unwrap();
    fs::hard_link(&input, results.join("m/matmul.svg")).unwrap();
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("m/matmul.svg: it is a result file")
            && errors[0].contains("matmul.json"),
        "{stderr}"
    );
    assert_eq!(fs::read(&input).unwrap(), before);
    assert!(
        !results.join("README.md").exists(),
        "refused before any write"
    );
}

#[test]
fn what_a_file_names_is_text_in_the_readme_never_markup() {
    // Issue 52: a device named `<script>` stayed markup in results/README.md.
    let root = tempfile::tempdir().unwrap();
    let results = one_machine(root.path());
    fs::copy(
        repo().join("tests/fixtures/intel-xeon-2t/block.json"),
        results.join("m/block.json"),
    )
    .unwrap();
    for file in ["m/matmul.json", "m/block.json"] {
        let path = results.join(file);
        let mut json: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        json["device"]["name"] = "<script>alert(1)</script> & <img src=x onerror=alert(1)>".into();
        json["environment"]["framework_version"] = "0.1 | <b>bold</b>\nnext".into();
        fs::write(&path, json.to_string()).unwrap();
    }
    let out = run_report(&results);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let readme = fs::read_to_string(results.join("README.md")).unwrap();
    for markup in ["<script", "<img", "<b>", "bold</b>\nnext"] {
        assert!(!readme.contains(markup), "{markup} in\n{readme}");
    }
    for text in [
        "&lt;script>alert(1)&lt;/script> &amp; &lt;img src=x",
        "candle 0.1 \\| &lt;b>bold&lt;/b> next",
    ] {
        assert!(readme.contains(text), "{text} not in\n{readme}");
    }
    for svg in ["m/matmul.svg", "m/block.svg"] {
        if let Ok(svg) = fs::read_to_string(results.join(svg)) {
            assert!(!svg.contains("<script") && !svg.contains("<img"), "{svg}");
        }
    }
}
