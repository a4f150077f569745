//! The `block` program as a user runs it, at tiny sizes: every phase and
//! precision has its row, parts and accuracy; fp32 agrees with the plain-ops
//! f64 run; the weights it saves read back with the names and shapes the
//! PyTorch twin loads; a bad shape is refused before any work. No time is
//! asserted.

mod common;
use common::{refused, run_result};

use serde_json::Value;

const TINY: [&str; 12] = [
    "--hidden", "64", "--heads", "4", "--mlp", "96", "--seq", "12", "--iters", "2", "--warmup", "1",
];

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// A timed row's median by the body's clock: CUDA events on a GPU, the wall
/// clock on the CPU.
fn rate(t: &Value, clock: &str) -> f64 {
    f(&t[if clock == "gpu_median_ms" {
        "gpu_median_ms"
    } else {
        "median_ms"
    }])
}

fn tiny_block(device: &str) {
    let mut args = vec!["--device", device];
    // Three timed runs: the ratios to fp32 get their intervals.
    args.extend(TINY.map(|a| if a == "2" { "3" } else { a }));
    let (json, _) = run_result("block", &args);
    let b = &json["block"];
    assert_eq!(b["shape"]["head_dim"], 16);
    let clock = b["time_source"].as_str().unwrap();
    let want = if device == "cpu" {
        "median_ms"
    } else {
        "gpu_median_ms"
    };
    assert_eq!(clock, want);
    assert!(
        b.get("copy_ceiling_gb_per_s").is_none(),
        "each row has its own"
    );
    assert_eq!(b["params"], 4 * 64 * 64 + 3 * 64 * 96 + 2 * 64);
    let phases = b["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["prefill", "decode"]);
    assert_eq!(
        (phases[0]["tokens"].as_u64(), phases[1]["tokens"].as_u64()),
        (Some(12), Some(1))
    );
    for p in phases {
        let rows = p["rows"].as_array().unwrap();
        let precisions: Vec<&str> = rows
            .iter()
            .map(|r| r["precision"].as_str().unwrap())
            .collect();
        assert_eq!(precisions, ["fp32", "fp16", "bf16"]);
        for r in rows {
            let m = &r["measured"];
            assert_eq!(r["status"], "ok", "{r}");
            // Every class, once, and their sum is what the file says it is.
            let parts = m["parts"].as_array().unwrap();
            assert_eq!(parts.len(), 6, "{m}");
            // ... by one clock, the body's, as every rate of the row.
            let sum: f64 = parts.iter().map(|x| rate(x, clock)).sum();
            assert!(
                (sum - f(&m["parts_sum_ms"])).abs() < 1e-9 * sum.max(1.0),
                "{m}"
            );
            let share = f(&m["matmul_share"]);
            assert!(share > 0.0 && share < 1.0, "{share}");
            let ms = rate(&m["end_to_end"], clock);
            let tokens = p["tokens"].as_f64().unwrap();
            assert!((f(&m["tokens_per_s"]) - tokens / (ms * 1e-3)).abs() < 1e-6 * tokens / ms);
            assert!(f(&m["gflop_per_s"]) > 0.0);
            // The row's ceiling is the ladder at its own footprint, or at a
            // larger one the run read faster (the envelope).
            let bytes = m["bytes_min"].as_u64().unwrap();
            assert!(m["copy_bytes"].as_u64().unwrap() >= 2 * (bytes / 2), "{m}");
            let pct = 100.0 * f(&m["gb_per_s"]) / f(&m["copy_ceiling_gb_per_s"]);
            assert!(
                (f(&m["pct_of_copy_ceiling"]) - pct).abs() < 1e-9 * pct,
                "{m}"
            );
            // The speedups are against the same phase's fp32 row.
            if r["precision"] == "fp32" {
                assert_eq!(f(&m["speedup_vs_fp32"]), 1.0);
                assert_eq!(f(&m["amdahl_speedup_vs_fp32"]), 1.0);
                assert!(m.get("fp32_beside").is_none(), "{m}");
            } else {
                // ... end to end, the fp32 block's calls timed in turn with
                // this row's: the ratio side by side, with its interval.
                let fp32 = &m["fp32_beside"];
                assert_eq!(fp32["samples_wall_ms"].as_array().unwrap().len(), 3);
                let x = rate(fp32, clock) / ms;
                assert!((f(&m["speedup_vs_fp32"]) - x).abs() < 1e-9 * x, "{m}");
                let i = &m["speedup_vs_fp32_interval"];
                assert!(f(&i["lo"]) <= f(&i["hi"]), "{m}");
            }
        }
        // fp32 against the f64 run of the same weights with plain ops: the
        // fused kernels and f32 rounding alone (relative to the output's rms).
        let fp32 = &rows[0]["measured"]["accuracy"];
        assert!(f(&fp32["max_rel_err"]) < 1e-5, "{fp32}");
        let bf16 = &rows[2]["measured"]["accuracy"];
        assert!(f(&bf16["max_rel_err"]) > f(&fp32["max_rel_err"]), "{bf16}");
    }
    let fused = b["fused"].as_array().unwrap();
    assert_eq!(fused.len(), 3 * 3, "three ops in three precisions");
    for row in fused {
        assert!(f(&row["composed_bytes"]) > f(&row["fused_bytes"]), "{row}");
    }
}

#[test]
fn tiny_block_cpu() {
    tiny_block("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn tiny_block_cuda() {
    tiny_block("cuda");
}

/// `--save-weights` writes the f32 weights and inputs under the names and
/// shapes `pytorch/block --weights` reads, and the same seed writes the
/// same numbers.
#[test]
fn saved_weights_read_back_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str| {
        let path = dir.path().join(name);
        let mut args = vec![
            "--device",
            "cpu",
            "--phases",
            "decode",
            "--dtypes",
            "fp32",
            "--save-weights",
        ];
        args.push(path.to_str().unwrap());
        args.extend(TINY);
        run_result("block", &args);
        candle_core::safetensors::load(&path, &candle_core::Device::Cpu).unwrap()
    };
    let w = save("a.safetensors");
    let shape = |n: &str| w[n].dims().to_vec();
    assert_eq!(shape("x_prefill"), [1, 12, 64]);
    assert_eq!(shape("x_decode"), [1, 1, 64]);
    assert_eq!(shape("k_cache"), [1, 4, 12, 16]);
    assert_eq!(shape("wq"), [64, 64]);
    assert_eq!(shape("w_gate"), [96, 64]);
    assert_eq!(shape("w_down"), [64, 96]);
    assert_eq!(shape("attn_norm"), [64]);
    assert_eq!(w.len(), 13);
    assert!(w.values().all(|t| t.dtype() == candle_core::DType::F32));
    let again = save("b.safetensors");
    let same = |n: &str| {
        let d = (&w[n] - &again[n])
            .unwrap()
            .abs()
            .unwrap()
            .sum_all()
            .unwrap();
        d.to_scalar::<f32>().unwrap() == 0.0
    };
    assert!(["wq", "w_down", "x_prefill", "v_cache"]
        .into_iter()
        .all(same));
}

/// `--kv-heads` below `--heads`: the saved K/V weights and cache are
/// kv_heads x head_dim wide, the file records it, the formulas count it, and
/// fp32 still agrees with the f64 run.
#[test]
fn grouped_query_attention_runs_and_saves_its_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.safetensors");
    let mut args = vec!["--device", "cpu", "--dtypes", "fp32", "--kv-heads", "2"];
    args.extend(["--save-weights", path.to_str().unwrap()]);
    args.extend(TINY);
    let (json, _) = run_result("block", &args);
    let b = &json["block"];
    assert_eq!(
        (
            b["shape"]["heads"].as_u64(),
            b["shape"]["kv_heads"].as_u64()
        ),
        (Some(4), Some(2))
    );
    // Q and O 64 x 64, K and V 32 x 64, the MLP 3 x 64 x 96, two norms.
    assert_eq!(
        b["params"],
        2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 96 + 2 * 64
    );
    for p in b["phases"].as_array().unwrap() {
        let m = &p["rows"][0]["measured"];
        assert!(f(&m["accuracy"]["max_rel_err"]) < 1e-5, "{m}");
    }
    let w = candle_core::safetensors::load(&path, &candle_core::Device::Cpu).unwrap();
    assert_eq!(w["wk"].dims(), [32, 64]);
    assert_eq!(w["wv"].dims(), [32, 64]);
    assert_eq!(w["k_cache"].dims(), [1, 2, 12, 16]);
    refused(
        "block",
        &["--device", "cpu", "--heads", "8", "--kv-heads", "3"],
        "--kv-heads 3: must divide --heads 8",
    );
}

