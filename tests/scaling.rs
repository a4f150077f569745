//! The `scaling` program as a user runs it, at small sizes on random weights
//! of every architecture the model layer runs: every axis has its points,
//! each point its bound and share, the batch's sequences decode as they do
//! alone and the deepest cache gives the token a pass from scratch gives, on
//! both kernel sets; bad axes are refused in one line before any work. No
//! time is asserted.

mod common;
use common::{refused, run_result};

const SMALL: [&str; 4] = ["--device", "cpu", "--preset", "small"];

/// The points of `row` on `axis`, as (depth, pp_tokens, batch) triples.
fn points(row: &serde_json::Value, axis: &str) -> Vec<(u64, u64, u64)> {
    row["measured"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["axis"] == axis)
        .map(|p| {
            let n = |k: &str| p[k].as_u64().unwrap();
            (n("depth"), n("pp_tokens"), n("batch"))
        })
        .collect()
}

/// A tg step's split: the matmuls and attention each took time and calls,
/// each with the rate it read its bytes at (the matmuls' FLOPs' too); the
/// classes' times sum to at most the spanned step.
fn step_split(s: &serde_json::Value, what: &str) {
    let parts = s["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no split: {s}"));
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    let sum: f64 = parts.iter().map(|q| f(q, "ms_per_step")).sum();
    assert!(sum <= f(s, "spanned_ms_per_step") * 1.0001, "{what}: {s}");
    assert!(f(s, "clean_ms_per_step") > 0.0, "{what}");
    for class in ["matmuls", "attention"] {
        let q = parts.iter().find(|q| q["class"] == class);
        let q = q.unwrap_or_else(|| panic!("{what}: no {class} in {s}"));
        assert!(
            f(q, "ms_per_step") > 0.0 && f(q, "calls_per_step") > 0.0,
            "{what}"
        );
        assert!(f(q, "gb_per_s") > 0.0, "{what}: {q}");
        assert_eq!(
            q["gflop_per_s"].is_null(),
            class == "attention",
            "{what}: {q}"
        );
    }
}

