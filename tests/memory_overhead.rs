//! The `memory` and `overhead` programs, run as a user runs them, at small
//! sizes: their files validate against the committed JSON Schema and read back,
//! every rate is the stated bytes (or calls) over the stated time, and what
//! cannot be done is refused in one line with no file. Device-generic bodies
//! run on the CPU always and on CUDA when built with the `cuda` feature. No
//! test asserts a speed.

mod common;
use common::{refused, run};

use serde_json::Value;

/// Runs `name` with `args` plus `--output`, expects success, checks the file
/// against the schema and the typed reader, returns its body and stdout.
fn run_body(name: &str, args: &[&str]) -> (Value, String) {
    let (json, out) = common::run_result(name, args);
    (
        json[name].clone(),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-12 * want.abs().max(1e-300)
}

/// The median a row's rates divide by, read back through its `time_source`.
fn rate_time(row: &Value) -> f64 {
    let source = row["time_source"].as_str().unwrap();
    assert_eq!(f(&row["time_ms"]), f(&row[source]), "{source}");
    f(&row["time_ms"])
}

fn memory_fields(device: &str) {
    let (m, stdout) = run_body(
        "memory",
        &[
            "--device",
            device,
            "--mib",
            "1",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--dtypes",
            "f32,bf16",
            "--matmul-size",
            "32",
            "--transfer-max-mib",
            "4",
            "--ladder-max-mib",
            "4",
        ],
    );
    let elements = 1u64 << 18;
    assert_eq!(u(&m["elements"]), elements);
    assert_eq!(u(&m["tensor_bytes_f32"]), 1 << 20);

    let ceiling = &m["ceiling"];
    assert_eq!(u(&ceiling["bytes_read"]), 1 << 20);
    assert_eq!(u(&ceiling["bytes_moved"]), 2 << 20);
    assert_eq!(f(&ceiling["pct_of_ceiling"]), 100.0);
    let ceiling_gb_per_s = f(&ceiling["gb_per_s"]);

    let ops = m["ops"].as_array().unwrap();
    let names: Vec<String> = ops
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["op"].as_str().unwrap(),
                o["dtype_out"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "copy f32",
            "add f32",
            "affine f32",
            "transpose f32",
            "sum f32",
            "copy bf16",
            "add bf16",
            "affine bf16",
            "transpose bf16",
            "sum bf16",
            "cast bf16"
        ]
    );
    // The ceiling row is the ladder's copy: its time per call (K calls a
    // sample, the clock's cost subtracted), not a median of its samples.
    assert!(f(&ceiling["time_ms"]) > 0.0 && ceiling["bound"].is_null());
    for row in std::iter::once(ceiling).chain(ops) {
        let (read, written, moved) = (
            u(&row["bytes_read"]),
            u(&row["bytes_written"]),
            u(&row["bytes_moved"]),
        );
        assert_eq!(moved, read + written);
        // GB/s is bytes over time, from the numbers in the same row.
        let ms = if row == ceiling {
            f(&row["time_ms"])
        } else {
            rate_time(row)
        };
        assert!(
            close(f(&row["gb_per_s"]), moved as f64 / (ms * 1e-3) / 1e9),
            "{row}"
        );
        assert_eq!(row["gpu_ms"].is_null(), device == "cpu");
        assert_eq!(row["gpu_before"].is_null(), device == "cpu");
    }
    // Each op against its own bound: the ladder at its footprint.
    for row in ops {
        let bound = &row["bound"];
        assert!(
            close(
                f(&row["pct_of_ceiling"]),
                100.0 * f(&row["gb_per_s"]) / f(&bound["gb_per_s"])
            ),
            "{row}"
        );
        // At the row's own footprint (within the fitting's few elements), or
        // a larger one the run read faster (the ladder's envelope).
        assert!(u(&bound["footprint_bytes"]) + (1 << 10) >= u(&row["bytes_moved"]));
        assert_eq!(row["samples_wall_ms"].as_array().unwrap().len(), 2);
    }
    let _ = ceiling_gb_per_s;
    let op = |name: &str, dtype: &str| {
        ops.iter()
            .find(|o| o["op"] == name && o["dtype_out"] == dtype)
            .unwrap()
    };
    // Bytes counted per op: an add reads two inputs and writes one.
    assert_eq!(u(&op("add", "f32")["bytes_read"]), 2 * elements * 4);
    assert_eq!(u(&op("add", "f32")["bytes_written"]), elements * 4);
    assert_eq!(u(&op("add", "bf16")["bytes_moved"]), 3 * elements * 2);
    assert_eq!(u(&op("add", "f32")["flops"]), elements);
    assert_eq!(u(&op("affine", "f32")["flops"]), 2 * elements);
    assert_eq!(u(&op("sum", "f32")["bytes_written"]), 4);
    assert_eq!(u(&op("cast", "bf16")["bytes_read"]), elements * 4);
    assert_eq!(u(&op("cast", "bf16")["bytes_written"]), elements * 2);
    assert_eq!(op("copy", "f32")["gflop_per_s"], Value::Null);

    let roofline = &m["roofline"];
    // The memory roof: the ladder's copy at its largest footprint (the cap's).
    let roof = m["ladder"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            (p["kernel"] == "copy" || p["kernel"] == "copy_nt")
                && u(&p["footprint_bytes"]) == 4 << 20
        })
        .map(|p| f(&p["gb_per_s"]))
        .fold(0.0, f64::max);
    assert_eq!(f(&roofline["memory_gb_per_s"]), roof);
    let compute = f(&roofline["compute_gflop_per_s"]);
    let points = roofline["points"].as_array().unwrap();
    assert_eq!(
        points.len(),
        3 * 2 + 2,
        "add, affine, sum per dtype; two matmuls"
    );
    for p in points {
        let fpb = f(&p["flop_per_byte"]);
        let attainable = (fpb * roof).min(compute);
        assert!(close(f(&p["attainable_gflop_per_s"]), attainable), "{p}");
    }
    let matmul = points.iter().find(|p| p["kind"] == "matmul").unwrap();
    assert_eq!(f(&matmul["flop_per_byte"]), 2.0 * 32.0 / 12.0);

    let oom = &m["out_of_memory"];
    let refusal = &oom["refusal"];
    let (requested, available) = (
        u(&refusal["requested_bytes"]),
        u(&refusal["available_bytes"]),
    );
    assert!(requested > available);
    assert!(refusal["error"].as_str().unwrap().contains("available"));
    // The refusal came before any allocation of that size.
    assert!(u(&refusal["heap_growth_bytes"]) < 1 << 20, "{refusal}");
    if device == "cpu" {
        assert_eq!(m["transfers"]["status"], "skipped");
        assert!(m["transfers"]["reason"]
            .as_str()
            .unwrap()
            .contains("need a GPU"));
        assert!(oom["device_attempt"].is_null());
        assert!(oom["device_attempt_skipped"]
            .as_str()
            .unwrap()
            .contains("needs a GPU"));
        assert!(m["telemetry"]["unavailable_reason"]
            .as_str()
            .unwrap()
            .contains("CPU"));
        assert!(stdout.contains("transfers skipped"), "{stdout}");
    } else {
        let rows = m["transfers"]["rows"].as_array().unwrap();
        assert_eq!(
            rows.len(),
            2 * 6,
            "1 and 4 MiB, three kinds, two directions"
        );
        for row in rows {
            let ms = rate_time(row);
            assert!(close(
                f(&row["gb_per_s"]),
                u(&row["bytes"]) as f64 / (ms * 1e-3) / 1e9
            ));
        }
        let attempt = &oom["device_attempt"];
        let error = attempt["error"].as_str().unwrap().to_ascii_uppercase();
        assert!(
            error.contains("OUT_OF_MEMORY") || error.contains("OUT OF MEMORY"),
            "{attempt}"
        );
        assert_eq!(attempt["matmul_after_ok"], true);
    }
    for title in [
        "memory-bound operations",
        "out of memory",
        "roofline points",
    ] {
        assert!(stdout.contains(title), "{title} missing:\n{stdout}");
    }
}

