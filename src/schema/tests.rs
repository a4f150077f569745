//! The schema's promises, checked: committed files read back, the Rust
//! writer's files round-trip byte for byte (the PyTorch twins' read back the
//! same once written), the committed JSON Schema is the one the types generate and
//! every file validates against it, and what cannot be read is refused in one line.

use std::path::{Path, PathBuf};

use super::*;

/// The repository root: where cargo runs tests, and where the one-call GPU
/// run (scripts/gpu-run.sh) runs the packed ones.
fn repo() -> PathBuf {
    PathBuf::from(".")
}

/// Every candle-lab result file committed under results/ and tests/fixtures/
/// (the reference lab's own file, which has no schema, is read by `compare`
/// separately). The fixtures keep schema-1 files covered whatever a run
/// writes into results/.
pub(crate) fn committed_results() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo().join("results"), &mut files);
    walk(&repo().join("tests/fixtures"), &mut files);
    // Not result files: the reference lab's, and the tokens transformers and
    // llama.cpp gave (generate's and Gemma 3's tests read them: Gemma 3's
    // tokens and greedy answers).
    files.retain(|p| {
        let p = p.to_string_lossy();
        !p.contains("reference-lab")
            && !p.ends_with("generate-reference.json")
            && !p.contains("gemma3-")
    });
    files.sort();
    files
}

fn to_pretty(file: &ResultFile) -> String {
    let mut text = serde_json::to_string_pretty(file).unwrap();
    text.push('\n');
    text
}

#[test]
fn every_committed_result_reads_back() {
    let files = committed_results();
    assert!(!files.is_empty(), "no committed results found");
    for path in files {
        let file = read(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert_eq!(
            major(&file.schema_version),
            Some(MAJOR),
            "{}",
            path.display()
        );
    }
}

#[test]
fn write_read_write_is_identical() {
    for path in committed_results() {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = from_json(&text).unwrap();
        let first = to_pretty(&file);
        // Files this version's Rust writer wrote come back byte for byte. The
        // PyTorch twins' files are Python's JSON (`1e-08`, nulls written out)
        // of the same schema: they must read, and read the same once written.
        let ours = file.environment.framework == "candle";
        if ours && text.contains(&format!("\"schema_version\": \"{SCHEMA_VERSION}\"")) {
            assert_eq!(first, text, "{}", path.display());
        }
        let second = to_pretty(&from_json(&first).unwrap());
        assert_eq!(first, second, "{}", path.display());
    }
}

/// `UPDATE_SCHEMA=1 cargo test --lib schema` rewrites the committed schema.
#[test]
fn committed_json_schema_is_up_to_date() {
    let path = repo().join("schema/result.schema.json");
    let generated = json_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/result.schema.json is stale: run `just schema` and commit it"
    );
}

