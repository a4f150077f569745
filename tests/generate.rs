//! The `generate` program as a user runs it, on tiny GGUF files written here
//! field by field (tests/common/gguf.rs: a 2-layer Llama with a byte-level
//! tokenizer and a chat template in its metadata): every row answers and is
//! measured, the file reads back; and every bad input is refused with one
//! line before any work (missing, truncated, non-GGUF, wrong architecture,
//! an unsupported tensor type, a prompt past the context, --tokens 0, no
//! model fetched); the random-weight path at the tiny shape, with its CSV and
//! chart, on the CPU and (`--features cuda`) on CUDA. The real model's run is
//! tests/generate_model.rs. No time is asserted.

mod common;
use common::{refused, run_result};

use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use common::gguf::Spec;

/// The tiny Llama of tests/common/gguf.rs (2 layers, hidden 64, 4 heads, 2
/// key/value heads, MLP 128, 256 byte tokens and two control tokens, context
/// 64), `arch` its architecture, its projections in `dtype`, at `dir`.
fn tiny_gguf(dir: &Path, arch: &str, dtype: GgmlDType) -> PathBuf {
    let path = dir.join(format!("tiny-{arch}.gguf"));
    Spec::tiny(arch, dtype, &[]).write(&path);
    path
}

const QUICK: [&str; 10] = [
    "--ladder-max-mib",
    "4",
    "--tokens",
    "4",
    "--pp-tokens",
    "8",
    "--iters",
    "1",
    "--warmup",
    "0",
];