#[test]
fn every_axis_is_measured_against_its_bound_on_both_kernel_sets() {
    for shape in ["tiny", "tiny-qwen2", "tiny-gemma3"] {
        let mut args = SMALL.to_vec();
        args.extend(["--shape", shape, "--dtypes", "stored,fp16"]);
        let (json, _) = run_result("scaling", &args);
        let s = &json["scaling"];
        let rows = s["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 4, "{shape}: two precisions on two kernel sets");
        for row in rows {
            let what = format!("{shape} {}", row["precision"]);
            assert_eq!(row["status"], "ok", "{what}: {}", row["error"]);
            let m = &row["measured"];
            // The small preset: depths 0 and 8 (tg and pp each), prompts
            // 4 and 16, batches 1 and 3 after a 4-token prompt.
            let depth = [(0, 0, 1), (0, 4, 1), (8, 0, 1), (8, 4, 1)];
            let candle_gemma = shape == "tiny-gemma3" && row["precision"] == "q4_1";
            match candle_gemma {
                // candle's Gemma 3 runs no prompt after cached tokens: said.
                true => {
                    assert_eq!(points(row, "depth"), [depth[0], depth[1], depth[2]]);
                    let note = m["notes"][0].as_str().unwrap();
                    assert!(note.starts_with("pp4 at depth 8 left out: "), "{note}");
                }
                false => assert_eq!(points(row, "depth"), depth, "{what}"),
            }
            assert_eq!(points(row, "prompt"), [(0, 4, 1), (0, 16, 1)], "{what}");
            assert_eq!(points(row, "batch"), [(4, 0, 1), (4, 0, 3)], "{what}");
            for p in m["points"].as_array().unwrap() {
                let f = |k: &str| p[k].as_f64().unwrap();
                assert!(f("tokens_per_s") > 0.0, "{what}");
                let bound = f("memory_bound_tokens_per_s").min(f("compute_bound_tokens_per_s"));
                assert!((f("bound_tokens_per_s") - bound).abs() <= 1e-9 * bound);
                let pct = 100.0 * f("tokens_per_s") / bound;
                assert!((f("pct_of_bound") - pct).abs() < 1e-6 * pct, "{what}");
                let by = p["bound_by"].as_str().unwrap();
                assert!(by == "compute" || by.starts_with("memory ("), "{by}");
                // Every point's compute bound is the row's one ceiling, and
                // no step's matmuls ran over it (a peak they beat is raised
                // to theirs, the points' bounds with it).
                let ceiling = m["compute_peak_gflop_per_s"].as_f64().unwrap();
                let compute = ceiling * 1e9 / f("flops_per_token");
                assert!((f("compute_bound_tokens_per_s") - compute).abs() <= 1e-9 * compute);
                let matmuls = p["step_parts"]["parts"].as_array().into_iter().flatten();
                for q in matmuls.filter(|q| q["class"] == "matmuls") {
                    let g = q["gflop_per_s"].as_f64().unwrap();
                    assert!(g <= ceiling * (1.0 + 1e-9), "{what}: {g} over {ceiling}");
                }
                // A tg step of the suite's decoder (not candle's quantized
                // model: no spans) split by class; a pp test not split.
                let candle_model = row["kernels"] == "candle" && row["precision"] == "q4_1";
                match (p["test"].as_str().unwrap(), candle_model) {
                    ("tg", false) => step_split(&p["step_parts"], &what),
                    _ => assert!(p.get("step_parts").is_none(), "{what}: {p}"),
                }
            }
            assert_eq!(m["batch_matches_alone"], true, "{what}");
            assert_eq!(m["depth_matches_scratch"], true, "{what}");
            let ridge = &m["ridge"];
            assert!(ridge["predicted_batch"].as_f64().unwrap() > 0.0, "{what}");
            assert!(
                ridge["measured_knee_batch"].as_f64().unwrap() > 0.0,
                "{what}"
            );
        }
        // Every layer's keys and values per token at 4 and 2 bytes.
        let kv = s["kv_cache"].as_array().unwrap();
        let d = &s["model"];
        let per = |e: u64| {
            2 * d["layers"].as_u64().unwrap()
                * d["kv_heads"].as_u64().unwrap()
                * d["head_dim"].as_u64().unwrap()
                * e
        };
        assert_eq!(kv[0]["bytes_per_token"].as_u64().unwrap(), per(4));
        assert_eq!(kv[1]["bytes_per_token"].as_u64().unwrap(), per(2));
    }
}

#[test]
fn axes_a_model_cannot_hold_are_refused_in_one_line() {
    let mut args = SMALL.to_vec();
    args.extend(["--shape", "tiny", "--depth", "100000"]);
    refused("scaling", &args, "past the model's context");
    let mut args = SMALL.to_vec();
    args.extend(["--shape", "tiny", "--batch", "0"]);
    refused("scaling", &args, "--batch 0");
    let mut args = SMALL.to_vec();
    args.extend(["--shape", "tiny", "--pp-lengths", "0"]);
    refused("scaling", &args, "--pp-lengths 0");
}

/// `--kv-cache row,fp16`: each row of the suite's decoder runs with its own
/// cache and with an f16 one, named so, its bytes and bounds at 2 bytes a
/// value, its batch and depth checks holding; candle-transformers'
/// quantized model, whose cache is its own, runs its own only (the file
/// says the pairing was left out); a float row whose own cache is f16 runs
/// once. A cache no row can keep is refused in one line.
#[test]
fn a_sixteen_bit_kv_cache_is_a_row_of_its_own() {
    let mut args = SMALL.to_vec();
    args.extend(["--shape", "tiny", "--dtypes", "stored,fp16"]);
    args.extend(["--kv-cache", "row,fp16"]);
    let (json, _) = run_result("scaling", &args);
    let s = &json["scaling"];
    let rows = s["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["precision"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "q4_1",
            "q4_1 (lab kernels)",
            "q4_1, fp16 KV (lab kernels)",
            "fp16",
            "fp16 (lab kernels)"
        ]
    );
    let kv = s["kv_cache"].as_array().unwrap();
    let bytes = |p: &str| {
        let e = kv.iter().find(|k| k["precision"] == p).unwrap();
        e["bytes_per_token"].as_u64().unwrap()
    };
    for row in rows {
        let what = row["precision"].as_str().unwrap();
        assert_eq!(row["status"], "ok", "{what}: {}", row["error"]);
        let m = &row["measured"];
        let want = match what.starts_with("q4_1") && !what.contains("fp16 KV") {
            true => "fp32",
            false => "fp16",
        };
        assert_eq!(m["kv_precision"], want, "{what}");
        assert_eq!(
            m["kv_bytes_per_token"].as_u64(),
            Some(bytes(want)),
            "{what}"
        );
        assert_eq!(m["batch_matches_alone"], true, "{what}");
        assert_eq!(m["depth_matches_scratch"], true, "{what}");
    }
    let notes = s["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("q4_1 on candle's kernels with an fp16 KV cache left out")),
        "{notes:?}"
    );
    for (extra, want) in [
        (
            ["--kernels", "candle", "--kv-cache", "fp16"],
            "--kv-cache fp16: no row",
        ),
        (
            ["--dtypes", "fp16", "--kv-cache", "bf16"],
            "--kv-cache bf16: no row",
        ),
    ] {
        let mut args = SMALL.to_vec();
        args.extend(["--shape", "tiny"]);
        args.extend(extra);
        refused("scaling", &args, want);
    }
}
