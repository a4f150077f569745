//! `compare` run as a user runs it, on schema 2.0 files these tests build by
//! hand and write to a temporary folder, and on the reference lab's committed
//! file: the verdicts, the exit codes of `--fail-if-slower`, and one error line
//! for each kind of bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn compare(args: &[&Path]) -> Output {
    compare_with(args, &[])
}

fn compare_with(files: &[&Path], flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_compare"))
        .args(files)
        .args(flags)
        .output()
        .expect("compare starts")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Twenty-one wall-time samples around `median` (±2%, `median` in the
/// middle), in a fixed order.
fn samples(median: f64) -> Vec<f64> {
    (0..21)
        .map(|i| median * (1.0 + 0.002 * f64::from((i * 8) % 21 - 10)))
        .collect()
}

fn row(precision: &str, median: f64) -> Value {
    let mut row = json!({
        "precision": precision, "dtype": "f32", "element_bytes": 4, "gemm_reduced_precision": false,
        "memory_source": "test", "status": "ok", "error": null, "gflops": 1.0,
        "payload_mib": 1.0, "payload_bytes": 1048576, "samples_gpu_ms": [],
        "accuracy": {"rows_checked": 1, "max_rel_err": 0.0, "mean_rel_err": 0.0},
    });
    set_samples(&mut row, samples(median));
    row
}

/// Sets a row's samples and the median and summary made from them.
fn set_samples(row: &mut Value, samples: Vec<f64>) {
    let summary = candle_lab::stats::summarize(&samples).unwrap();
    row["median_ms"] = json!(summary.median);
    row["wall_ms"] = serde_json::to_value(summary).unwrap();
    row["samples_wall_ms"] = json!(samples);
}

/// A schema 2.0 matmul file on `device` with `precisions` (name, median ms);
/// a GPU file also holds its CPU fp32 comparison.
fn matmul(device: &str, precisions: &[(&str, f64)]) -> Value {
    let kind = if device.starts_with("NVIDIA") {
        "cuda"
    } else {
        "cpu"
    };
    json!({
        "schema_version": "2.0",
        "experiment": "matmul",
        "created_utc": "2026-11-30T06:00:00Z",
        "command": "matmul --size 4096",
        "environment": {
            "framework": "candle", "framework_version": "0.11.1", "suite_version": "0.1.0",
            "git_commit": null, "os": "Debian", "arch": "x86_64", "cpu_model": "AMD EPYC",
            "cpu_threads_available": 2, "compute_threads": 2, "build_features": [],
            "target_features": [], "profile": "release", "cuda_build_version": null,
        },
        "device": { "kind": kind, "label": kind, "name": device, "chosen_because": "test" },
        "matmul": {
            "size": 4096, "warmup": 5, "iters": 20, "device": kind, "flops_per_matmul": 1.0,
            "precisions": precisions.iter().map(|(p, ms)| row(p, *ms)).collect::<Vec<_>>(),
            "cpu_fp32": if kind == "cuda" { row("fp32", 300.0) } else { Value::Null },
        },
    })
}

/// `file` with every time (medians and samples) multiplied by `factor`.
fn scaled(file: &Value, factor: f64) -> Value {
    let mut file = file.clone();
    let scale = |row: &mut Value| {
        let s: Vec<f64> = row["samples_wall_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() * factor)
            .collect();
        set_samples(row, s);
    };
    for row in file["matmul"]["precisions"].as_array_mut().unwrap() {
        scale(row);
    }
    if file["matmul"]["cpu_fp32"].is_object() {
        scale(&mut file["matmul"]["cpu_fp32"]);
    }
    file
}

struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn write(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
        path
    }
}

/// The table's rows as cells, header left out.
fn rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| l.starts_with('│') && !l.contains("verdict"))
        .map(|l| {
            l.trim_matches('│')
                .split('┆')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

fn verdicts(stdout: &str) -> Vec<String> {
    rows(stdout)
        .into_iter()
        .map(|r| r.last().unwrap().clone())
        .collect()
}

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference-lab-gb10/week05-results-gb10.json")
}

const GPU_ROWS: [(&str, f64); 3] = [("fp32", 7.0), ("fp16", 1.5), ("bf16", 1.6)];

#[test]
fn a_file_against_itself_is_same_on_every_row() {
    let files = Files::new();
    let a = files.write("a.json", &matmul("NVIDIA H200", &GPU_ROWS));
    let out = compare(&[&a, &a]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(verdicts(&stdout(&out)), ["SAME"; 4], "{}", stdout(&out));
    assert!(
        stdout(&out).contains("percentile-bootstrap"),
        "the method is printed"
    );
    assert!(!stdout(&out).contains("different devices"));
}

#[test]
fn thirty_percent_more_time_is_slow_and_can_fail_the_run() {
    let files = Files::new();
    let base = matmul("NVIDIA H200", &GPU_ROWS);
    let a = files.write("a.json", &base);
    let b = files.write("b.json", &scaled(&base, 1.3));
    let out = compare(&[&a, &b]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(verdicts(&stdout(&out)), ["SLOW"; 4], "{}", stdout(&out));
    assert!(rows(&stdout(&out)).iter().all(|r| r[6] == "1.300 (+30.0%)"));

    let out = compare_with(&[&a, &b], &["--fail-if-slower", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("--fail-if-slower 10 failed: ")
            && err.contains("b.json: slower: matmul 4096 fp32 cuda (+30.0%)"),
        "{err}"
    );
    assert_eq!(
        verdicts(&stdout(&out)).len(),
        4,
        "the table is still printed"
    );

    let out = compare_with(&[&a, &b], &["--fail-if-slower", "50"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // B faster than A: FAST, and never a failure.
    let out = compare_with(&[&b, &a], &["--fail-if-slower", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(verdicts(&stdout(&out)), ["FAST"; 4]);
}

#[test]
fn against_the_reference_lab_there_are_ratios_and_no_verdict() {
    let files = Files::new();
    let a = files.write("h200.json", &matmul("NVIDIA H200", &GPU_ROWS));
    let out = compare(&[&a, &reference()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let table = rows(&text);
    assert_eq!(verdicts(&text), ["ratio only"; 4], "{text}");
    // fp32 on the GPU: 7.44 ms there over 7.0 here.
    assert_eq!(
        table[0][2..7],
        [
            "fp32",
            "NVIDIA H200 / NVIDIA GB10",
            "7.000",
            "7.440",
            "1.063 (+6.3%)"
        ]
    );
    assert_eq!(table[3][3], "AMD EPYC / NVIDIA GB10's CPU");
    assert!(table.iter().all(|r| r[7] == "-"), "no interval");
    assert!(text.contains("different devices"), "{text}");
    assert!(
        text.contains("pytorch 2.13.0+cu130 on NVIDIA GB10"),
        "{text}"
    );
    // A gate cannot pass rows it could not judge.
    let out = compare_with(&[&a, &reference()], &["--fail-if-slower", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("week05-results-gb10.json: no verdict for matmul 4096 fp32 cuda,")
            && err.contains("(ratio only: a side has fewer than 3 samples)"),
        "{err}"
    );
    assert_eq!(
        verdicts(&stdout(&out)).len(),
        4,
        "the table is still printed"
    );
}

#[test]
fn rows_on_one_side_only_are_listed() {
    let files = Files::new();
    let a = files.write(
        "a.json",
        &matmul("AMD EPYC", &[("fp32", 300.0), ("bf16", 400.0)]),
    );
    let b = files.write(
        "b.json",
        &matmul("AMD EPYC", &[("fp32", 300.0), ("fp64", 600.0)]),
    );
    let out = compare(&[&a, &b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = rows(&stdout(&out));
    let summary: Vec<_> = table
        .iter()
        .map(|r| (r[2].as_str(), r[8].as_str()))
        .collect();
    assert_eq!(
        summary,
        [("fp32", "SAME"), ("bf16", "A only"), ("fp64", "B only")]
    );
    assert_eq!(
        (table[1][4].as_str(), table[1][5].as_str()),
        ("400.000", "-")
    );
    assert!(stdout(&out).contains("1 row(s) only in A, 1 only in B"));
}

#[test]
fn every_further_file_is_compared_with_the_first() {
    let files = Files::new();
    let base = matmul("AMD EPYC", &[("fp32", 300.0)]);
    let a = files.write("a.json", &base);
    let b = files.write("b.json", &scaled(&base, 1.3));
    let c = files.write("c.json", &scaled(&base, 0.5));
    let out = compare(&[&a, &b, &c]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(verdicts(&text), ["SLOW", "FAST"], "{text}");
    assert!(
        text.contains("a.json vs B = ")
            && text.contains("b.json ===")
            && text.contains("c.json ==="),
        "{text}"
    );
}

#[test]
fn markdown_is_a_pipe_table() {
    let files = Files::new();
    let a = files.write("a.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    let out = compare_with(&[&a, &a], &["--format", "md"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let table: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(table.len(), 3, "{text}");
    assert!(
        table[2].contains("SAME") && text.starts_with("### "),
        "{text}"
    );
    assert!(!text.contains('│'), "no terminal box drawing in Markdown");
}

#[test]
fn bad_inputs_are_one_line_each_and_print_no_table() {
    let files = Files::new();
    let good = files.write("good.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    let mut future = matmul("AMD EPYC", &[("fp32", 300.0)]);
    future["schema_version"] = json!("3.0");
    let future = files.write("future.json", &future);
    let not_json = files.0.path().join("notes.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let missing = files.0.path().join("missing.json");
    for (bad, want) in [
        (
            &future,
            "future.json: schema_version \"3.0\": this build reads 2.x (and 1)",
        ),
        (&not_json, "notes.txt: not JSON"),
        (&missing, "cannot read "),
    ] {
        for args in [[&good, bad], [bad, &good]] {
            let out = compare(&[args[0].as_path(), args[1].as_path()]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("error: ") && err.contains(want),
                "{want}: {err}"
            );
            assert!(out.stdout.is_empty(), "{}", stdout(&out));
        }
    }
    let out = compare(&[&good]);
    assert_eq!(out.status.code(), Some(2), "one file is not a comparison");
    let out = compare_with(&[&good, &good], &["--fail-if-slower=-5"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn help_states_the_method_and_the_threshold() {
    let out = Command::new(env!("CARGO_BIN_EXE_compare"))
        .arg("--help")
        .output()
        .unwrap();
    let text = stdout(&out);
    for want in [
        "percentile-bootstrap",
        "±5%",
        "SLOW",
        "--fail-if-slower",
        "Exit codes",
    ] {
        assert!(text.contains(want), "{want} missing in\n{text}");
    }
}

/// Every committed result (any machine, any experiment, schema 1 or 2) is
/// read, against the reference lab's file as the baseline.
#[test]
fn reads_every_committed_result() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut files = vec![root.join("reference-lab-gb10/week05-results-gb10.json")];
    for machine in std::fs::read_dir(&root).unwrap() {
        let machine = machine.unwrap().path();
        if !machine.is_dir() || machine.ends_with("reference-lab-gb10") {
            continue;
        }
        for file in std::fs::read_dir(&machine).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|e| e == "json") {
                files.push(file);
            }
        }
    }
    assert!(files.len() > 1, "{files:?}");
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let out = compare(&paths);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("ratio only"), "{}", stdout(&out));
}

// ------------------------------------------------ issue 19: what compare believes

/// `compare A B` with its output discarded: exit code and stderr.
fn refusal(args: &[&Path], flags: &[&str]) -> (Option<i32>, String, String) {
    let out = compare_with(args, flags);
    (out.status.code(), stderr(&out), stdout(&out))
}

#[test]
fn impossible_numbers_are_refused_naming_file_row_and_field() {
    let files = Files::new();
    let good = files.write("good.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    for (name, median, shown) in [
        ("zero.json", json!(0), "median_ms is 0,"),
        ("negative.json", json!(-5), "median_ms is -5,"),
        ("huge.json", json!(1e308), "median_ms is 1e+308,"),
        ("nan.json", json!("NaN"), "median_ms is \"NaN\","),
    ] {
        let mut file = matmul("AMD EPYC", &[("fp32", 300.0)]);
        file["matmul"]["precisions"][0]["median_ms"] = median;
        let bad = files.write(name, &file);
        for flags in [&[][..], &["--fail-if-slower", "10"][..]] {
            let (code, err, out) = refusal(&[&good, &bad], flags);
            assert_eq!(code, Some(1), "{name}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            let want = format!(
                "{name}: /matmul/precisions/0 (fp32): {shown} not a time in ms (1e-6 to 1e9)"
            );
            assert!(
                err.starts_with("error: ") && err.contains(&want),
                "{want}\n{err}"
            );
            assert!(out.is_empty(), "no table: {out}");
        }
    }
    // A median its samples do not give: the verdict (from the samples) and the
    // ratio (from the median) would disagree.
    let mut file = matmul("AMD EPYC", &[("fp32", 300.0)]);
    file["matmul"]["precisions"][0]["median_ms"] = json!(150.0);
    let bad = files.write("lies.json", &file);
    let (code, err, _) = refusal(&[&good, &bad], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lies.json: /matmul/precisions/0 (fp32): median_ms is 150, but the median of its 21 samples_wall_ms is 300"),
        "{err}"
    );
}

#[test]
fn a_gate_that_compared_nothing_fails_and_a_threshold_under_the_band_is_refused() {
    let files = Files::new();
    let basics =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amd-epyc-2t/basics.json");
    let base = matmul("AMD EPYC", &[("fp32", 300.0)]);
    let slow = files.write("slow.json", &scaled(&base, 1.3));
    let (code, err, out) = refusal(&[&basics, &slow], &["--fail-if-slower", "10"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("--fail-if-slower 10 failed: ")
            && err.contains("slow.json: nothing compared (no row pairs with the baseline's)"),
        "{err}"
    );
    assert!(out.contains("B only"), "the table is printed: {out}");
    // The baseline's rows must all be judged: one that B lost fails the gate.
    let a = files.write(
        "a.json",
        &matmul("AMD EPYC", &[("fp32", 300.0), ("bf16", 400.0)]),
    );
    let (code, err, _) = refusal(&[&a, &slow], &["--fail-if-slower", "50"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("missing the baseline's matmul 4096 bf16 cpu"),
        "{err}"
    );

    for pct in ["0", "4.9"] {
        let (code, err, _) = refusal(&[&a, &a], &["--fail-if-slower", pct]);
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("under the ±5% band") && err.contains("give 5 or more"),
            "{err}"
        );
    }
}

#[test]
fn a_closed_pipe_ends_printing_quietly_and_a_full_disk_is_one_error_line() {
    let files = Files::new();
    let base = matmul("NVIDIA H200", &GPU_ROWS);
    let a = files.write("a.json", &base);
    let b = files.write("b.json", &scaled(&base, 1.3));
    // `| true`: the reader is gone before anything is printed.
    for (flags, code) in [(&[][..], 0), (&["--fail-if-slower", "10"][..], 1)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_compare"))
            .args([&a, &b])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{err}"
        );
        assert_eq!(
            err.lines().count(),
            code as usize,
            "the gate still answers: {err}"
        );
    }
    // `> /dev/full`
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_compare"))
        .args([&a, &b])
        .stdout(full)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "error: printing to standard output: No space left on device (os error 28)\n"
    );
}

#[test]
fn a_file_past_the_size_limit_is_refused_before_it_is_parsed() {
    let files = Files::new();
    let good = files.write("good.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    // Sparse: 64 MiB and one byte, not one of them read.
    let big = files.0.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 * 1024 * 1024 + 1)
        .unwrap();
    let started = std::time::Instant::now();
    let (code, err, _) = refusal(&[&good, &big], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: cannot read {}: it is 67108865 bytes, more than the 64 MiB a result file may have (refused before parsing)\n",
            big.display()
        )
    );
    assert!(started.elapsed().as_secs() < 10);
    let help = stdout(&compare_with(&[], &["--help"]));
    assert!(help.contains("each at most 64 MiB"), "{help}");
}

#[test]
fn paths_are_quoted_and_usage_errors_name_what_is_missing() {
    let files = Files::new();
    let good = files.write("good.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    let odd = files.0.path().join("nope\nerror: fake.json");
    let (code, err, _) = refusal(&[&good, &odd], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(r"nope\nerror: fake.json'"), "{err}");
    // The name in the table is quoted too.
    let odd = files.write("a b\nc.json", &matmul("AMD EPYC", &[("fp32", 300.0)]));
    let out = compare(&[&good, &odd]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(r"a b\nc.json'"), "{}", stdout(&out));

    let (code, err, _) = refusal(&[&good], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err,
        "error: the following required arguments were not provided: <FILE>...\n"
    );
}

/// A row measured on a contended machine carries the mark, and a verdict
/// between it and a quiet row says so; two CPUs of different generations are
/// told apart by name.
#[test]
fn a_contended_row_against_a_quiet_one_says_so() {
    let files = Files::new();
    let quiet = matmul("AMD EPYC", &[("fp32", 100.0)]);
    let mut busy = scaled(&quiet, 1.9);
    busy["schema_version"] = json!("2.2");
    busy["matmul"]["precisions"][0]["availability"] = json!({
        "row_kind": "cpu", "wall_s": 3.8, "process_cpu_s": 3.9, "threads": 2,
        "threads_held": 1.02, "held_fraction": 0.51, "logical_cpus": 2,
        "others_cpu_pct": 48.0, "steal_pct": 0.0, "procs_running_before": 3,
        "procs_running_after": 3, "load_1m_before": 1.9, "load_1m_after": 2.0,
        "judged": true, "contended": true,
        "reasons": ["held 1.02 of 2 threads", "others kept 0.96 of the 2 CPUs busy (48%)"],
    });
    let zen4 = json!({
        "vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1,
        "model_name": "AMD EPYC", "isa": ["avx2", "avx512f"], "isa_level": "x86-64-v4",
        "physical_cores": 1, "logical_cpus": 2,
    });
    busy["environment"]["cpu"] = zen4;
    let a = files.write("quiet.json", &quiet);
    let b = files.write("busy.json", &busy);
    let out = compare(&[&a, &b]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = verdicts(&stdout(&out));
    assert_eq!(v.len(), 1, "{}", stdout(&out));
    assert!(
        v[0].starts_with("SLOW")
            && v[0].ends_with("(B contended: its times understate its machine)"),
        "{v:?}"
    );
    assert!(
        stdout(&out).contains("AMD EPYC / AMD EPYC (f25m17-v4)"),
        "{}",
        stdout(&out)
    );
    // The other way round, the slowed side is A.
    let out = compare(&[&b, &a]);
    assert!(verdicts(&stdout(&out))[0].ends_with("(A contended: B's quiet run against a slowed A)"));
    // Two quiet files: no mark.
    let out = compare(&[&a, &a]);
    assert!(!stdout(&out).contains("contended"), "{}", stdout(&out));
}

// ------------------------------------------------ issue 52: inputs that fooled or stalled it

#[test]
fn a_file_listing_a_row_twice_is_refused_and_cannot_pass_the_gate() {
    let files = Files::new();
    let base = matmul("AMD EPYC", &[("fp32", 300.0), ("bf16", 400.0)]);
    let a = files.write("a.json", &base);
    // B: every row at the baseline's times, then again at twice them. The gate
    // took the first copy and passed (SAME 1.000), in the other order it failed.
    let mut twice = base.clone();
    let slow = scaled(&base, 2.0);
    let rows = twice["matmul"]["precisions"].as_array_mut().unwrap();
    rows.extend(slow["matmul"]["precisions"].as_array().unwrap().clone());
    let b = files.write("b.json", &twice);
    for (files, flags) in [
        ([a.as_path(), &b], &["--fail-if-slower", "10"][..]),
        ([b.as_path(), &a], &[][..]),
    ] {
        let (code, err, out) = refusal(&files, flags);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: ")
                && err.contains(
                    "b.json: two rows are matmul 4096 fp32 cpu: a result file holds each row once"
                ),
            "{err}"
        );
        assert!(out.is_empty(), "no table: {out}");
    }
}

#[test]
fn a_row_of_300000_samples_is_compared_in_bounded_time_and_says_how() {
    // Issue 52: 300,000 samples in a row took 15 s (3,000,000: minutes), the
    // bootstrap resampling every one; now a side past the cap is a seeded
    // subsample of it, and the method says so.
    let files = Files::new();
    let mut base = matmul("AMD EPYC", &[("fp32", 300.0)]);
    let many: Vec<f64> = (0..300_000)
        .map(|i| 300.0 * (1.0 + 0.0001 * f64::from(i % 201 - 100)))
        .collect();
    set_samples(&mut base["matmul"]["precisions"][0], many);
    let a = files.write("a.json", &base);
    let b = files.write("b.json", &scaled(&base, 1.3));
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_compare"))
        .args([&a, &b])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed().as_secs() > 60 {
            child.kill().unwrap();
            panic!("compare ran past 60 s on one row of 300,000 samples");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(verdicts(&stdout(&out)), ["SLOW"], "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!(
            "a side of more than {} samples is resampled from a seeded random {0} of them",
            candle_lab::stats::MAX_BOOTSTRAP_SAMPLES
        )),
        "{}",
        stdout(&out)
    );
    eprintln!("300,000 samples a side: {:?}", started.elapsed());
}

#[test]
fn a_file_whose_rows_hold_too_many_samples_in_all_is_refused_at_once() {
    // A committed sweep made 101 points of 1,000 samples: each row within the
    // per-side cap, the file past the 100,000 compare resamples from one file.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("results/intel-xeon-processor-2-80ghz-f6m106-v4-2t/sweep.json"),
    )
    .unwrap();
    let mut file: Value = serde_json::from_str(&text).unwrap();
    let thousand: Vec<f64> = (0..1000).map(|i| 10.0 + f64::from(i % 7) * 0.01).collect();
    let first = file["sweep"]["points"][0].clone();
    let points: Vec<Value> = (0..101u64)
        .map(|i| {
            let mut p = first.clone();
            p["size"] = json!(64 + i);
            set_samples(&mut p, thousand.clone());
            p
        })
        .collect();
    file["sweep"]["sizes"] = json!((0..101u64).map(|i| 64 + i).collect::<Vec<_>>());
    file["sweep"]["points"] = json!(points);
    let files = Files::new();
    let big = files.write("big.json", &file);
    let started = std::time::Instant::now();
    let (code, err, out) = refusal(&[&big, &big], &[]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("big.json: its 101 rows hold 101000 samples to resample (at most 1000 a row), more than the 100000"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}