/// `--save-output` writes the fp32 rows' checked tokens under the names the
/// PyTorch twin's test reads.
#[test]
fn saved_outputs_are_the_fp32_tokens_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("y.safetensors");
    let mut args = vec!["--device", "cpu", "--accuracy-seq", "5", "--save-output"];
    args.push(path.to_str().unwrap());
    args.extend(TINY);
    run_result("block", &args);
    let y = candle_core::safetensors::load(&path, &candle_core::Device::Cpu).unwrap();
    assert_eq!(y["y_prefill_fp32"].dims(), [1, 5, 64]);
    assert_eq!(y["y_decode_fp32"].dims(), [1, 1, 64]);
    assert_eq!(y.len(), 2);
}

/// `--kernels lab`: the end-to-end rows run the suite's kernels, the file
/// says so, and the outputs agree with the f64 run as candle-nn's do.
fn lab_kernels(device: &str) {
    let mut args = vec!["--device", device, "--kernels", "lab", "--kv-heads", "2"];
    args.extend(TINY);
    let (json, out) = run_result("block", &args);
    let b = &json["block"];
    assert_eq!(b["kernels"], "lab");
    for p in b["phases"].as_array().unwrap() {
        for r in p["rows"].as_array().unwrap() {
            assert_eq!(r["status"], "ok", "{r}");
            let err = f(&r["measured"]["accuracy"]["max_rel_err"]);
            let bound = if r["precision"] == "fp32" { 1e-4 } else { 0.1 };
            assert!(err < bound, "{} {}: {err}", p["phase"], r["precision"]);
        }
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("lab kernels"));
    let (json, _) = run_result(
        "block",
        &args[..2].iter().chain(&TINY).copied().collect::<Vec<_>>(),
    );
    assert_eq!(json["block"]["kernels"], "candle");
}

#[test]
fn lab_kernels_cpu() {
    lab_kernels("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn lab_kernels_cuda() {
    lab_kernels("cuda");
}

#[test]
fn bad_shapes_are_refused_before_any_work() {
    refused(
        "block",
        &["--device", "cpu", "--kernels", "fast"],
        "unknown kernels 'fast': expected candle, lab or both",
    );
    refused(
        "block",
        &["--device", "cpu", "--hidden", "64", "--heads", "5"],
        "--heads 5: must divide --hidden 64",
    );
    refused(
        "block",
        &["--device", "cpu", "--hidden", "36", "--heads", "4"],
        "an even head size",
    );
    refused(
        "block",
        &["--device", "cpu", "--dtypes", "fp64"],
        "the block runs fp32",
    );
    refused(
        "block",
        &["--device", "cpu", "--dtypes", "tf32"],
        "needs a CUDA device",
    );
    refused(
        "block",
        &["--device", "cpu", "--phases", "train"],
        "expected prefill or decode",
    );
    refused(
        "block",
        &[
            "--device", "cpu", "--hidden", "65536", "--mlp", "262144", "--seq", "1048576",
        ],
        "needs",
    );
}
