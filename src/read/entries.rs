//! What `compare` and `report` read from a result file: its timed rows as
//! [`Entry`] values, whatever file they came from. [`entries`] takes them from a
//! typed result file (the rows that ran, paired as each body says:
//! [`Body::timed_rows`]), [`reference_lab_entries`] from the reference lab's
//! JSON (medians only), so that the statistics never see a file layout.
//! [`unique`] is where rows are keyed: a file holding one key twice is refused
//! by every reader (the shared loader asks it of every result file).

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::schema::{self, Body, DeviceKind, ResultFile};

/// One timed result, whatever file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// "matmul", "cpu_vs_gpu".
    pub experiment: String,
    pub size: u64,
    /// "fp32", "fp16", "fp32 (lab kernels)"...
    pub precision: String,
    /// The plain precision a variant row stands for ("fp32" for "fp32 (lab
    /// kernels)"): it pairs with that row where the other file has none of
    /// its own variant (a PyTorch twin's file).
    pub stands_for: Option<String>,
    /// "cpu" or "cuda": keys a GPU run's CPU comparison apart from its GPU rows.
    pub device_kind: String,
    /// CPU model or GPU name.
    pub device_name: String,
    /// "candle 0.11.1", "pytorch 2.13.0+cu130".
    pub framework: String,
    pub median_ms: f64,
    /// Every timed wall-clock sample, when the file kept them.
    pub samples_ms: Option<Vec<f64>>,
    /// The row was measured on a contended machine (its `availability` says
    /// so); false where it was quiet or the file does not say.
    pub contended: bool,
}

impl Entry {
    /// "matmul 4096 fp32 cuda": the row, for a message.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {} {}",
            self.experiment, self.size, self.precision, self.device_kind
        )
    }

    /// What pairs it with the other file's row: experiment, size, precision
    /// and device kind.
    pub(crate) fn key(&self) -> (&str, u64, &str, &str) {
        (
            &self.experiment,
            self.size,
            &self.precision,
            &self.device_kind,
        )
    }

    /// The key of the plain row this one stands for, where it is a variant
    /// ("fp32 (lab kernels)" stands for "fp32").
    pub(crate) fn plain_key(&self) -> Option<(&str, u64, &str, &str)> {
        let plain = self.stands_for.as_deref()?;
        Some((&self.experiment, self.size, plain, &self.device_kind))
    }
}

/// Refuses rows of one key: the readers pair, gate and tabulate rows by
/// their key ([`Entry::key`]), so a second row of a key would go unseen (a
/// file listing each row twice, at two different times, would pass
/// `compare --fail-if-slower` on whichever copy came first).
pub fn unique(entries: &[Entry]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for e in entries {
        if !seen.insert(e.key()) {
            bail!(
                "two rows are {}: a result file holds each row once (refused: which one counts \
                 cannot be told)",
                e.describe()
            );
        }
    }
    Ok(())
}

/// The timed rows of a result file that ran, as entries.
pub fn entries(file: &ResultFile) -> Vec<Entry> {
    let env = &file.environment;
    // A debug build's times say little about the framework: the label says so.
    let debug = if env.profile.as_deref() == Some("debug") {
        " (debug build)"
    } else {
        ""
    };
    let framework = format!("{} {}{debug}", env.framework, env.framework_version);
    // A CPU named with its generation where the file records it: two VMs that
    // both say "AMD EPYC" are told apart.
    let cpu_name = match env.cpu.as_ref().and_then(|c| c.model_tag()) {
        Some(tag) => format!("{} ({tag})", env.cpu_model),
        None => env.cpu_model.clone(),
    };
    // Each pairing is the body's own (its name, size and clock); here it is
    // labelled with the file's machine and framework.
    let pairs = Body::timed_rows(&file.body)
        .into_iter()
        .flat_map(|r| r.pairs);
    pairs
        .map(|p| entry(file, p, &cpu_name, &framework))
        .collect()
}