#[test]
fn committed_results_validate_against_the_json_schema() {
    let schema: Value = serde_json::from_str(&json_schema()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for path in committed_results() {
        // Upgraded to the current version first: the schema describes 2.x.
        let file = read(&path).unwrap();
        let value = serde_json::to_value(&file).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
}

#[test]
fn the_schema_states_how_non_finite_floats_are_written() {
    let schema = json_schema();
    assert!(schema.contains("infinity and NaN"), "the schema says how");
    assert!(schema.contains("\"-inf\""));
    let v: Vec<JsonF64> = vec![
        JsonF64(1.5),
        JsonF64(f64::INFINITY),
        JsonF64(f64::NEG_INFINITY),
    ];
    let json = serde_json::to_string(&v).unwrap();
    assert_eq!(json, r#"[1.5,"inf","-inf"]"#);
    assert_eq!(serde_json::from_str::<Vec<JsonF64>>(&json).unwrap(), v);
    let nan: JsonF64 = serde_json::from_str(r#""NaN""#).unwrap();
    assert!(nan.0.is_nan());
    assert!(serde_json::from_str::<JsonF64>(r#""huge""#).is_err());
}

fn minimal(version: &str) -> Value {
    let body = serde_json::json!({
        "size": 64, "warmup": 1, "iters": 3, "gpu_iters": null, "cpu_iters": null,
        "device": "cpu", "precisions": [], "cpu_fp32_ms": null, "gpu_speedup_fp32": null,
        "cpu_fp32": null, "flops_per_matmul": 524288.0
    });
    let mut file = serde_json::to_value(crate::experiment::result_file(
        crate::device::select(crate::device::DeviceArg::Cpu)
            .unwrap()
            .1,
        Body::Matmul(serde_json::from_value(body).unwrap()),
    ))
    .unwrap();
    file["schema_version"] = version.into();
    file
}

#[test]
fn a_new_file_round_trips_and_newer_minors_are_read() {
    let text = minimal(SCHEMA_VERSION).to_string();
    let file = from_json(&text).unwrap();
    assert_eq!(file.experiment, "matmul");
    assert!(matches!(file.body, Body::Matmul(ref m) if m.size == 64));
    let mut newer = minimal("2.99");
    newer["a_field_from_the_future"] = 1.into();
    assert!(from_json(&newer.to_string()).is_ok());
}

#[test]
fn unreadable_versions_are_refused_in_one_line() {
    for (version, expect) in [
        (
            Value::from("3.0"),
            "schema_version \"3.0\": this build reads 2.x",
        ),
        (Value::from(7), "schema_version 7"),
        (Value::from("two"), "schema_version \"two\""),
    ] {
        let mut v = minimal("2.0");
        v["schema_version"] = version;
        let err = format!("{:#}", from_json(&v.to_string()).unwrap_err());
        assert!(err.contains(expect), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let mut v = minimal("2.0");
    v.as_object_mut().unwrap().remove("schema_version");
    let err = from_json(&v.to_string()).unwrap_err().to_string();
    assert!(err.contains("not a candle-lab result file"), "{err}");
    assert!(from_json("{").unwrap_err().to_string().contains("not JSON"));
}

#[test]
fn inconsistent_files_are_refused() {
    let mut v = minimal("2.0");
    v["experiment"] = "basics".into();
    let err = from_json(&v.to_string()).unwrap_err().to_string();
    assert!(err.contains("body is \"matmul\""), "{err}");

    // A row that says "ok" but carries no measurements.
    let mut v = minimal("2.0");
    v["matmul"]["precisions"] = serde_json::json!([{
        "precision": "fp32", "dtype": "f32", "element_bytes": 4,
        "gemm_reduced_precision": false, "memory_source": "x",
        "status": "ok", "error": null
    }]);
    let err = from_json(&v.to_string()).unwrap_err().to_string();
    assert!(err.contains("row fp32"), "{err}");
}

#[test]
fn schema_1_files_are_upgraded() {
    // The first release's layout: integer version, Candle-only environment
    // names, cpu_vs_gpu's body at the top level.
    let mut v = minimal("2.0");
    let obj = v.as_object_mut().unwrap();
    obj.insert("schema_version".into(), 1.into());
    let env = obj["environment"].as_object_mut().unwrap();
    for (new, old) in [
        ("suite_version", "candle_lab_version"),
        ("framework_version", "candle_version"),
        ("compute_threads", "candle_cpu_threads"),
        ("build_features", "cargo_features"),
    ] {
        let x = env.remove(new).unwrap();
        env.insert(old.into(), x);
    }
    env.remove("framework");
    env.remove("cuda_build_version");
    let upgraded = from_json(&v.to_string()).unwrap();
    assert_eq!(upgraded.schema_version, SCHEMA_VERSION);
    assert_eq!(upgraded.environment.framework, "candle");
    assert!(matches!(upgraded.body, Body::Matmul(ref m) if m.size == 64));
    // Bodies at the top level (cpu_vs_gpu, basics, precision) moving under
    // their key: the schema-1 files in tests/fixtures/amd-epyc-2t cover that.
}

#[test]
fn a_skipped_section_says_why_and_has_no_rows() {
    assert!(section(SectionStatus::Skipped, Some("no GPU"), 0).is_ok());
    assert!(section(SectionStatus::Ok, None, 3).is_ok());
    assert!(section(SectionStatus::Skipped, None, 0).is_err());
    assert!(section(SectionStatus::Skipped, Some("no GPU"), 2).is_err());
    assert!(section(SectionStatus::Ok, Some("why?"), 0).is_err());
}

/// Every variant of the registry says both what it writes beside its JSON,
/// so that a new experiment cannot leave it to a default.
#[test]
fn every_experiment_declares_what_it_writes_beside_its_json() {
    for kind in Kind::all() {
        for prop in ["records", "chart"] {
            assert!(kind.get_bool(prop).is_some(), "{kind:?} declares no {prop}");
        }
    }
    assert_eq!(
        Kind::Sweep.writes(),
        Writes {
            records: true,
            chart: true
        }
    );
    assert_eq!(Kind::Basics.writes(), Writes::default());
}
