//! The `summary` program, run as a user runs it: on a machine folder written
//! by the real experiment programs (small sizes), it prints the reference lab's
//! table with this machine's values, the lab's and their ratio, says why the
//! rows it cannot fill are empty, and writes the same as Markdown beside the
//! results. What it cannot read is one error line, a non-zero exit and no file.

mod common;
use common::run;

use std::path::{Path, PathBuf};
use std::process::Output;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn reference() -> String {
    common::repo_file("tests/fixtures/reference-lab-gb10/week05-results-gb10.json")
        .to_string_lossy()
        .into_owned()
}

/// Runs the experiments on `device` into `results/`, as `just results` does
/// (small sizes), then `summary` on the same device; returns its output and
/// the machine folder.
fn results_then_summary(device: &str, results: &Path) -> (Output, PathBuf) {
    let dir = results.to_str().unwrap();
    let common = ["--device", device, "--results-dir", dir];
    for (name, extra) in [
        ("basics", &[][..]),
        (
            "matmul",
            &["--size", "128", "--iters", "2", "--warmup", "1"][..],
        ),
        (
            "cpu_vs_gpu",
            &["--size", "96", "--iters", "4", "--warmup", "1"][..],
        ),
        (
            "block",
            &[
                "--hidden", "32", "--heads", "2", "--mlp", "48", "--seq", "8", "--iters", "2",
            ][..],
        ),
    ] {
        let out = run(name, &[&common[..], extra].concat());
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    }
    let out = run(
        "summary",
        &[&common[..], &["--reference", &reference()]].concat(),
    );
    // The experiments and the summary agree on the machine's folder.
    let folders: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    (out, folders[0].clone())
}

fn summary_of_a_fresh_run(device: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (out, machine) = results_then_summary(device, tmp.path());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Every row of the lab's table is there, with the lab's value.
    for (item, lab) in [
        ("1024x1024 FP32 tensor", "4194304"),
        ("GPU FP16 matmul, median", "1.548"),
        ("CPU FP32 matmul, throughput", "816.7"),
        ("GPU vs CPU at FP32", "22.60"),
        ("FP16 matmul measured peak (GPU)", "128.0"),
    ] {
        let line = stdout.lines().find(|l| l.contains(item)).unwrap_or("");
        assert!(line.contains(lab), "{item}: {line}\n{stdout}");
    }
    // Sizes of tensors do not depend on the machine.
    let bytes = stdout
        .lines()
        .find(|l| l.contains("1024x1024 FP16 tensor"))
        .unwrap();
    assert!(
        bytes.contains("2097152") && bytes.contains("1.00"),
        "{bytes}"
    );
    // Matmul ran at 128 here, 4096 in the lab: shown, not compared.
    let cpu = stdout
        .lines()
        .find(|l| l.contains("CPU FP32 matmul, median"))
        .unwrap();
    assert!(cpu.contains("n = 128 here, 4096 in the lab"), "{cpu}");
    let gpu = stdout
        .lines()
        .find(|l| l.contains("GPU FP32 matmul, median"))
        .unwrap();
    let driver = stdout
        .lines()
        .find(|l| l.contains("newest CUDA the driver supports"))
        .unwrap();
    if device == "cpu" {
        assert!(gpu.contains("no GPU in this run"), "{gpu}");
        assert!(driver.contains("no CUDA device in this run"), "{driver}");
    } else {
        assert!(gpu.contains("n = 128 here"), "{gpu}");
        assert!(!driver.contains("no CUDA device"), "{driver}");
    }

    // The same, as Markdown, beside the results; nothing else left behind.
    let md = std::fs::read_to_string(machine.join("summary.md")).unwrap();
    assert!(md.starts_with("# In one place: "), "{md}");
    // The block's answer to the lab's caveat, in this machine's numbers.
    assert!(
        md.contains(
            "The lab's caveat, measured here (block.json): fp16 against fp32: prefill: matmuls "
        ),
        "{md}"
    );
    assert!(md.contains("\n| 1024x1024 FP32 tensor "), "{md}");
    assert!(
        md.contains("### CUDA: the driver's version and the build's"),
        "{md}"
    );
    let mut names: Vec<String> = std::fs::read_dir(&machine)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "basics.json",
            "block.csv",
            "block.json",
            "block.svg",
            "cpu_vs_gpu.csv",
            "cpu_vs_gpu.json",
            "matmul.csv",
            "matmul.json",
            "summary.md"
        ]
    );
}