/// The entry of one pairing of `file`'s rows.
fn entry(file: &ResultFile, p: schema::Pairing, cpu_name: &str, framework: &str) -> Entry {
    let kind = p.device.unwrap_or(file.device.kind);
    let device_name = match kind {
        DeviceKind::Cpu => cpu_name.to_string(),
        DeviceKind::Cuda => file.device.name.clone(),
    };
    // Per call: a sample of `calls_per_sample` calls over it (kernels' K-call
    // samples, as they are, the clock's cost in them; 1 elsewhere).
    let calls = p.calls_per_sample as f64;
    let samples: Vec<f64> = p.clock.samples_wall_ms.iter().map(|x| x / calls).collect();
    Entry {
        experiment: p.experiment,
        size: p.size,
        precision: p.precision,
        stands_for: p.stands_for,
        device_kind: kind.as_str().to_string(),
        device_name,
        framework: framework.to_string(),
        median_ms: p.clock.median_ms / calls,
        samples_ms: Some(samples).filter(|s| !s.is_empty()),
        contended: p.clock.availability.is_some_and(|a| a.contended),
    }
}

/// The reference lab's `week05-results-gb10.json`: no schema version, a
/// `hardware` object and a `matmul` object with medians only.
pub fn reference_lab_entries(file: &Value) -> Result<Vec<Entry>> {
    let hardware = |key: &str| file.pointer(&format!("/hardware/{key}"))?.as_str();
    let (Some(gpu), Some(torch)) = (hardware("device"), hardware("torch")) else {
        bail!("no schema_version, and not the reference lab's file: not a result compare reads");
    };
    let framework = format!("pytorch {torch}");
    let source = Source {
        experiment: "matmul",
        size: whole(file, "/matmul/size")?,
        framework: &framework,
    };
    let kind = text(file, "/matmul/device")?;
    let mut out = Vec::new();
    for (i, row) in list(file, "/matmul/precisions")?.iter().enumerate() {
        out.extend(source.entry(row, &format!("/matmul/precisions/{i}"), kind, gpu)?);
    }
    if file.pointer("/matmul/cpu_fp32_ms").is_some() {
        out.push(Entry {
            precision: "fp32".to_string(),
            stands_for: None,
            device_kind: "cpu".to_string(),
            device_name: format!("{gpu}'s CPU"),
            median_ms: number(file, "/matmul/cpu_fp32_ms")?,
            samples_ms: None,
            experiment: source.experiment.to_string(),
            size: source.size,
            framework: framework.clone(),
            contended: false,
        });
    }
    unique(&out)?;
    Ok(out)
}

/// What every entry of one file shares.
struct Source<'a> {
    experiment: &'a str,
    size: u64,
    framework: &'a str,
}

impl Source<'_> {
    /// The entry of one result row (found at `at`), `None` when it did not run.
    fn entry(&self, row: &Value, at: &str, kind: &str, device: &str) -> Result<Option<Entry>> {
        let read = || -> Result<Option<Entry>> {
            // The reference lab's rows have no status: all of them ran.
            if row.get("status").is_some_and(|s| s != "ok") {
                return Ok(None);
            }
            let median_ms = number(row, "/median_ms")?;
            let samples_ms = row
                .get("samples_wall_ms")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>())
                .filter(|s| !s.is_empty());
            Ok(Some(Entry {
                experiment: self.experiment.to_string(),
                size: self.size,
                precision: text(row, "/precision")?.to_string(),
                stands_for: None,
                device_kind: kind.to_string(),
                device_name: device.to_string(),
                framework: self.framework.to_string(),
                median_ms,
                samples_ms,
                contended: false,
            }))
        };
        read().with_context(|| at.to_string())
    }
}

fn text<'v>(v: &'v Value, pointer: &str) -> Result<&'v str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .with_context(|| format!("{pointer} is missing or not text"))
}

fn number(v: &Value, pointer: &str) -> Result<f64> {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .with_context(|| format!("{pointer} is missing or not a number"))
}

