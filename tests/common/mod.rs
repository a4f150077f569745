//! What the integration tests share: finding the suite's programs and running
//! them. Each test file is its own crate and uses what it needs of this.
#![allow(dead_code)]

pub mod gguf;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The program `name`: from a packed bundle's folders when gpu-run.sh names
/// them (`CANDLE_LAB_BIN_DIR` for experiments/, `CANDLE_LAB_TOOLS_DIR` for
/// tools/), where cargo's build paths do not exist; else the one cargo built
/// beside this test (`target/<profile>/`, the folder above the test's own
/// `deps/`), as cargo builds every program before an integration test runs.
pub fn bin(name: &str) -> PathBuf {
    let var = if candle_lab::schema::Kind::from_name(name).is_some() {
        "CANDLE_LAB_BIN_DIR"
    } else {
        "CANDLE_LAB_TOOLS_DIR"
    };
    if let Some(dir) = std::env::var_os(var) {
        return Path::new(&dir).join(name);
    }
    let test = std::env::current_exe().expect("the test knows where it is");
    let dir = test
        .parent()
        .and_then(Path::parent)
        .expect("a test runs from target/<profile>/deps/");
    let path = dir.join(name);
    assert!(path.is_file(), "no program {name} at {}", path.display());
    path
}

/// A file of the repository, `rel` from its root: in a bundle run (gpu-run.sh
/// sets `CANDLE_LAB_BIN_DIR`) the tests run in a folder where the root's
/// results/, schema/ and tests/fixtures/ are linked; else from cargo's root.
pub fn repo_file(rel: &str) -> PathBuf {
    if std::env::var_os("CANDLE_LAB_BIN_DIR").is_some() {
        PathBuf::from(rel)
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
    }
}

/// Runs the program `name` with `args` and waits for it.
pub fn run(name: &str, args: &[&str]) -> Output {
    Command::new(bin(name))
        .args(args)
        .output()
        .expect("the binary starts")
}

/// Runs `name` with `args` plus `--output FILE`, expects success, and checks the
/// file as every reader will take it: the envelope (experiment, schema version,
/// body under the experiment's key), the typed reader giving back the same
/// JSON, and the committed JSON Schema. Returns the file's JSON and the run.
pub fn run_result(name: &str, args: &[&str]) -> (serde_json::Value, Output) {
    let dir = tempfile::tempdir().unwrap();
    run_result_at(&dir.path().join("out.json"), name, args)
}

/// [`run_result`] writing to `path`, which stays (and the files beside it) for
/// the test to read.
pub fn run_result_at(path: &Path, name: &str, args: &[&str]) -> (serde_json::Value, Output) {
    let mut all = args.to_vec();
    all.extend(["--output", path.to_str().unwrap()]);
    let out = run(name, &all);
    assert!(
        out.status.success(),
        "{name} {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(json["experiment"], name);
    assert_eq!(json["schema_version"], candle_lab::schema::SCHEMA_VERSION);
    assert!(json[name].is_object(), "the body sits under \"{name}\"");
    let typed = candle_lab::schema::read(path).unwrap();
    assert_eq!(serde_json::to_value(typed).unwrap(), json);
    let schema: serde_json::Value =
        serde_json::from_str(&candle_lab::schema::json_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    (json, out)
}

/// Runs a bad command: non-zero exit, one stderr line containing `expect`, no
/// panic, and no result file.
pub fn refused(name: &str, args: &[&str], expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.json");
    let mut all = args.to_vec();
    all.extend(["--output", path.to_str().unwrap()]);
    let out = run(name, &all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{name} {args:?} succeeded");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "one error line: {stderr}");
    assert!(errors[0].contains(expect), "{expect:?} not in {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
    assert!(
        !path.exists() && std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "no file is left"
    );
}

/// The cached model `name` (`just model NAME` fetches it), checked as
/// `generate` checks it; `None`, said in a line, where it is absent, unless
/// CI is set: CI fetches it, and there a missing file fails.
pub fn cached_model(name: &str) -> Option<candle_lab::model::gguf::ModelFile> {
    let path = candle_lab::bench::generate::setup::model_path(name).expect("HOME is set");
    if !path.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no model at {}: CI fetches it with `just model {name}`",
            path.display()
        );
        eprintln!(
            "skipped: no model at {} (`just model {name}` fetches it)",
            path.display()
        );
        return None;
    }
    Some(candle_lab::model::gguf::ModelFile::open(&path).unwrap())
}