mod cpu {
    #[test]
    fn summary_of_a_fresh_run() {
        super::summary_of_a_fresh_run("cpu");
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    #[test]
    fn summary_of_a_fresh_run() {
        super::summary_of_a_fresh_run("cuda");
    }
}

/// Expects `summary` to fail with one `error:` line containing `expect`, and
/// to write no summary.md into `machine`.
fn refused(args: &[&str], machine: &Path, expect: &str) {
    let out = run("summary", args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(expect), "{expect}: {stderr}");
    assert!(!machine.join("summary.md").exists());
}

#[test]
fn missing_inputs_are_one_line_and_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path().join("m");
    let dir = machine.to_str().unwrap();
    refused(
        &["--machine-dir", dir, "--reference", &reference()],
        &machine,
        "no results folder",
    );
    std::fs::create_dir(&machine).unwrap();
    refused(
        &["--machine-dir", dir, "--reference", &reference()],
        &machine,
        "nothing to summarize",
    );
    std::fs::write(machine.join("matmul.json"), "{}").unwrap();
    let missing = tmp.path().join("nope.json");
    refused(
        &[
            "--machine-dir",
            dir,
            "--reference",
            missing.to_str().unwrap(),
        ],
        &machine,
        "cannot read the reference lab's file",
    );
    // A candle-lab result file is not the lab's layout.
    let not_lab = tmp.path().join("not-lab.json");
    std::fs::write(&not_lab, r#"{"schema_version": "2.1"}"#).unwrap();
    refused(
        &[
            "--machine-dir",
            dir,
            "--reference",
            not_lab.to_str().unwrap(),
        ],
        &machine,
        "not the reference lab's results layout",
    );
}

#[test]
fn unreadable_and_missing_files_are_named_in_their_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path();
    let committed = common::repo_file("tests/fixtures/amd-epyc-2t/basics.json");
    std::fs::copy(committed, machine.join("basics.json")).unwrap();
    std::fs::write(machine.join("matmul.json"), r#"{"schema_version": "9.0"}"#).unwrap();
    // As `just summary --machine-dir DIR` runs it: --machine-dir wins.
    let out = run(
        "summary",
        &[
            "--results-dir",
            "results",
            "--machine-dir",
            machine.to_str().unwrap(),
            "--reference",
            &reference(),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let row = |item: &str| stdout.lines().find(|l| l.contains(item)).unwrap();
    let gpu = row("GPU FP32 matmul, median");
    assert!(gpu.contains("schema_version \"9.0\""), "{gpu}");
    let speedup = row("GPU vs CPU at FP32");
    assert!(
        speedup.contains("no cpu_vs_gpu.json yet (run `just cpu-vs-gpu`)"),
        "{speedup}"
    );
    let bytes = row("FP32 bytes per element");
    assert!(bytes.contains("1.00"), "{bytes}");
    assert!(machine.join("summary.md").exists());
}

// ------------------------------------- issue 19: summary stays inside results/

/// A machine folder holding the committed CPU files.
fn committed_machine(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for name in ["basics", "matmul", "cpu_vs_gpu"] {
        let from = common::repo_file(&format!("tests/fixtures/amd-epyc-2t/{name}.json"));
        std::fs::copy(from, dir.join(format!("{name}.json"))).unwrap();
    }
}

#[test]
fn summary_md_is_never_written_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path().join("m");
    committed_machine(&machine);
    let elsewhere = tmp.path().join("elsewhere.txt");
    std::fs::write(&elsewhere, "theirs").unwrap();
    std::os::unix::fs::symlink("../elsewhere.txt", machine.join("summary.md")).unwrap();
    let dir = machine.to_str().unwrap();
    let out = run(
        "summary",
        &["--machine-dir", dir, "--reference", &reference()],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("summary.md: it is a symbolic link"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "theirs");

    // Under --results-dir, the machine folder itself must not be a link.
    let info = candle_lab::device::select("cpu".parse().unwrap())
        .unwrap()
        .1;
    let results = tmp.path().join("results");
    std::fs::create_dir(&results).unwrap();
    std::os::unix::fs::symlink("../m", results.join(info.slug())).unwrap();
    std::fs::remove_file(machine.join("summary.md")).unwrap();
    let out = run(
        "summary",
        &[
            "--device",
            "cpu",
            "--results-dir",
            results.to_str().unwrap(),
            "--reference",
            &reference(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(": it is a symbolic link"), "{stderr}");
    assert!(!machine.join("summary.md").exists());
}

#[test]
fn impossible_numbers_are_refused_in_their_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path().join("m");
    committed_machine(&machine);
    let path = machine.join("matmul.json");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["matmul"]["precisions"][0]["median_ms"] = serde_json::json!("NaN");
    std::fs::write(&path, file.to_string()).unwrap();
    let dir = machine.to_str().unwrap();
    let out = run(
        "summary",
        &["--machine-dir", dir, "--reference", &reference()],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("/matmul/precisions/0 (fp32): median_ms is \"NaN\", not a time in ms"),
        "{stdout}"
    );
    std::fs::remove_file(machine.join("summary.md")).unwrap();
    // The lab's file goes through the same checks.
    let lab = tmp.path().join("lab.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference()).unwrap()).unwrap();
    value["matmul"]["cpu_fp32_ms"] = serde_json::json!(0);
    std::fs::write(&lab, value.to_string()).unwrap();
    refused(
        &["--machine-dir", dir, "--reference", lab.to_str().unwrap()],
        &machine,
        "lab.json: /matmul: cpu_fp32_ms is 0, not a time in ms",
    );
}

#[test]
fn summary_md_is_never_one_of_its_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let machine = tmp.path().join("m");
    committed_machine(&machine);
    let input = machine.join("matmul.json");
    let before = std::fs::read(&input).unwrap();
    std::fs::hard_link(&input, machine.join("summary.md")).unwrap();
    let dir = machine.to_str().unwrap();
    let out = run(
        "summary",
        &["--machine-dir", dir, "--reference", &reference()],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("summary.md: it is a result file"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
}