fn whole(v: &Value, pointer: &str) -> Result<u64> {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .with_context(|| format!("{pointer} is missing or not a whole number"))
}

fn list<'v>(v: &'v Value, pointer: &str) -> Result<&'v Vec<Value>> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .with_context(|| format!("{pointer} is missing or not a list"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A schema 2.0 file on an H200 whose CPU is an AMD EPYC.
    fn schema2(experiment: &str, body: Value) -> Value {
        let mut file = json!({
            "schema_version": "2.0",
            "experiment": experiment,
            "created_utc": "2026-11-30T06:00:00Z",
            "command": "test",
            "environment": {
                "framework": "candle", "framework_version": "0.11.1", "suite_version": "0.1.0",
                "git_commit": null, "os": "Debian", "arch": "x86_64", "cpu_model": "AMD EPYC",
                "cpu_threads_available": 2, "compute_threads": 2, "build_features": [],
                "target_features": [], "profile": "release", "cuda_build_version": null
            },
            "device": {"kind": "cuda", "label": "cuda:0", "name": "NVIDIA H200", "chosen_because": "test"},
        });
        file[experiment] = body;
        file
    }

    /// A row that ran, with three samples at `median` ms.
    fn row(precision: &str, median: f64) -> Value {
        let summary = serde_json::to_value(crate::stats::summarize(&[median; 3])).unwrap();
        json!({"precision": precision, "dtype": "f32", "element_bytes": 4,
               "gemm_reduced_precision": false, "memory_source": "test",
               "status": "ok", "error": null, "median_ms": median, "gflops": 1.0,
               "payload_mib": 1.0, "payload_bytes": 1048576, "wall_ms": summary,
               "samples_wall_ms": [median, median, median], "samples_gpu_ms": [],
               "accuracy": {"rows_checked": 1, "max_rel_err": 0.0, "mean_rel_err": 0.0}})
    }

    fn matmul_body(device: &str, precisions: Vec<Value>, cpu_fp32: Value) -> Value {
        json!({"size": 4096, "warmup": 5, "iters": 20, "device": device,
               "precisions": precisions, "cpu_fp32": cpu_fp32, "flops_per_matmul": 1.0})
    }

    fn entries_of(file: &Value) -> Result<Vec<Entry>> {
        Ok(entries(&schema::from_json(&file.to_string())?))
    }

    #[test]
    fn reads_schema2_matmul_and_cpu_vs_gpu() {
        let failed = json!({"precision": "fp64", "dtype": "f64", "element_bytes": 8,
                            "gemm_reduced_precision": false, "memory_source": "test",
                            "status": "error", "error": "out of memory"});
        let matmul = schema2(
            "matmul",
            matmul_body(
                "cuda",
                vec![row("fp32", 7.0), failed, row("bf16", 1.5)],
                row("fp32", 300.0),
            ),
        );
        let got = entries_of(&matmul).unwrap();
        let summary: Vec<_> = got
            .iter()
            .map(|e| {
                (
                    e.precision.as_str(),
                    e.device_kind.as_str(),
                    e.device_name.as_str(),
                    e.median_ms,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("fp32", "cuda", "NVIDIA H200", 7.0),
                ("bf16", "cuda", "NVIDIA H200", 1.5),
                ("fp32", "cpu", "AMD EPYC", 300.0)
            ]
        );
        assert_eq!(got[0].samples_ms, Some(vec![7.0; 3]));
        assert_eq!(
            (got[0].size, got[0].framework.as_str()),
            (4096, "candle 0.11.1")
        );

        let mut debug = matmul.clone();
        debug["environment"]["profile"] = json!("debug");
        assert_eq!(
            entries_of(&debug).unwrap()[0].framework,
            "candle 0.11.1 (debug build)"
        );

        let cvg = schema2(
            "cpu_vs_gpu",
            json!({"size": 64, "precision": "fp32", "cpu_threads": 2, "cpu_warmup": 1,
                   "cpu_iters": 3, "gpu_warmup": 1, "gpu_iters": 3,
                   "cpu": row("fp32", 2.0), "gpu": null}),
        );
        let got = entries_of(&cvg).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].experiment.as_str(), got[0].device_kind.as_str()),
            ("cpu_vs_gpu", "cpu")
        );
    }

    #[test]
    fn generate_gives_a_pp_and_a_tg_entry_per_row_named_with_its_model() {
        let text = include_str!("../../tests/fixtures/generate-candle-cpu.json");
        let mut file = schema::from_json(text).unwrap();
        let got: Vec<_> = entries(&file)
            .iter()
            .map(|e| {
                (
                    e.experiment.clone(),
                    e.size,
                    e.precision.clone(),
                    e.samples_ms.is_some(),
                )
            })
            .collect();
        let name = |what: &str| format!("generate {what} SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(
            got,
            [
                (name("pp"), 16, "fp32".to_string(), true),
                (name("tg"), 8, "fp32".to_string(), true)
            ]
        );
        // Random weights are named by their shape: they never pair with a file's rows.
        let Body::Generate(g) = &mut file.body else {
            panic!("not generate")
        };
        (g.model.file, g.model.shape) = (None, Some("tiny".into()));
        assert_eq!(entries(&file)[1].experiment, "generate tg tiny");
    }

    #[test]
    fn refuses_other_schema_versions_in_one_line() {
        let mut file = schema2("matmul", matmul_body("cuda", vec![], Value::Null));
        for version in [json!("3.0"), json!(7), json!("1.2")] {
            file["schema_version"] = version.clone();
            let err = format!("{:#}", entries_of(&file).unwrap_err());
            assert_eq!(
                err,
                format!("schema_version {version}: this build reads 2.x (and 1)")
            );
        }
        file["schema_version"] = json!("2.7");
        assert_eq!(entries_of(&file).unwrap(), []);
    }

    #[test]
    fn reads_the_reference_labs_file() {
        let text = include_str!("../../tests/fixtures/reference-lab-gb10/week05-results-gb10.json");
        let got = reference_lab_entries(&serde_json::from_str(text).unwrap()).unwrap();
        let summary: Vec<_> = got
            .iter()
            .map(|e| (e.precision.as_str(), e.device_kind.as_str(), e.median_ms))
            .collect();
        assert_eq!(
            summary,
            [
                ("fp32", "cuda", 7.44),
                ("fp16", "cuda", 1.548),
                ("bf16", "cuda", 1.576),
                ("fp32", "cpu", 168.281)
            ]
        );
        assert!(got.iter().all(|e| e.samples_ms.is_none() && e.size == 4096));
        assert_eq!(got[0].device_name, "NVIDIA GB10");
        assert_eq!(got[0].framework, "pytorch 2.13.0+cu130");
    }

    #[test]
    fn a_key_given_twice_is_refused_naming_it() {
        let text = include_str!("../../tests/fixtures/reference-lab-gb10/week05-results-gb10.json");
        let mut lab: Value = serde_json::from_str(text).unwrap();
        let rows = lab["matmul"]["precisions"].as_array_mut().unwrap();
        rows.push(rows[1].clone());
        let err = format!("{:#}", reference_lab_entries(&lab).unwrap_err());
        assert_eq!(
            err,
            "two rows are matmul 4096 fp16 cuda: a result file holds each row once (refused: \
             which one counts cannot be told)"
        );
        // The same precision on the CPU and the GPU are two keys.
        let file = schema2(
            "matmul",
            matmul_body("cuda", vec![row("fp32", 7.0)], row("fp32", 300.0)),
        );
        assert!(unique(&entries_of(&file).unwrap()).is_ok());
        let twice = schema2(
            "matmul",
            matmul_body(
                "cuda",
                vec![row("fp32", 7.0), row("fp32", 9.0)],
                Value::Null,
            ),
        );
        assert!(unique(&entries_of(&twice).unwrap()).is_err());
    }
}