fn overhead_fields(device: &str) {
    let (o, stdout) = run_body(
        "overhead",
        &[
            "--device",
            device,
            "--iters",
            "3",
            "--warmup",
            "1",
            "--first-size",
            "32",
            "--calls",
            "5",
            "--cache-sizes",
            "16,64",
            "--flush-mib",
            "4",
        ],
    );
    assert!(f(&o["device_open_ms"]) >= 0.0);
    let first: Vec<&str> = o["first_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["op"].as_str().unwrap())
        .collect();
    assert_eq!(first, ["matmul", "add"]);
    // On a GPU, the driver's JIT cache as the first calls found it (gpu-run.sh
    // names one of the run's own); the CPU compiles no kernels.
    let jit = &o["jit_cache"];
    assert_eq!(jit.is_null(), device == "cpu", "{jit}");
    if device == "cuda" {
        let named = std::env::var_os("CUDA_CACHE_PATH").is_some_and(|v| !v.is_empty());
        assert_eq!(jit["from_env"], named, "{jit}");
        assert_eq!(
            jit["warm"],
            u(&jit["files_before"]) > 0 && jit["disabled"] == false
        );
    }
    for c in o["first_calls"].as_array().unwrap() {
        assert_eq!(u(&c["size"]), 32);
        assert_eq!(c["warm"]["samples_wall_ms"].as_array().unwrap().len(), 3);
        assert_eq!(
            f(&c["first_over_warm"]),
            f(&c["first_ms"]) / f(&c["warm"]["median_ms"])
        );
        assert_eq!(c["first_gpu_ms"].is_null(), device == "cpu");
    }
    let launch = o["launch"].as_array().unwrap();
    let shape: Vec<(String, u64, usize)> = launch
        .iter()
        .map(|l| {
            (
                l["mode"].as_str().unwrap().to_string(),
                u(&l["calls_per_sample"]),
                l["samples_wall_ms"].as_array().unwrap().len(),
            )
        })
        .collect();
    let expect = |m: &str, c, n| (m.to_string(), c, n);
    assert_eq!(
        shape,
        [
            expect("synchronized", 1, 5),
            expect("queued", 5, 3),
            expect("synchronized", 1, 5),
            expect("queued", 5, 3)
        ]
    );
    // The clock's own cost is recorded beside the launch rows and taken out.
    let clock = &o["clock_overhead"];
    assert!(f(&clock["wall_median_ms"]) > 0.0, "{clock}");
    assert_eq!(clock["gpu_median_ms"].is_null(), device == "cpu");
    for l in launch {
        let calls = u(&l["calls_per_sample"]) as f64;
        let per_call = f(&l["median_ms"]) * 1e3 / calls;
        assert!(close(f(&l["per_call_us"]), per_call), "{l}");
        assert!(close(f(&l["calls_per_s"]), 1e6 / per_call), "{l}");
        let net = (f(&l["median_ms"]) - f(&clock["wall_median_ms"])).max(0.0) * 1e3 / calls;
        assert!(close(f(&l["per_call_net_us"]), net), "{l}");
        assert_eq!(l["per_call_gpu_net_us"].is_null(), device == "cpu");
    }
    let cache = &o["cache"];
    if cache["status"] == "ok" {
        assert_eq!(u(&cache["flush_bytes"]), 4 << 20);
        let rows = cache["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        for r in rows {
            let n = u(&r["size"]);
            assert_eq!(u(&r["working_set_bytes"]), 3 * n * n * 4);
            assert_eq!(r["cold"]["samples_wall_ms"].as_array().unwrap().len(), 3);
            assert_eq!(
                f(&r["cold_over_hot"]),
                f(&r["cold"]["median_ms"]) / f(&r["hot"]["median_ms"])
            );
        }
    } else {
        assert!(cache["reason"].is_string() && cache["rows"].as_array().unwrap().is_empty());
    }
    for title in ["first call", "launch overhead", "cold vs hot cache"] {
        assert!(stdout.contains(title), "{title} missing:\n{stdout}");
    }
}

#[test]
fn memory_fields_cpu() {
    memory_fields("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn memory_fields_cuda() {
    memory_fields("cuda");
}

#[test]
fn overhead_fields_cpu() {
    overhead_fields("cpu");
}

#[cfg(feature = "cuda")]
#[test]
fn overhead_fields_cuda() {
    overhead_fields("cuda");
}

#[test]
fn an_impossible_allocation_is_refused_before_it_is_made() {
    // 1 TiB per tensor: refused by the check, in one line naming both sizes.
    refused(
        "memory",
        &["--device", "cpu", "--mib", "1048576"],
        "--mib 1048576: needs",
    );
    refused(
        "overhead",
        &["--device", "cpu", "--cache-sizes", "64,200000"],
        "available",
    );
    refused(
        "overhead",
        &["--device", "cpu", "--flush-mib", "1048576"],
        "--flush-mib 1048576: needs",
    );
    // Issue 52: a 1 TiB ladder computed for seconds, then failed on the
    // allocation; the ladder measures at the cap, so the cap is what must fit.
    let started = std::time::Instant::now();
    refused(
        "memory",
        &[
            "--device",
            "cpu",
            "--preset",
            "small",
            "--ladder-max-mib",
            "1048576",
        ],
        "--ladder-max-mib 1048576: needs 1099511627776 (1.0 TiB)",
    );
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    refused("memory", &["--mib", "0"], "--mib");
    refused("memory", &["--iters", "0"], "--iters");
    refused(
        "memory",
        &["--dtypes", "f32,f12"],
        "expected one of f64, f32, f16, bf16",
    );
    refused("overhead", &["--calls", "0"], "--calls");
    refused("overhead", &["--cache-sizes", "0"], "--cache-sizes");
    refused("overhead", &["--device", "tpu"], "cuda:N");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_on_a_cpu_build_says_how_to_rebuild() {
    for name in ["memory", "overhead"] {
        refused(name, &["--device", "cuda"], "--features cuda");
    }
}

#[test]
fn help_explains_every_flag() {
    for (name, flags) in [
        (
            "memory",
            &[
                "--mib",
                "--iters",
                "--warmup",
                "--dtypes",
                "--matmul-size",
                "--transfer-max-mib",
            ][..],
        ),
        (
            "overhead",
            &[
                "--iters",
                "--warmup",
                "--first-size",
                "--calls",
                "--cache-sizes",
                "--flush-mib",
            ][..],
        ),
    ] {
        let out = run(name, &["--help"]);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in flags
            .iter()
            .chain(&["--device", "--output", "--results-dir"])
        {
            assert!(help.contains(flag), "{name} --help lacks {flag}");
        }
    }
}
