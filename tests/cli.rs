//! The experiment programs, run as a user runs them: their JSON holds the
//! values the reference lab verified, and every bad input ends in one clear
//! line, a non-zero exit and no result file. Small sizes only: these check
//! correctness and structure, never speed. Device-generic bodies run on the CPU
//! always and on CUDA when built with the `cuda` feature.

mod common;
use common::{refused, run};

use std::process::Output;

use serde_json::Value;

/// Runs `name` with `args` plus `--output`, expects success, returns the JSON
/// (checked as every reader takes it: [`common::run_result`]).
fn run_json(name: &str, args: &[&str]) -> Value {
    let (json, _) = common::run_result(name, args);
    assert!(json["command"].as_str().unwrap().contains("--output"));
    json
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `test_device!(body)` makes `body_cpu` and, with the `cuda` feature, `body_cuda`.
macro_rules! test_device {
    ($body:ident) => {
        paste_tests!($body, cpu, "cpu");
        #[cfg(feature = "cuda")]
        paste_tests!($body, cuda, "cuda");
    };
}

macro_rules! paste_tests {
    ($body:ident, $suffix:ident, $device:literal) => {
        mod $suffix {
            #[test]
            fn $body() {
                super::$body($device);
            }
        }
    };
}

mod basics_tests {
    use super::*;

    pub fn basics_values(device: &str) {
        let file = run_json("basics", &["--device", device]);
        let j = &file["basics"];
        let total: Vec<u64> = j["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["total_bytes"].as_u64().unwrap())
            .collect();
        assert_eq!(total, [4, 12, 24, 96]);
        let ranks: Vec<u64> = j["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["rank"].as_u64().unwrap())
            .collect();
        assert_eq!(ranks, [0, 1, 2, 3]);
        assert_eq!(j["tensors"][3]["shape"], serde_json::json!([2, 3, 4]));
        let by_dtype = |name: &str| {
            j["dtypes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["dtype"] == name)
                .unwrap()["total_bytes"]
                .as_u64()
                .unwrap()
        };
        assert_eq!(by_dtype("f32"), 4_194_304);
        assert_eq!(by_dtype("f16"), 2_097_152);
        assert_eq!(by_dtype("bf16"), 2_097_152);
        assert_eq!(by_dtype("f8e4m3"), 1_048_576);
        assert_eq!(by_dtype("i64"), 8_388_608);
        assert_eq!(f64s(&j["elementwise_add"]["a_plus_b"]), [11.0, 22.0, 33.0]);
        assert_eq!(
            j["broadcasting"]["result"],
            serde_json::json!([[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]])
        );

        for v in j["views"].as_array().unwrap() {
            assert_eq!(v["is_contiguous"], false);
            let data = v["data_bytes"].as_u64().unwrap();
            assert_eq!(data, 4 * 1024 * 1024);
            // A view costs at most its metadata; the contiguous copy, the data.
            assert!(v["view_added_bytes"].as_u64().unwrap() < 4096, "{v}");
            assert!(v["contiguous_added_bytes"].as_u64().unwrap() >= data, "{v}");
        }
        assert_eq!(
            j["views"][0]["stride"][0], 0,
            "a broadcast repeats with stride 0"
        );

        let transfer = &j["transfer"];
        if device == "cuda" {
            assert_eq!(
                (transfer["before"].as_str(), transfer["after"].as_str()),
                (Some("cpu"), Some("cuda:0"))
            );
        } else {
            assert_eq!(transfer["status"], "skipped");
        }
        assert_eq!(
            j["tensors"][0]["device"].as_str().unwrap(),
            if device == "cuda" { "cuda:0" } else { "cpu" }
        );
    }

    pub fn precision_values(device: &str) {
        let file = run_json("precision", &["--device", device]);
        let j = &file["precision"];
        let limits = |name: &str| {
            j["formats"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["format"] == name)
                .unwrap()["limits"]
                .clone()
        };
        assert_eq!(limits("f32")["max"].as_f64(), Some(f64::from(f32::MAX)));
        assert_eq!(limits("f32")["eps"].as_f64(), Some(f64::from(f32::EPSILON)));
        assert_eq!(limits("f16")["max"].as_f64(), Some(65504.0));
        assert_eq!(limits("f16")["eps"].as_f64(), Some(0.0009765625));
        assert_eq!(limits("bf16")["eps"].as_f64(), Some(0.0078125));
        assert_eq!(limits("f8e4m3")["max"].as_f64(), Some(448.0));

        let stored = |section: &str, dtype: &str| -> Value {
            j[section]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["dtype"] == dtype)
                .unwrap()["stored"]
                .clone()
        };
        for dtype in ["f64", "f32", "f16", "bf16"] {
            assert_eq!(
                stored("one_plus_eps", dtype)[0].as_f64(),
                Some(1.0),
                "{dtype}: 1 + eps/2 rounds to 1"
            );
            assert!(
                stored("one_plus_eps", dtype)[1].as_f64().unwrap() > 1.0,
                "{dtype}: 1 + eps is kept"
            );
        }
        assert_eq!(
            stored("overflow", "f16"),
            serde_json::json!([65504.0, "inf", "inf"])
        );
        assert_eq!(stored("overflow", "bf16")[2].as_f64(), Some(70144.0));
        assert_eq!(
            f64s(&stored("integers", "bf16")),
            [256.0, 256.0, 258.0, 260.0, 260.0]
        );
        assert_eq!(
            f64s(&stored("integers", "f16")),
            [256.0, 257.0, 258.0, 259.0, 260.0]
        );

        let tenth = |dtype: &str| {
            j["point_one"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["dtype"] == dtype)
                .unwrap()["stored"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(tenth("bf16"), 0.10009765625);
        assert_eq!(tenth("f16"), 0.0999755859375);
        assert_eq!(tenth("f32"), f64::from(0.1f32));

        let running = |dtype: &str| {
            j["accumulation"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["dtype"] == dtype)
                .unwrap()["running_sum"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(
            running("f16"),
            32.0,
            "f16 stalls where its step exceeds 2 x 0.01"
        );
        assert_eq!(running("bf16"), 4.0);
        assert!((running("f32") - 100.0).abs() < 0.01);
        assert!((running("f64") - 100.0).abs() < 1e-9);
    }
}
use basics_tests::{basics_values, precision_values};
test_device!(basics_values);
mod precision_device {
    use super::*;
    test_device!(precision_values);
}

mod bench_tests {
    use super::*;

    pub fn matmul_fields(device: &str) {
        let j = run_json(
            "matmul",
            &[
                "--device",
                device,
                "--size",
                "128",
                "--iters",
                "3",
                "--warmup",
                "1",
                "--dtypes",
                "fp64,fp32,fp16,bf16",
            ],
        );
        let m = &j["matmul"];
        // The reference lab's fields, read the same way.
        assert_eq!(
            (m["size"].as_u64(), m["warmup"].as_u64()),
            (Some(128), Some(1))
        );
        assert_eq!(m["device"], if device == "cuda" { "cuda" } else { "cpu" });
        let rows = m["precisions"].as_array().unwrap();
        let names: Vec<&str> = rows
            .iter()
            .map(|r| r["precision"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["fp64", "fp32", "fp16", "bf16"]);
        for r in rows {
            assert_eq!(r["status"], "ok");
            assert_eq!(r["samples_wall_ms"].as_array().unwrap().len(), 3);
            assert_eq!(r["wall_ms"]["n"], 3);
            let median = r["median_ms"].as_f64().unwrap();
            assert_eq!(r["wall_ms"]["median"].as_f64(), Some(median));
            let gflops = r["gflops"].as_f64().unwrap();
            assert!((gflops - 2.0 * 128f64.powi(3) / (median * 1e-3) / 1e9).abs() < 1e-6 * gflops);
            let (peak, payload) = (
                r["peak_bytes"].as_u64().unwrap(),
                r["payload_bytes"].as_u64().unwrap(),
            );
            assert_eq!(
                payload,
                3 * 128 * 128 * r["element_bytes"].as_u64().unwrap()
            );
            assert!(
                peak >= payload,
                "{}: peak {peak} < payload {payload}",
                r["precision"]
            );
            assert!(r["accuracy"]["max_rel_err"].as_f64().unwrap() < 0.1);
            assert_eq!(r["gpu_ms"].is_null(), device == "cpu");
        }
        // "x fp32": each row's ratios to the fp32 row, of the medians and peaks.
        let fp32 = &rows[1];
        let ratio = |r: &Value, key: &str| r[key].as_f64().unwrap() / fp32[key].as_f64().unwrap();
        for r in rows {
            let wall = fp32["median_ms"].as_f64().unwrap() / r["median_ms"].as_f64().unwrap();
            assert_eq!(r["speedup_vs_fp32_wall"].as_f64(), Some(wall));
            assert_eq!(r["peak_vs_fp32"].as_f64(), Some(ratio(r, "peak_bytes")));
            if device == "cpu" {
                assert!(r["speedup_vs_fp32_gpu"].is_null());
            } else {
                let gpu =
                    fp32["gpu_median_ms"].as_f64().unwrap() / r["gpu_median_ms"].as_f64().unwrap();
                assert_eq!(r["speedup_vs_fp32_gpu"].as_f64(), Some(gpu));
            }
        }
        assert_eq!(fp32["speedup_vs_fp32_wall"].as_f64(), Some(1.0));
        if device == "cpu" {
            assert_eq!(m["cpu_fp32_ms"], rows[1]["median_ms"]);
            assert!(m["gpu_speedup_fp32"].is_null());
            assert_eq!(m["cpu_iters"], 3);
        } else {
            assert_eq!(m["gpu_iters"], 3);
            assert!(m["gpu_speedup_fp32"].as_f64().unwrap() > 0.0);
        }
        for key in ["environment", "device", "created_utc"] {
            assert!(!j[key].is_null(), "{key}");
        }
    }

    pub fn cpu_vs_gpu_fields(device: &str) {
        let file = run_json(
            "cpu_vs_gpu",
            &[
                "--device", device, "--size", "96", "--iters", "8", "--warmup", "1",
            ],
        );
        let j = &file["cpu_vs_gpu"];
        assert_eq!(j["cpu_iters"], 3, "max(3, 8 / 4)");
        assert_eq!(j["cpu"]["samples_wall_ms"].as_array().unwrap().len(), 3);
        assert!(j["cpu_threads"].as_u64().unwrap() >= 1);
        assert_eq!(j["cpu_fp32_ms"], j["cpu"]["median_ms"]);
        if device == "cuda" {
            assert_eq!(j["gpu"]["samples_wall_ms"].as_array().unwrap().len(), 8);
            let s = j["gpu_speedup_fp32"].as_f64().unwrap();
            assert_eq!(
                s,
                j["cpu_fp32_ms"].as_f64().unwrap() / j["gpu_fp32_ms"].as_f64().unwrap()
            );
        } else {
            assert!(j["gpu"].is_null() && j["gpu_speedup_fp32"].is_null());
            assert!(j["gpu_skipped"]
                .as_str()
                .unwrap()
                .contains("no CUDA device"));
        }
    }
}
use bench_tests::{cpu_vs_gpu_fields, matmul_fields};
mod matmul_device {
    use super::*;
    test_device!(matmul_fields);
}
mod cpu_vs_gpu_device {
    use super::*;
    test_device!(cpu_vs_gpu_fields);
}

#[test]
fn bad_sizes_and_counts_are_refused() {
    refused("matmul", &["--size", "0"], "--size");
    refused("matmul", &["--iters", "0"], "--iters");
    refused("cpu_vs_gpu", &["--size=-3"], "--size");
    refused("matmul", &["--size", "many"], "--size");
}

#[test]
fn unknown_dtypes_and_devices_list_the_valid_ones() {
    refused(
        "matmul",
        &["--dtypes", "fp32,f12"],
        "expected one of fp64, fp32, tf32, fp16, fp16-reduced, bf16, bf16-reduced",
    );
    refused(
        "basics",
        &["--device", "tpu"],
        "expected one of auto, cpu, cuda, cuda:N",
    );
    refused("precision", &["--device", "cuda:x"], "cuda:N");
}

#[test]
fn gpu_only_modes_on_the_cpu_are_refused() {
    refused(
        "matmul",
        &["--device", "cpu", "--size", "64", "--dtypes", "tf32"],
        "needs a CUDA device",
    );
    refused(
        "matmul",
        &[
            "--device",
            "cpu",
            "--size",
            "64",
            "--dtypes",
            "fp16,bf16-reduced",
        ],
        "bf16-reduced",
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_on_a_cpu_build_says_how_to_rebuild() {
    for name in ["basics", "precision", "matmul", "cpu_vs_gpu"] {
        refused(name, &["--device", "cuda"], "--features cuda");
    }
}

#[test]
fn a_size_beyond_memory_is_refused_before_it_is_tried() {
    refused(
        "matmul",
        &["--device", "cpu", "--size", "200000"],
        "host memory",
    );
    refused("cpu_vs_gpu", &["--size", "200000"], "host memory");
    // Past the cap, clap refuses it before any arithmetic could overflow.
    refused("matmul", &["--size", "4294967296"], "1..=1000000");
}

/// A process limit on memory is one `error:` line too, not an allocation
/// abort (exit 134): `ulimit -v` at ~680 MiB against the ~2 GiB that an 8192
/// CPU matmul needs. CPU builds only: a CUDA build maps cuBLAS's libraries at
/// start, several hundred MiB of address space before `main` runs.
#[cfg(all(unix, not(feature = "cuda")))]
#[test]
fn a_process_memory_limit_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json");
    let script = format!(
        "ulimit -v 700000 && exec '{}' --device cpu --size 8192 --iters 1 --warmup 0 --output '{}'",
        common::bin("matmul").display(),
        path.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_ne!(out.status.code(), Some(134), "aborted: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("ulimit -v"), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("memory allocation of"));
    assert!(!path.exists(), "no file is written");
}

#[test]
fn unwritable_output_names_the_path_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let target = blocker.join("out.json");
    let out = run(
        "basics",
        &["--device", "cpu", "--output", target.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(target.to_str().unwrap()), "{stderr}");
    assert!(!stdout_has_tables(&out), "fails before computing");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

fn stdout_has_tables(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stdout).contains("===")
}

#[test]
fn results_dir_files_by_device() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        "basics",
        &[
            "--device",
            "cpu",
            "--results-dir",
            dir.path().to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One folder, named after this machine's CPU model and logical CPUs.
    let folders: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    let json: Value =
        serde_json::from_slice(&std::fs::read(folders[0].join("basics.json")).unwrap()).unwrap();
    assert_eq!(json["device"]["kind"], "cpu");
    let threads = json["environment"]["cpu_threads_available"]
        .as_u64()
        .unwrap();
    let name = folders[0].file_name().unwrap().to_str().unwrap();
    assert!(name.ends_with(&format!("-{threads}t")), "{name}");
    refused("basics", &["--results-dir", "x"], "cannot be used with");
}

#[test]
fn results_dir_never_writes_through_a_link_on_the_way() {
    // Issue 52: a machine folder that was a link to a folder outside the
    // results tree was written through (report refuses the same link).
    let first = tempfile::tempdir().unwrap();
    let dir = first.path().to_str().unwrap();
    let out = run("basics", &["--device", "cpu", "--results-dir", dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let slug = std::fs::read_dir(first.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();

    let root = tempfile::tempdir().unwrap();
    let (results, outside) = (root.path().join("results"), root.path().join("outside"));
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, results.join(&slug)).unwrap();
    let results_arg = results.to_str().unwrap();
    let args = ["--device", "cpu", "--results-dir", results_arg];
    let out = run("basics", &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!(
            "{}: it is a symbolic link",
            slug.to_str().unwrap()
        )),
        "{stderr}"
    );
    assert!(!stdout_has_tables(&out), "refused before computing");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );

    // A real machine folder whose CSV (written beside the JSON) is a link out.
    std::fs::remove_file(results.join(&slug)).unwrap();
    std::fs::create_dir(results.join(&slug)).unwrap();
    let theirs = outside.join("theirs.csv");
    std::fs::write(&theirs, "theirs").unwrap();
    std::os::unix::fs::symlink(&theirs, results.join(&slug).join("matmul.csv")).unwrap();
    let out = run("matmul", &[&args[..], &["--preset", "small"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("matmul.csv: it is a symbolic link"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    assert!(!results.join(&slug).join("matmul.json").exists());
}

#[test]
fn a_preset_never_overrides_a_flag_the_user_gave_nor_one_it_conflicts_with() {
    // Issue 52: the small preset's --shape tiny conflicted with the user's
    // --model, and the run was refused (exit 2) for a pair it never typed.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    let spec = common::gguf::Spec::tiny("llama", candle_core::quantized::GgmlDType::Q8_0, &[]);
    std::fs::write(&model, spec.bytes().0).unwrap();
    let m = model.to_str().unwrap();
    let out = run(
        "generate",
        &[
            "--device",
            "cpu",
            "--model",
            m,
            "--preset",
            "small",
            "--prompt",
            "hi",
            "--dry-run",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains("m.gguf") && !plan.contains("\"tiny\""),
        "{plan}"
    );
    // The user's own two conflicting flags are still refused.
    refused(
        "generate",
        &["--model", m, "--shape", "tiny"],
        "cannot be used with",
    );
}

/// Runs `generate --dry-run` on the tiny GGUF with `template` as its chat
/// template, in at most 1 GiB of address space and 30 s: exit code, stderr, time.
fn dry_run_with_template(template: &str) -> (Option<i32>, String, std::time::Duration) {
    use common::gguf::{Raw, Spec};
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.gguf");
    let mut spec = Spec::tiny("llama", candle_core::quantized::GgmlDType::Q8_0, &[]);
    *spec.kv("tokenizer.chat_template") = Raw::str(template);
    std::fs::write(&model, spec.bytes().0).unwrap();
    let mut cmd = std::process::Command::new(common::bin("generate"));
    cmd.args(["--device", "cpu", "--prompt", "hi", "--dry-run", "--model"])
        .arg(&model)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed().as_secs() > 30 {
            child.kill().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, started.elapsed())
}

#[test]
fn a_chat_template_that_keeps_doubling_a_string_is_refused_in_bounded_memory() {
    // Issue 52: minijinja counts steps, not bytes: 28 doublings of "abc"
    // (805 MB) passed --dry-run, 40 took whatever the machine had.
    let namespace = "{% set ns = namespace(s='abc') %}{% for i in range(28) %}\
                     {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}";
    let top = format!(
        "{{% set s = 'abc' %}}{}{{{{ s|length }}}}",
        "{% set s = s + s %}".repeat(40)
    );
    for template in [namespace.to_string(), top] {
        let (code, stderr, took) = dry_run_with_template(&template);
        assert_eq!(code, Some(1), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(
            errors[0].contains("m.gguf: its chat template needs more than 64.0 MiB of memory"),
            "{stderr}"
        );
        assert!(took.as_secs() < 30, "{took:?}");
    }
    // A template's ordinary use of strings is untouched.
    let (code, stderr, _) = dry_run_with_template("{{ (messages[0].content * 100000)|length }}");
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn help_explains_every_flag() {
    for name in ["basics", "precision", "matmul", "cpu_vs_gpu"] {
        let out = run(name, &["--help"]);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in ["--device", "--output", "--results-dir"] {
            assert!(help.contains(flag), "{name} --help lacks {flag}");
        }
    }
    let help = String::from_utf8_lossy(&run("matmul", &["--help"]).stdout).to_string();
    for flag in [
        "--size",
        "--iters",
        "--warmup",
        "--dtypes",
        "--accuracy-rows",
        "--no-cpu",
        "--skip-host-memory-check",
    ] {
        assert!(help.contains(flag), "matmul --help lacks {flag}");
    }
    // generate's full tables are a flag away; its help says what the default fits.
    let help = String::from_utf8_lossy(&run("generate", &["--help"]).stdout).to_string();
    assert!(
        help.contains("--wide") && help.contains("120 columns"),
        "{help}"
    );
}

#[test]
fn tables_print_the_reference_values() {
    let out = run("basics", &["--device", "cpu"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "4194304",
        "2097152",
        "[11.0, 22.0, 33.0]",
        "[[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]]",
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
    let out = run("precision", &["--device", "cpu"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "3.403e+38",
        "1.192e-07",
        "6.550e+04",
        "9.766e-04",
        "3.390e+38",
        "7.812e-03",
    ] {
        assert!(stdout.contains(expected), "{expected} missing:\n{stdout}");
    }
}

/// Every experiment under `--dry-run`, as the GPU call's rehearsal runs it:
/// `--device cuda` is taken at its word (no device is opened, so a CPU-only
/// build and machine will do), the plan and the target are printed, exit 0,
/// and nothing is written: not the file, not the folders it would go in.
#[test]
fn a_dry_run_checks_and_plans_but_opens_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("new/folder/out.json");
    let target = target.to_str().unwrap();
    for name in [
        "basics",
        "precision",
        "matmul",
        "cpu_vs_gpu",
        "sweep",
        "memory",
        "overhead",
    ] {
        let out = run(name, &["--device", "cuda", "--dry-run", "--output", target]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.starts_with(&format!("dry run: {name} on --device cuda:0")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("would write: {target}")),
            "{stdout}"
        );
        assert!(stdout.contains("plan: "), "{stdout}");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{name} left something in {}",
            dir.path().display()
        );
    }
    // The GPU call's 8192 matmul, every precision: the cuBLAS modes are accepted
    // because the device asked for is a GPU.
    let out = run(
        "matmul",
        &[
            "--device",
            "cuda",
            "--size",
            "8192",
            "--dtypes",
            "fp64,fp32,tf32,fp16,fp16-reduced,bf16,bf16-reduced",
            "--no-cpu",
            "--skip-host-memory-check",
            "--dry-run",
        ],
    );
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Bf16Reduced"), "{stdout}");
    assert!(stdout.contains("would write: nothing"), "{stdout}");
}

/// A dry run refuses what a run refuses, with the same line and code.
#[test]
fn a_dry_run_refuses_what_a_run_refuses() {
    refused("matmul", &["--dry-run", "--dtypes", "fp32,f12"], "f12");
    refused(
        "matmul",
        &["--dry-run", "--device", "cpu", "--dtypes", "tf32"],
        "needs a CUDA device",
    );
    refused(
        "sweep",
        &["--dry-run", "--max-seconds", "0"],
        "--max-seconds",
    );
    refused("overhead", &["--dry-run", "--calls", "0"], "--calls");
    let out = run("memory", &["--dry-run", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    // The output path is checked as a run checks it.
    let out = run(
        "matmul",
        &["--dry-run", "--device", "cuda", "--output", "/dev/null"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: cannot write /dev/null"));
}

/// `compare --dry-run` checks its flags and names the files it would read,
/// which in a rehearsal do not exist yet.
#[test]
fn compare_dry_run_reads_nothing() {
    let out = run(
        "compare",
        &["--dry-run", "/nonexistent/a.json", "/nonexistent/b.json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout
        .contains("would compare: /nonexistent/b.json against the baseline /nonexistent/a.json"));
    let out = run(
        "compare",
        &["--dry-run", "--fail-if-slower", "x", "a.json", "b.json"],
    );
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------- issue 19: a failed allocation is one error line

/// What every out-of-memory end must look like: exit 1, one `error:` line
/// naming the allocation, no abort, no panic, no backtrace.
#[cfg(all(unix, not(feature = "cuda")))]
fn one_out_of_memory_line(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].starts_with("error: out of host memory: an allocation of ")
            && errors[0].contains("ulimit -v"),
        "{stderr}"
    );
    for never in [
        "memory allocation of",
        "panicked",
        "stack backtrace",
        "RUST_BACKTRACE",
    ] {
        assert!(!stderr.contains(never), "{never}: {stderr}");
    }
}

/// Past the memory check (`--skip-host-memory-check`), the inputs no longer
/// fit under `ulimit -v`: the allocator ends the run with one line, exit 1,
/// and removes the folders the run created for its file.
#[cfg(all(unix, not(feature = "cuda")))]
#[test]
fn an_allocation_that_fails_after_the_memory_check_is_one_error_line() {
    for name in ["matmul", "cpu_vs_gpu"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/deeper/out.json");
        let script = format!(
            "ulimit -v 200000 && exec '{}' --device cpu --size 8192 --iters 1 --warmup 0 \
             --skip-host-memory-check --output '{}'",
            common::bin(name).display(),
            path.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        one_out_of_memory_line(&out);
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{name}: no file and no folder left"
        );
    }
}

/// A sweep whose limit is lowered once its second point has begun (as `ulimit
/// -v` bites when the run needs more than its one-time reservation): one error
/// line, exit 1, no temporary file; the first point's files stay, marked
/// incomplete, as after any interrupted sweep.
#[cfg(all(target_os = "linux", not(feature = "cuda")))]
#[test]
fn a_sweep_that_runs_out_of_memory_mid_way_is_one_error_line() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let json = dir.path().join("new/sweep.json");
    let stderr_path = logs.path().join("stderr");
    let mut child = std::process::Command::new(common::bin("sweep"))
        .args(["--device", "cpu", "--sizes", "64,1024", "--dtypes", "fp32"])
        .args(["--max-seconds", "0.01", "--output"])
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&stderr_path)
        .unwrap()
        .contains("1024x1024")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the second point never began"
        );
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended early");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Below what the process holds: its next mapping fails.
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let limit = rustix::process::Rlimit {
        current: Some(1 << 20),
        maximum: Some(1 << 20),
    };
    rustix::process::prlimit(Some(pid), rustix::process::Resource::As, limit).unwrap();
    let status = child.wait().unwrap();
    let out = Output {
        status,
        stdout: Vec::new(),
        stderr: std::fs::read(&stderr_path).unwrap(),
    };
    one_out_of_memory_line(&out);
    let mut left: Vec<String> = std::fs::read_dir(json.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["sweep.csv", "sweep.json", "sweep.svg"],
        "no temporary file"
    );
    let file: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(file["sweep"]["complete"], false);
    assert_eq!(file["sweep"]["points"].as_array().unwrap().len(), 1);
}