#[test]
fn every_row_of_a_tiny_model_answers_and_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_gguf(dir.path(), "llama", GgmlDType::Q8_0);
    let mut args = vec!["--device", "cpu", "--model", model.to_str().unwrap()];
    args.extend(["--dtypes", "stored,q4_1,fp32,fp16,bf16", "--prompt", "hi"]);
    // The full tables: where a token's time goes is --wide's.
    args.extend(QUICK.iter().chain(&["--wide"]));
    let (json, out) = run_result("generate", &args);
    let g = &json["generate"];
    assert_eq!(g["model"]["source"], "file");
    assert_eq!(g["model"]["kv_heads"], 2);
    assert_eq!(g["model"]["tied_embeddings"], true);
    // The chat template, rendered: the user's message between the markers.
    assert_eq!(
        g["prompt"]["formatted"],
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = g["prompt"]["token_ids"].as_array().unwrap();
    assert_eq!(ids[0], 256, "<|im_start|> is one special token");
    // One byte a token (no merges) but for the three markers.
    assert_eq!(ids.len(), "user\nhi\nassistant\n".len() + 3);
    let rows = g["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["precision"].as_str().unwrap())
        .collect();
    // fp32 first: the later rows are timed beside a copy of its model.
    assert_eq!(names, ["fp32", "q8_0 (stored)", "q4_1", "fp16", "bf16"]);
    for r in rows {
        assert_eq!(r["status"], "ok", "{r}");
        let m = &r["measured"];
        let answer = m["answer"]["token_ids"].as_array().unwrap();
        assert!(!answer.is_empty() && answer.len() <= 4, "{m}");
        assert!(m["answer"]["text"].is_string());
        for k in [
            "pp_tokens_per_s",
            "tg_tokens_per_s",
            "tg_bound_tokens_per_s",
            "pp_gflop_per_s",
        ] {
            assert!(m[k].as_f64().unwrap() > 0.0, "{k}: {m}");
        }
        assert!(m["weight_bytes_per_token"].as_u64().unwrap() > 0);
        assert_eq!(m["parts"].as_array().unwrap().len(), 6);
        let vs = &m["vs_fp32"];
        if r["precision"] == "fp32" {
            assert_eq!(vs["tg"], 1.0);
            assert!(m["answer"]["differs_from_fp32_at"].is_null());
        }
    }
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["float", "quantized", "quantized", "float", "float"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("where a generated token's time goes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fp16 against fp32, whole model"),
        "{stdout}"
    );
}

/// Files of every architecture the model layer runs, in one run (each model
/// in turn, the others in the first's `more_models`): every row measured on
/// Candle's model of the architecture and on the suite's kernels, each body
/// naming its architecture and the per-tensor types it found.
#[test]
fn every_architecture_runs_on_both_kernel_sets_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let archs = ["qwen2", "qwen3", "gemma3"];
    let files: Vec<String> = archs
        .iter()
        .map(|a| {
            tiny_gguf(dir.path(), a, GgmlDType::Q8_0)
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let models = files.join(",");
    let mut args = vec!["--device", "cpu", "--model", models.as_str()];
    args.extend([
        "--dtypes",
        "stored,q4_0,fp32",
        "--kernels",
        "both",
        "--prompt",
        "hi",
    ]);
    args.extend(QUICK);
    let (json, out) = run_result("generate", &args);
    let g = &json["generate"];
    let more = g["more_models"].as_array().unwrap();
    assert_eq!(more.len(), 2);
    let bodies: Vec<&serde_json::Value> = std::iter::once(g).chain(more.iter()).collect();
    for (body, arch) in bodies.iter().zip(archs) {
        assert_eq!(body["model"]["architecture"], arch, "{body}");
        let rows = body["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 6, "{arch}: three rows on two kernel sets");
        for r in rows {
            assert_eq!(r["status"], "ok", "{arch}: {r}");
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    for arch in archs {
        let found = format!("(tiny-{arch}.gguf): {arch}, 2 layers; Q8_0:");
        assert!(stderr.contains(&found), "{found}: {stderr}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("tiny-gemma3: "),
        "a further model's notes name it: {stdout}"
    );
    // By default one compact table, every model's rows in it, in 120 columns
    // (the notes under it are lines of text, not the table's).
    let table: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with(['=', '┌', '│', '╞', '└']))
        .collect();
    assert_eq!(table.iter().filter(|l| l.starts_with("===")).count(), 1);
    assert!(
        table[2].contains("model") && table[2].contains("binds tg"),
        "{stdout}"
    );
    let rows = |arch: &str| {
        table
            .iter()
            .filter(|l| l.contains(&format!("tiny-{arch} ")))
            .count()
    };
    assert_eq!(archs.map(rows), [6; 3], "{stdout}");
    for line in &table {
        assert!(line.chars().count() <= 120, "{line:?}: {stdout}");
    }
    assert!(!stdout.contains("where a generated token's time goes"));
}

#[test]
fn random_weights_at_a_named_shape_dry_run_on_cuda() {
    // The GPU call's step, checked without a GPU: flags, shape and rows.
    let out = common::run(
        "generate",
        &["--shape", "llama-3.2-1b", "--device", "cuda", "--dry-run"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in ["Stored", "Q8_0", "Tf32", "pp_tokens: 512", "tg_tokens: 128"] {
        assert!(stdout.contains(want), "{want}: {stdout}");
    }
}

/// The random-weight path end to end at the tiny shape on `device` (what the
/// GPU call's CPU rehearsal runs; on CUDA, the GPU bundle's check of the CUDA
/// path): every default row measured, and beside the JSON its CSV and its
/// chart, which names every row and draws each tg bound.
fn tiny_shape(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("g.json");
    let mut args = vec!["--device", device, "--shape", "tiny", "--kernels", "both"];
    // Three timed runs: the ratios to fp32 get their intervals.
    args.extend(QUICK.map(|a| if a == "1" { "3" } else { a }));
    let (json, out) = common::run_result_at(&json_path, "generate", &args);
    let g = &json["generate"];
    assert_eq!(g["model"]["source"], "random");
    assert_eq!(g["model"]["shape"], "tiny");
    assert!(g["prompt"]["user"].is_null());
    let rows = g["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["precision"].as_str().unwrap())
        .collect();
    // --kernels both: each row, then again on the suite's kernels (a
    // quantized row's: the lab's quantized path).
    // fp32 first: every later row is timed beside a copy of its model.
    let rows_of: &[&str] = if device == "cuda" {
        &["fp32", "q4_1", "q8_0", "tf32", "fp16", "bf16"]
    } else {
        &["fp32", "q4_1", "q8_0", "fp16", "bf16"]
    };
    let mut want = Vec::new();
    for f in rows_of {
        want.extend([f.to_string(), format!("{f} (lab kernels)")]);
    }
    assert_eq!(names, want);
    assert_eq!(g["kernels"], "both");
    for r in rows {
        let lab = r["precision"].as_str().unwrap().ends_with("(lab kernels)");
        assert_eq!(r["kernels"], if lab { "lab" } else { "candle" }, "{r}");
        let quantized = r["precision"].as_str().unwrap().starts_with('q');
        assert_eq!(
            r["path"],
            if quantized { "quantized" } else { "float" },
            "{r}"
        );
        assert_eq!(r["status"], "ok", "{r}");
        assert!(r["measured"]["answer"]["text"].is_null());
        assert!(r["measured"]["tg_bound_tokens_per_s"].as_f64().unwrap() > 0.0);
        // The host's floor: the token's ops (its parts' calls) x one op's
        // cost, measured in this run.
        let ops = r["measured"]["ops_per_token"].as_u64().unwrap();
        let parts: u64 = r["measured"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["calls"].as_u64().unwrap())
            .sum();
        assert_eq!(ops, parts, "{r}");
        let floor = r["measured"]["host_floor_ms"].as_f64().unwrap();
        let op_us = g["op_cost"]["per_call_us"].as_f64().unwrap();
        assert!(
            (floor - ops as f64 * op_us * 1e-3).abs() <= 1e-9 * floor.max(1.0),
            "{r}"
        );
        // Each later row against the fp32 model of its own kernels, timed
        // in turn with it: the ratios side by side, with their intervals.
        let (m, fp32) = (
            &r["measured"],
            r["precision"].as_str().unwrap().starts_with("fp32"),
        );
        let vs = &m["vs_fp32"];
        if fp32 {
            assert!(m.get("fp32_beside").is_none(), "{r}");
            assert_eq!(vs["side_by_side"], false, "{r}");
        } else {
            let against = if lab { "fp32 (lab kernels)" } else { "fp32" };
            assert_eq!(m["fp32_beside"]["against"], against, "{r}");
            assert_eq!(
                m["fp32_beside"]["tg"]["samples_wall_ms"]
                    .as_array()
                    .unwrap()
                    .len(),
                3
            );
            assert_eq!(
                (&vs["against"], &vs["side_by_side"]),
                (&against.into(), &true.into())
            );
            for i in [&vs["pp_interval"], &vs["tg_interval"]] {
                assert!(
                    i["lo"].as_f64().unwrap() <= i["hi"].as_f64().unwrap(),
                    "{r}"
                );
            }
        }
    }
    assert_eq!(json["device"]["kind"], device);
    assert!(String::from_utf8_lossy(&out.stdout).contains("RANDOM WEIGHTS"));

    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["g.csv", "g.json", "g.svg"]);
    let svg = std::fs::read_to_string(dir.path().join("g.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for want in [
        "prompt processing (pp8)",
        "generation (tg4)",
        "RANDOM WEIGHTS",
    ] {
        assert!(svg.contains(want), "{want:?} not in the chart");
    }
    for name in &want {
        assert!(
            svg.contains(&format!("\n{name}\n")),
            "{name} not in the chart"
        );
    }
    assert_eq!(svg.matches("bound ").count(), want.len(), "a bound per row");
}

#[test]
fn random_weights_run_at_the_tiny_shape() {
    tiny_shape("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn random_weights_run_at_the_tiny_shape_on_cuda() {
    tiny_shape("cuda");
}

/// A run killed midway (SIGKILL: what gpu-run.sh's timeout sends a step that
/// outlives its limit and its grace) keeps the rows it finished: each is saved
/// as it finishes, with a note saying the file is partial. Three rows of
/// about 1.5 s each on two cores: the kill lands while the second runs.
#[test]
fn a_run_killed_midway_keeps_its_finished_rows() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("g.json");
    let mut child = std::process::Command::new(common::bin("generate"))
        .args([
            "--device",
            "cpu",
            "--shape",
            "tiny",
            "--dtypes",
            "q8_0,fp32,fp16",
        ])
        .args([
            "--iters",
            "12",
            "--warmup",
            "1",
            "--tokens",
            "8",
            "--pp-tokens",
            "16",
            "--ladder-max-mib",
            "4",
        ])
        .arg("--output")
        .arg(&json)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first row is in once its three files are (the JSON is written last).
    let deadline = Instant::now() + Duration::from_secs(120);
    while !json.exists() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no row was saved in two minutes");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed, not finished: {status:?}");
    let file = candle_lab::schema::read(&json).unwrap();
    let candle_lab::schema::Body::Generate(r) = file.body else {
        panic!("not a generate result")
    };
    assert!(
        (1..3).contains(&r.rows.len()),
        "{} rows kept of 3",
        r.rows.len()
    );
    assert_eq!(r.rows[0].precision, "fp32", "fp32 first");
    for row in &r.rows {
        assert_eq!(row.status, candle_lab::schema::RowStatus::Ok, "{row:?}");
        assert!(row.measured.is_some());
    }
    let partial = format!("partial: {} of 3 rows", r.rows.len());
    assert!(
        r.notes.iter().any(|n| n.starts_with(&partial)),
        "{:?}",
        r.notes
    );
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["g.csv", "g.json", "g.svg"],
        "no temporary file left"
    );
}

/// `--prepare-only`: the weights made and every row's model loaded, each
/// step timed in a line, nothing measured and no file written (the GPU call's
/// rehearsal measures generate's host side with it).
#[test]
fn prepare_only_times_the_host_side_and_measures_nothing() {
    let out = common::run(
        "generate",
        &[
            "--device",
            "cpu",
            "--shape",
            "tiny",
            "--dtypes",
            "q4_1,fp32,fp16",
            "--prepare-only",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    for want in [
        "generate: the weights in f32 on the host, made once for every row: 20 tensors",
        "generate q4_1: quantized once",
        "generate fp16: its model loaded on the device in",
    ] {
        assert!(stderr.contains(want), "{want:?} not in {stderr}");
    }
    for want in [
        "--prepare-only: q4_1: quantized once in",
        "--prepare-only: fp16: loaded in",
        "--prepare-only: 1 fp32 copy held beside the later rows, loaded in",
        "no row measured",
    ] {
        assert!(stdout.contains(want), "{want:?} not in {stdout}");
    }
    assert!(!stdout.contains("tok/s"), "no table of rows: {stdout}");
    refused(
        "generate",
        &["--device", "cpu", "--shape", "tiny", "--prepare-only"],
        "'--prepare-only' cannot be used with '--output <FILE>'",
    );
}

#[test]
fn bad_inputs_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let good = tiny_gguf(dir.path(), "llama", GgmlDType::Q8_0);
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let run = |model: &Path, extra: &[&str], expect: &str| {
        let m = arg(model);
        let mut args = vec!["--device", "cpu", "--model", m.as_str()];
        args.extend(extra);
        refused("generate", &args, expect);
    };
    run(
        &dir.path().join("absent.gguf"),
        &[],
        "absent.gguf: no such file",
    );
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "not a model\n").unwrap();
    run(&text, &[], "is not a GGUF file");
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    run(&cut, &[], "it is truncated");
    let header = dir.path().join("header.gguf");
    std::fs::write(&header, &bytes[..100]).unwrap();
    run(&header, &[], "it is truncated");
    run(
        &tiny_gguf(dir.path(), "phi3", GgmlDType::Q8_0),
        &[],
        "is a 'phi3' model (general.architecture); generate runs llama, qwen2, qwen3, gemma3",
    );
    // An IQ2_XXS tensor (ggml type 16): the type id of blk.0.attn_q patched.
    let mut patched = bytes.clone();
    let name = b"blk.0.attn_q.weight";
    let at = patched.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let dtype_at = at + 4 + 2 * 8;
    assert_eq!(
        patched[dtype_at..dtype_at + 4],
        8u32.to_le_bytes(),
        "Q8_0 there"
    );
    patched[dtype_at..dtype_at + 4].copy_from_slice(&16u32.to_le_bytes());
    let iq = dir.path().join("iq.gguf");
    std::fs::write(&iq, patched).unwrap();
    run(&iq, &[], "ggml type 16, which this program does not read");
    // Non-finite weights (issue 52's case 3): a Q8_0 block scale NaN, an Inf
    // in an F32 embedding; refused before any row runs, the dry run too.
    let mut nan = Spec::tiny("llama", GgmlDType::Q8_0, &[]);
    let q = nan
        .tensors
        .iter_mut()
        .find(|t| t.name == b"blk.1.ffn_up.weight")
        .unwrap();
    q.data[34..36].copy_from_slice(&half::f16::NAN.to_le_bytes());
    let nan_file = dir.path().join("nan.gguf");
    nan.write(&nan_file);
    let says = "tensor blk.1.ffn_up.weight (Q8_0) holds 1 block scales that are NaN or infinite";
    run(&nan_file, &[], says);
    run(&nan_file, &["--dry-run"], says);
    let mut inf = Spec::tiny("llama", GgmlDType::F32, &[]);
    let e = inf
        .tensors
        .iter_mut()
        .find(|t| t.name == b"token_embd.weight")
        .unwrap();
    e.data[400..404].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let inf_file = dir.path().join("inf.gguf");
    inf.write(&inf_file);
    run(
        &inf_file,
        &[],
        "tensor token_embd.weight (F32) holds 1 values that are NaN or infinite",
    );
    let long = "many words ".repeat(8);
    run(
        &good,
        &["--prompt", &long],
        "longer than the model's context of 64",
    );
    run(&good, &["--tokens", "0"], "0 is not in 1..=65536");
    run(&good, &["--dtypes", "q4_k"], "are not a multiple of that");
    run(&good, &["--dtypes", "tf32"], "needs a CUDA device");
    let bad_shape = common::run("generate", &["--shape", "llama-9"]);
    assert_eq!(bad_shape.status.code(), Some(2), "a bad flag value: exit 2");
    let stderr = String::from_utf8_lossy(&bad_shape.stderr);
    assert!(
        stderr.contains("llama-9") && stderr.contains("llama-3.2-1b"),
        "{stderr}"
    );
}

#[test]
fn without_the_model_it_says_how_to_get_it() {
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::bin("generate"))
        .args(["--device", "cpu"])
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("`just model` fetches it"), "{stderr}");
}

#[test]
fn no_output_is_the_model_by_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_gguf(dir.path(), "llama", GgmlDType::Q8_0);
    let bytes = std::fs::read(&model).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&model, &link).unwrap();
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&model, &hard).unwrap();
    // The model named .csv: the CSV written beside r.json would replace it.
    let csv = dir.path().join("r.csv");
    std::fs::copy(&model, &csv).unwrap();
    let cases: [(&Path, &Path, &str); 4] = [
        (&model, &model, "it is the model, which this run reads"),
        (&model, &link, "it is the model"),
        (&model, &hard, "it is the model"),
        (&csv, &dir.path().join("r.json"), "r.csv: it is the model"),
    ];
    for dry in [false, true] {
        for (input, output, expect) in cases {
            let mut args = vec!["--device", "cpu", "--model", input.to_str().unwrap()];
            args.extend(["--output", output.to_str().unwrap(), "--prompt", "hi"]);
            args.extend(QUICK);
            if dry {
                args.push("--dry-run");
            }
            let out = common::run("generate", &args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
            assert_eq!(errors.len(), 1, "{stderr}");
            assert!(errors[0].contains(expect), "{expect:?}: {stderr}");
            assert!(
                !stderr.contains("loading"),
                "refused before any work: {stderr}"
            );
            assert_eq!(
                std::fs::read(input).unwrap(),
                bytes,
                "the model is unchanged"
            );
        }
    }
    assert!(!dir.path().join("r.json").exists() && !dir.path().join("r.svg").exists());
}

#[test]
fn a_model_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.gguf");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = dir.path().join("models");
    std::fs::create_dir(&folder).unwrap();
    for (path, expect) in [
        (&fifo, "model.gguf is a FIFO, not a regular file"),
        (&folder, "models is a folder, not a GGUF file"),
    ] {
        for dry in [false, true] {
            let mut args = vec!["--device", "cpu", "--model", path.to_str().unwrap()];
            if dry {
                args.push("--dry-run");
            }
            // A blocked open would hang here: the test's own limit.
            let mut child = std::process::Command::new(common::bin("generate"))
                .args(&args)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let started = std::time::Instant::now();
            while child.try_wait().unwrap().is_none() {
                if started.elapsed() > std::time::Duration::from_secs(30) {
                    child.kill().unwrap();
                    panic!("{args:?} blocks");
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains(expect), "{expect:?}: {stderr}");
        }
    }
}
