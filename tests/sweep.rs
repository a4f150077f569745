//! The `sweep` program as a user runs it, at tiny sizes: JSON, CSV and SVG
//! beside each other with the structure promised, an interrupted sweep keeps
//! the points it finished, and bad flags are refused before computing. No
//! time is asserted.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

fn sweep(args: &[&str]) -> Output {
    Command::new(common::bin("sweep"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the binary starts")
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// One body for every device.
fn writes_json_csv_and_svg(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("out/s.json");
    let out = sweep(&[
        "--device",
        device,
        "--sizes",
        "64,32,48",
        "--max-seconds",
        "0.1",
        "--output",
        json_path.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(names(&dir.path().join("out")), ["s.csv", "s.json", "s.svg"]);

    // JSON: read back through the schema, and valid against the committed JSON Schema.
    let file = candle_lab::schema::read(&json_path).unwrap();
    let candle_lab::schema::Body::Sweep(r) = &file.body else {
        panic!("not a sweep: {}", file.experiment)
    };
    assert_eq!(file.schema_version, candle_lab::schema::SCHEMA_VERSION);
    assert_eq!(r.sizes, [32, 48, 64], "ascending");
    assert!(r.complete);
    assert_eq!(r.points.len(), 9);
    for p in &r.points {
        let m = p.row.measured.as_ref().expect("measured");
        assert!(m.wall_ms.n >= 10 && m.samples_wall_ms.len() == m.wall_ms.n);
        assert!(m.gflops > 0.0 && p.sampling_s.unwrap() > 0.0);
        assert!(p.stopped_by.is_some());
    }
    assert_eq!(r.clock_overhead.gpu_median_ms.is_some(), device == "cuda");
    let value: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(value["sweep"]["sampling"]["mode"], "adaptive");
    assert_eq!(value["sweep"]["sampling"]["max_time_s"], 0.1);
    let schema: Value = serde_json::from_str(&candle_lab::schema::json_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");

    // CSV: a header and one row per point, in the order they ran.
    let csv = std::fs::read_to_string(dir.path().join("out/s.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "machine,experiment,size,precision,status,median_ms,gflops,n_samples,stopped_by,sweep_complete"
    );
    assert_eq!(lines.len(), 1 + 9);
    let first: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(first.len(), 10);
    assert_eq!(first[9], "true", "a finished sweep says so in every row");
    assert_eq!(
        (first[1], first[2], first[3], first[4]),
        ("sweep", "32", "fp32", "ok")
    );
    assert!(first[5].parse::<f64>().unwrap() > 0.0);
    assert!(["noise_target", "max_time", "max_samples"].contains(&first[8]));

    // SVG: a chart with a line per precision.
    let svg = std::fs::read_to_string(dir.path().join("out/s.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let texts: Vec<&str> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
        .collect();
    for want in ["fp32", "fp16", "bf16"] {
        assert!(texts.contains(&want), "{want} not in {texts:?}");
    }
    // The axis is in GFLOP/s, or in TFLOP/s once it reaches 10,000 GFLOP/s: on
    // a GPU its datasheet peak's line does (an H200's bf16 peak is 989 TFLOP/s).
    let units = if device == "cpu" {
        &["throughput (GFLOP/s)"][..]
    } else {
        &["throughput (GFLOP/s)", "throughput (TFLOP/s)"][..]
    };
    assert!(
        units.iter().any(|u| texts.contains(u)),
        "no axis in {units:?}: {texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("matmul sweep on ")),
        "{texts:?}"
    );
    // The table and the notes.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("stopped by") && stdout.contains("clock overhead"),
        "{stdout}"
    );
    assert!(
        stderr.contains("wrote") && stderr.contains("s.csv"),
        "{stderr}"
    );
}

mod cpu {
    #[test]
    fn writes_json_csv_and_svg() {
        super::writes_json_csv_and_svg("cpu");
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    #[test]
    fn writes_json_csv_and_svg() {
        super::writes_json_csv_and_svg("cuda");
    }
}

/// Waits for `child` for up to two minutes.
fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the sweep did not end in two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_interrupted_sweep_keeps_its_finished_points() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    // A quick first point, then one of at least 12 runs of a 1536 matmul
    // (many milliseconds each): the kill lands while it runs.
    let mut child = Command::new(common::bin("sweep"))
        .args(["--device", "cpu", "--sizes", "16,1536", "--dtypes", "fp32"])
        .args(["--max-seconds", "60", "--output"])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first point is in once its three files are (the SVG is written last).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.path().join("sweep.svg").exists() {
        assert!(
            Instant::now() < deadline,
            "no point was written in a minute"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let status = wait(&mut child);
    assert_eq!(status.code(), Some(143), "ended by SIGTERM");
    let file = candle_lab::schema::read(&json).unwrap();
    let candle_lab::schema::Body::Sweep(r) = file.body else {
        panic!("not a sweep")
    };
    assert!(!r.points.is_empty());
    assert!(!r.complete, "{} of {} points", r.points.len(), r.planned());
    assert_eq!(
        (r.points[0].size, r.points[0].row.status),
        (16, candle_lab::schema::RowStatus::Ok)
    );
    // No temporary file left; the CSV and SVG of the finished point stay.
    assert_eq!(names(dir.path()), ["sweep.csv", "sweep.json", "sweep.svg"]);
}

#[test]
fn bad_flags_are_refused_before_computing() {
    let dir = tempfile::tempdir().unwrap();
    let out_json = dir.path().join("x.json");
    let out = out_json.to_str().unwrap();
    for (args, code, expect) in [
        (vec!["--max-seconds", "0"], 2, "--max-seconds"),
        (vec!["--max-seconds", "nan"], 2, "--max-seconds"),
        (vec!["--sizes", "0"], 2, "--sizes"),
        (vec!["--sizes", "64,x"], 2, "--sizes"),
        (vec!["--dtypes", "tf32"], 1, "needs a CUDA device"),
        (
            vec!["--sizes", "500000"],
            1,
            "--sizes (largest 500000): needs",
        ),
    ] {
        let mut all = vec!["--device", "cpu", "--output", out];
        all.extend(&args);
        let ran = sweep(&all);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(code), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
        assert!(errors[0].contains(expect), "{args:?}: {stderr}");
        assert!(names(dir.path()).is_empty(), "{args:?}: nothing written");
    }
    // The CSV and SVG go beside the JSON under its name: a .csv JSON is refused.
    let csv_named = dir.path().join("x.csv");
    let ran = sweep(&["--device", "cpu", "--output", csv_named.to_str().unwrap()]);
    assert_eq!(ran.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&ran.stderr).contains("must not end in .csv"));
}

#[test]
fn help_lists_the_default_cpu_sizes() {
    let help = String::from_utf8_lossy(&sweep(&["--help"]).stdout).into_owned();
    let sizes: Vec<String> = candle_lab::bench::sweep::CPU_SIZES
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert!(help.contains(&sizes.join(",")), "{help}");
}

/// The sweep's three files agree however an interrupt falls: the JSON's
/// points, the CSV's rows and the chart's title say the same number of points
/// and whether the sweep finished (issue: the JSON once had one more point).
#[test]
fn an_interrupt_leaves_the_three_files_agreeing() {
    let delays_ms = [40, 90, 140, 190, 240, 290, 340, 390, 440, 490, 20, 65];
    for delay in delays_ms {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("sweep.json");
        let mut child = Command::new(common::bin("sweep"))
            .args(["--device", "cpu", "--sizes", "8,12,16,20,24,28,32,36"])
            .args(["--dtypes", "fp32", "--max-seconds", "0.03", "--output"])
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let status = wait(&mut child);
        // An interrupt that comes before the program has set its handler
        // ends it as SIGINT ends any program, before it could write anything.
        // It happened on the H200's machine, likely because a CUDA build
        // loads the driver's and cuBLAS's libraries before main.
        let killed_early = status.signal() == Some(libc::SIGINT);
        assert!(
            killed_early || matches!(status.code(), Some(0 | 130)),
            "{delay} ms: {status:?}"
        );
        if killed_early || !json.exists() {
            // Interrupted before the first point: nothing at all was written.
            assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
            continue;
        }
        let file = candle_lab::schema::read(&json).unwrap();
        let candle_lab::schema::Body::Sweep(r) = file.body else {
            panic!("not a sweep")
        };
        let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
        let rows: Vec<&str> = csv.lines().skip(1).collect();
        assert_eq!(rows.len(), r.points.len(), "{delay} ms: {csv}");
        assert!(
            rows.iter()
                .all(|l| l.ends_with(&format!(",{}", r.complete))),
            "{delay} ms: {csv}"
        );
        let svg = std::fs::read_to_string(dir.path().join("sweep.svg")).unwrap();
        let incomplete = format!("(incomplete: {} of {} points)", r.points.len(), r.planned());
        assert_eq!(
            svg.contains(&incomplete),
            !r.complete,
            "{delay} ms: {incomplete}"
        );
        assert_eq!(names(dir.path()), ["sweep.csv", "sweep.json", "sweep.svg"]);
    }
}
