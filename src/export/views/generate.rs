//! The generate experiment shown: per precision the tokens/s of prompt
//! processing and generation beside generation's bandwidth bound and the
//! matmul roofline, the speedups over fp32 (matmuls alone, pp, tg), where a
//! generated token's time goes, each precision's answer, and the line that
//! answers the reference lab's caveat with a whole model; and its chart. The
//! terminal shows a compact table by default (`compact`), these under `--wide`.

use anyhow::Result;

mod compact;
mod tables;
pub mod verdicts;
mod vs_candle;
use tables::{parts_cells, parts_table, speed_cells, speed_table, vs_cells, vs_table};
pub use vs_candle::kernels_line;

use super::{num, Records, Shown};
use crate::export::panels::{panels_svg, Panel};
use crate::schema::{Answer, WeightSource};
use crate::schema::{
    DeviceKind, GenerateMeasured, GenerateResults, GenerateRow, ModelInfo, ModelPath, ResultFile,
    TokenOpClass,
};
use crate::stats::MIN_SAMPLES;

pub(super) fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

/// The model in a title: its name and file, or its shape and RANDOM WEIGHTS.
pub(super) fn what(m: &ModelInfo) -> String {
    match (&m.file, &m.shape) {
        (Some(f), _) => format!("{} ({f})", m.name),
        (_, Some(s)) => format!("{s}, RANDOM WEIGHTS"),
        _ => m.name.clone(),
    }
}

/// The chart beside the JSON: tokens/s per precision, prompt processing and
/// generation side by side (each on its own axis), every generation bar under
/// its bound (dashed: the copy bandwidth over the row's weight bytes per
/// token). Fails when no row was measured.
pub fn chart(file: &ResultFile, r: &GenerateResults) -> Result<String> {
    let models = r.models();
    let several = models.len() > 1;
    // Several models: each row named by its model too.
    let rows: Vec<(String, &GenerateRow)> = models
        .iter()
        .flat_map(|m| {
            m.rows.iter().map(move |row| match several {
                false => (row.precision.clone(), row),
                true => (format!("{}: {}", short(&m.model), row.precision), row),
            })
        })
        .collect();
    let categories: Vec<String> = rows.iter().map(|(name, _)| name.clone()).collect();
    let each = |f: fn(&GenerateMeasured) -> Option<f64>| -> Vec<Option<f64>> {
        rows.iter()
            .map(|(_, row)| row.measured.as_ref().and_then(f))
            .collect()
    };
    let panels = [
        Panel {
            title: format!("prompt processing (pp{})", r.pp_tokens),
            values: each(|m| Some(m.pp_tokens_per_s)),
            marks: Vec::new(),
            mark_label: String::new(),
        },
        Panel {
            title: format!("generation (tg{}), dashed: its bound", r.tg_tokens),
            values: each(|m| Some(m.tg_tokens_per_s)),
            marks: each(|m| m.tg_bound_tokens_per_s),
            mark_label: "bound".into(),
        },
    ];
    let names: Vec<String> = models.iter().map(|m| what(&m.model)).collect();
    let title = format!(
        "generate: {} on {} ({}, {} {})",
        names.join(" and "),
        file.device.label,
        file.device.name,
        file.environment.framework,
        file.environment.framework_version
    );
    panels_svg(&title, "tokens/s", &categories, &panels)
}

/// A model's short name in a chart's labels: its file's stem, or its shape.
fn short(m: &ModelInfo) -> String {
    let key = m.key();
    key.strip_suffix(".gguf").unwrap_or(key).to_string()
}

/// The generate tables and notes of every model the file holds, in turn (a
/// further model's notes named by it).
pub fn show(file: &ResultFile, r: &GenerateResults) -> Shown {
    let models = r.models();
    let mut all = Shown {
        tables: Vec::new(),
        notes: Vec::new(),
    };
    for m in &models {
        let one = show_one(file, m);
        all.tables.extend(one.tables);
        // Several models: each model's notes named by it.
        let several = models.len() > 1;
        all.notes
            .extend(one.notes.into_iter().map(|n| match several {
                false => n,
                true => format!("{}: {n}", short(&m.model)),
            }));
    }
    all
}

/// One model's tables and notes; a result without rows (`--prepare-only`)
/// is its notes alone.
fn show_one(file: &ResultFile, r: &GenerateResults) -> Shown {
    if r.rows.is_empty() {
        return Shown {
            tables: Vec::new(),
            notes: r.notes.clone(),
        };
    }
    let (mut speed, mut vs, mut parts) = (speed_table(file, r), vs_table(), parts_table());
    let mut notes: Vec<String> = first_note(r).into_iter().collect();
    notes.push(model_note(&r.model));
    for row in &r.rows {
        let p = &row.precision;
        let Some(x) = &row.measured else {
            let error = row.error.as_deref().unwrap_or("");
            speed.row([p.clone(), format!("error: {error}")]);
            continue;
        };
        speed.row(speed_cells(r, p, x));
        if let Some(v) = &x.vs_fp32 {
            vs.row(vs_cells(r, p, x, v));
        }
        // A peer that does not time the op classes (transformers) has no parts.
        if let Some(cells) = parts_cells(p, x) {
            parts.row(cells);
        }
        notes.extend(parts_past_the_token(p, x));
        notes.extend(pp_past_its_matmuls(p, x, r.iters));
        notes.push(answer_note(p, &x.answer));
    }
    notes.push(bound_note(r));
    notes.extend(verdicts::above_bounds(r));
    notes.extend(verdicts::contended_bounds(r));
    notes.extend(r.notes.iter().cloned());
    notes.extend(caveat(r));
    notes.extend(kernels_line(r, file.device.kind == DeviceKind::Cuda));
    Shown {
        tables: vec![speed, vs, parts],
        notes,
    }
}

/// A row whose parts, each timed alone, add up to more than a whole token (a
/// negative "outside the parts"): why that is not an error.
fn parts_past_the_token(p: &str, x: &GenerateMeasured) -> Option<String> {
    let past = -x.parts_remainder_ms?;
    // From 0.005 ms: what the note prints at two decimals is then not 0.00.
    (!x.parts_in_pass && past >= 0.005).then(|| {
        format!(
            "{p}: its parts, each timed alone, add up to {past:.2} ms more than a whole token: \
             alone, each class pays its own start (on a CPU the hand-off to the pool's threads, \
             on a GPU a launch and a wait), which inside a token overlaps with the work around it"
        )
    })
}

/// A row whose prompt pass took less time than its matmuls timed alone:
/// the pass holds those matmuls, so that is the two timings' noise, never a
/// gain (its "pp vs matmuls alone" then reads over 100%). Decided on the
/// times, not that share: the pass's FLOPs count attention too, which at a
/// long prompt lifts the share past 100% with no noise at all.
fn pp_past_its_matmuls(p: &str, x: &GenerateMeasured, runs: usize) -> Option<String> {
    let (pass, alone) = (x.pp.rate_ms().0, x.matmuls_pp.rate_ms().0);
    (pass < alone).then(|| {
        format!(
            "{p}: its prompt pass took {pass:.2} ms, its matmuls timed alone {alone:.2} ms \
             (pp at {:.0}% of them): the pass holds those matmuls, so their own timing ran \
             slower than inside it (a median of {runs} runs, at another moment): noise between \
             the two, not a gain",
            x.pp_vs_matmuls_alone_pct
        )
    })
}

/// A row's answer: its text, or its first token ids, and where it parts
/// from fp32's.
fn answer_note(p: &str, a: &Answer) -> String {
    let differs = match a.differs_from_fp32_at {
        Some(i) => format!(" [parts from fp32's at token {i}]"),
        None => String::new(),
    };
    match &a.text {
        Some(t) => format!("{p} answer{differs}: {t:?}"),
        None => format!(
            "{p} tokens{differs}: {:?}",
            &a.token_ids[..a.token_ids.len().min(16)]
        ),
    }
}

/// What the model is: its architecture, layers, and tensors by stored type.
fn model_note(m: &ModelInfo) -> String {
    let types: Vec<String> = m
        .stored
        .iter()
        .map(|t| format!("{} {}", t.tensors, t.ggml_type))
        .collect();
    let quantization = m
        .quantization
        .as_deref()
        .map_or(String::new(), |q| format!("{q}: "));
    format!(
        "model: {}, {} layers, {:.0}M parameters; {quantization}{} tensors",
        m.architecture,
        m.layers,
        m.params as f64 / 1e6,
        types.join(", ")
    )
}

/// The first note: random weights say so; a real model's prompt.
fn first_note(r: &GenerateResults) -> Option<String> {
    let m = &r.model;
    if m.source == WeightSource::Random {
        // The name says "random weights at the shape of ..." itself.
        let shape = m.name.strip_prefix(crate::schema::RANDOM_NAME_PREFIX);
        Some(format!(
            "RANDOM WEIGHTS (seed {}) at the shape of {}: speed and memory only; its tokens \
             are ids, not text, and say nothing about a model's quality",
            r.seed,
            shape.unwrap_or(&m.name)
        ))
    } else {
        let u = r.prompt.user.as_ref()?;
        let template = r.prompt.template.as_deref().unwrap_or("the chat template");
        Some(format!(
            "prompt: {u:?} ({} tokens, formatted with {template})",
            r.prompt.token_ids.len()
        ))
    }
}

/// What the bounds are and how pp and tg were run; the host floor's unit
/// where the run measured it.
fn bound_note(r: &GenerateResults) -> String {
    let floor = r.op_cost.as_ref().map_or(String::new(), |c| {
        format!(
            "; host floor: a token's ops x one op's cost, {:.2} us here (a queued one-element \
             add, {} a sample, as `overhead` times it), named as what binds a row where it is \
             over the time the weights take at the bound",
            c.per_call_us, c.calls_per_sample
        )
    });
    bound_text(r) + &floor
}

/// [`bound_note`]'s bounds and runs.
fn bound_text(r: &GenerateResults) -> String {
    match &r.ladder {
        Some(_) => format!(
            "tg bound: the bandwidth ladder's read at the weights' own footprint, with up to the \
             pool's threads (the level they live in: an LLC bound where they fit in the last \
             cache; \"past-L3 cache\" where a footprint over twice the last cache read over {}x \
             memory's footprint, and again measured in turn with it: a cache the system does \
             not report), over the weight bytes a \
             token reads; DRAM bound: the same past the caches, \
             at memory's footprint or more ({}; in parentheses where the weights live in a \
             cache: what the bytes would take from memory, not a bound on the row); roofline: min(the compute peak at the row's \
             precision in this run (a quantized row's: its own product), pp's FLOPs over its \
             weights' bytes x the tg bound's bandwidth); pp and tg as llama-bench runs \
             them (from an empty cache), median of {} runs after {} warm-up{}",
            crate::schema::UNREPORTED_CACHE_RATIO,
            opt(r.copy_gb_per_s, |v| format!("{v:.1} GB/s")),
            r.iters,
            r.warmup,
            if r.iters < MIN_SAMPLES {
                format!("; under {MIN_SAMPLES} runs a ratio shows its direction only")
            } else {
                String::new()
            }
        ),
        None => format!(
            "tg bound: copy bandwidth measured here ({}) over the weight bytes a token reads; pp \
             and tg as llama-bench runs them (from an empty cache), median of {} runs after {} \
             warm-up",
            opt(r.copy_gb_per_s, |v| format!("{v:.1} GB/s")),
            r.iters,
            r.warmup
        ),
    }
}

/// The reference lab's caveat answered with a whole model: per row, the
/// matmuls' speedup over fp32 beside prompt processing's and generation's.
pub fn caveat(r: &GenerateResults) -> Vec<String> {
    r.rows
        .iter()
        .filter_map(|row| {
            let v = row.measured.as_ref()?.vs_fp32.as_ref()?;
            let against = v.against.as_deref().unwrap_or("fp32");
            // An fp32 row against itself, or fp32 with the suite's kernels
            // against fp32 with candle's (the kernels line says that one).
            (row.path == ModelPath::Quantized || !row.precision.starts_with("fp32")).then(|| {
                format!(
                    "{} against {against}, whole model: matmuls alone {:.2}x (pp shapes), \
                     prompt processing {:.2}x, generation {:.2}x",
                    row.precision, v.matmuls_pp, v.pp, v.tg
                )
            })
        })
        .collect()
}

/// One record per precision: machine, experiment, precision, path, status,
/// pp and tg tokens/s, the bound and its fraction, time to first token, the
/// rates beside the matmul roofline, bytes, speedups, and each op class's ms
/// per token (`part_matmuls_ms`, ...).
pub fn records(machine: &str, r: &GenerateResults) -> Records {
    let mut all = records_one(machine, r);
    for m in r.more_models.iter().flat_map(|m| m.models()) {
        all.rows.extend(records_one(machine, m).rows);
    }
    all
}

/// One model's records.
fn records_one(machine: &str, r: &GenerateResults) -> Records {
    let mut header: Vec<String> = [
        "machine",
        "experiment",
        "model",
        "precision",
        "path",
        "kernels",
        "status",
        "pp_tokens",
        "tg_tokens",
        "pp_tokens_per_s",
        "tg_tokens_per_s",
        "tg_bound_tokens_per_s",
        "tg_pct_of_bound",
        "ttft_ms",
        "pp_gflop_per_s",
        "matmuls_pp_gflop_per_s",
        "weight_bytes",
        "weight_bytes_per_token",
        "peak_bytes",
        "matmuls_pp_vs_fp32",
        "pp_vs_fp32",
        "tg_vs_fp32",
    ]
    .map(String::from)
    .to_vec();
    header.extend(
        TokenOpClass::ALL
            .iter()
            .map(|c| format!("part_{}_ms", c.name().replace('-', ""))),
    );
    // The file (or random weights' shape): two files of one model apart.
    let model = r.model.key().to_string();
    let rows = r
        .rows
        .iter()
        .map(|row| {
            let m = row.measured.as_ref();
            let vs = m.and_then(|m| m.vs_fp32.as_ref());
            let mut cells = vec![
                machine.to_string(),
                "generate".into(),
                model.clone(),
                row.precision.clone(),
                format!("{:?}", row.path).to_lowercase(),
                row.kernels.name().to_string(),
                if m.is_some() { "ok" } else { "error" }.into(),
                r.pp_tokens.to_string(),
                r.tg_tokens.to_string(),
                num(m.map(|m| m.pp_tokens_per_s)),
                num(m.map(|m| m.tg_tokens_per_s)),
                num(m.and_then(|m| m.tg_bound_tokens_per_s)),
                num(m.and_then(|m| m.tg_pct_of_bound)),
                num(m.map(|m| m.ttft.median_ms)),
                num(m.map(|m| m.pp_gflop_per_s)),
                num(m.map(|m| m.matmuls_pp_gflop_per_s)),
                num(m.map(|m| m.weight_bytes as f64)),
                num(m.map(|m| m.weight_bytes_per_token as f64)),
                num(m.and_then(|m| m.peak_bytes.map(|b| b as f64))),
                num(vs.map(|v| v.matmuls_pp)),
                num(vs.map(|v| v.pp)),
                num(vs.map(|v| v.tg)),
            ];
            for class in TokenOpClass::ALL {
                let part = m.and_then(|m| m.parts.iter().find(|x| x.class == class));
                cells.push(num(part.map(|x| x.ms_per_token)));
            }
            cells
        })
        .collect();
    Records { header, rows }
}

/// generate's view.
impl super::View for GenerateResults {
    fn show(&self, file: &ResultFile) -> Shown {
        show(file, self)
    }

    fn compact(&self, file: &ResultFile) -> Shown {
        compact::compact(file, self)
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        // None when no row was measured.
        chart(file, self).ok()
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        // The files it ran, or the random weights' shape.
        let models: Vec<String> = self
            .models()
            .iter()
            .map(|r| {
                let m = &r.model;
                match m.source {
                    crate::schema::WeightSource::File => {
                        format!("{} ({})", m.name, m.file.as_deref().unwrap_or(""))
                    }
                    crate::schema::WeightSource::Random => format!(
                        "{}{} (no text)",
                        crate::schema::RANDOM_NAME_PREFIX,
                        m.shape.as_deref().unwrap_or("")
                    ),
                }
            })
            .collect();
        super::Section::Own(super::Own {
            heading: Some(models.join(" and ")),
            ..super::Own::new(
                "A whole model per precision (docs/generate.md): prompt processing (pp) \
                 and generation (tg) tokens/s as llama-bench measures them, generation against \
                 the bandwidth ladder's bound for reading every weight once per token, the \
                 ratios to fp32 measured side by side, and where a token's time goes.",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Body, KernelChoice, TokenPart, LAB_SUFFIX};
    use serde_json::{json, Value};

    /// A measured row at these tokens/s and tg bound, three samples each.
    fn measured(pp: f64, tg: f64, bound: f64) -> Value {
        let t = |ms: f64| serde_json::to_value(crate::telemetry::timed_at(&[ms; 3], &[])).unwrap();
        json!({
            "answer": {"token_ids": [1, 2], "text": "hi", "differs_from_fp32_at": null,
                       "stopped_at_eos": false},
            "ttft": t(10.0), "pp": t(64e3 / pp), "pp_tokens_per_s": pp,
            "pp_tokens_per_s_min": pp, "pp_tokens_per_s_max": pp,
            "tg": t(32e3 / tg), "tg_tokens_per_s": tg, "tg_tokens_per_s_min": tg,
            "tg_tokens_per_s_max": tg, "weight_bytes": 1000, "weight_bytes_per_token": 1000,
            "tg_bound_tokens_per_s": bound, "tg_pct_of_bound": 100.0 * tg / bound,
            "pp_flops": 1.0, "pp_gflop_per_s": 1.0, "matmuls_pp": t(1.0),
            "matmuls_pp_gflop_per_s": 2.0, "pp_pct_of_matmul_roofline": 50.0,
            "matmuls_tg": t(1.0), "peak_bytes": null, "parts": [], "parts_sum_ms": null,
            "held_back_by": null, "vs_fp32": null
        })
    }

    /// A CPU run of a file: q4_1 and fp32 measured, bf16 failed.
    pub(super) fn file() -> ResultFile {
        let row = |p: &str, path: &str, m: Value| {
            let ok = !m.is_null();
            json!({"precision": p, "path": path, "status": if ok { "ok" } else { "error" },
                   "error": if ok { Value::Null } else { json!("out of memory") }, "measured": m})
        };
        let body = json!({
            "model": {"source": "file", "file": "m.gguf", "file_bytes": 1, "shape": null,
                      "name": "Tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
                      "head_dim": 16, "mlp": 128, "vocab": 258, "context": 64,
                      "rope_theta": 1e4, "rms_eps": 1e-5, "tied_embeddings": true,
                      "params": 100, "stored": [], "rotary_layout": "x"},
            "prompt": {"user": "hi", "formatted": "hi", "token_ids": [1]},
            "pp_tokens": 64, "tg_tokens": 32, "warmup": 1, "iters": 3, "seed": 42,
            "copy_gb_per_s": 10.0, "copy_bytes": 1,
            "rows": [row("q4_1 (stored)", "quantized", measured(55.0, 21.3, 104.4)),
                     row("fp32", "float", measured(12.5, 3.5, 18.7)),
                     row("bf16", "float", Value::Null)],
            "notes": []
        });
        let file = json!({
            "schema_version": "2.3", "experiment": "generate",
            "created_utc": "2026-01-01T00:00:00Z", "command": "test",
            "environment": {
                "framework": "candle", "framework_version": "0.11.1", "suite_version": "0.1.0",
                "git_commit": null, "os": "Linux", "arch": "x86_64", "cpu_model": "Xeon",
                "cpu_threads_available": 2, "compute_threads": 2, "build_features": [],
                "target_features": [], "profile": "release", "cuda_build_version": null
            },
            "device": {"kind": "cpu", "label": "cpu", "ordinal": null, "name": "Xeon",
                       "chosen_because": "test", "compute_capability": null, "sm_count": null,
                       "total_memory_bytes": null, "free_memory_bytes_at_start": null,
                       "driver_cuda_version": null, "memory_pool": null},
            "generate": body
        });
        crate::schema::from_json(&file.to_string()).unwrap()
    }

    #[test]
    fn the_chart_has_pp_and_tg_per_precision_and_each_tg_bound() {
        let f = file();
        let Body::Generate(r) = &f.body else {
            panic!("not generate")
        };
        let svg = chart(&f, r).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for want in [
            "generate: Tiny (m.gguf) on cpu (Xeon, candle 0.11.1)",
            "prompt processing (pp64)",
            "generation (tg32), dashed: its bound",
            "tokens/s",
            "q4_1 (stored)",
            "fp32",
            "bf16",
            // The bars' values, and each row's bound beside its tg bar.
            "55.0",
            "12.5",
            "21.3",
            "3.50",
            "bound 104",
            "bound 18.7",
        ] {
            assert!(svg.contains(want), "no {want:?} in the chart");
        }
        // The failed row has no bar in either panel, nor a bound.
        assert_eq!(svg.matches("\nn/a\n").count(), 2, "{svg}");
        assert_eq!(svg.matches("bound ").count(), 2, "a mark per measured row");
    }

    #[test]
    fn parts_timed_alone_that_sum_past_the_token_are_explained() {
        let f = file();
        let Body::Generate(r) = &f.body else {
            panic!("not generate")
        };
        let mut x = r.rows[0].measured.clone().unwrap();
        x.parts_remainder_ms = Some(-0.43);
        let said = parts_past_the_token("q4_1", &x).unwrap();
        assert!(said.contains("0.43 ms more than a whole token"), "{said}");
        x.parts_in_pass = true; // spans: a remainder is the spans' own
        assert_eq!(parts_past_the_token("q4_1", &x), None);
        x.parts_in_pass = false;
        x.parts_remainder_ms = Some(0.2);
        assert_eq!(parts_past_the_token("q4_1", &x), None);
    }

    #[test]
    fn parts_whose_spans_cost_over_a_tenth_of_the_token_show_times_not_shares() {
        let f = file();
        let Body::Generate(r) = &f.body else {
            panic!("not generate")
        };
        let mut x = r.rows[0].measured.clone().unwrap();
        let part = |class, ms: f64| TokenPart {
            class,
            calls: 30,
            ms_per_token: ms,
            timed: crate::telemetry::timed_at(&[ms; 3], &[]),
        };
        x.parts = vec![
            part(crate::schema::TokenOpClass::Matmuls, 5.0),
            part(crate::schema::TokenOpClass::Attention, 2.0),
        ];
        (x.parts_in_pass, x.parts_sum_ms, x.parts_remainder_ms) = (true, Some(7.0), Some(0.57));
        // The H200's first run: 7.57 ms spanned, 3.79 clean.
        x.parts_overhead_ms = Some(3.78);
        let cells = tables::parts_cells("fp32", &x).unwrap();
        assert_eq!(&cells[1..3], ["5.00", "2.00"]);
        assert!(cells.iter().all(|c| !c.ends_with("%)")), "{cells:?}");
        assert!(cells.iter().any(|c| c.contains("no shares")), "{cells:?}");
        // Spans of 4% of the token: shares.
        x.parts_overhead_ms = Some(0.3);
        let cells = tables::parts_cells("fp32", &x).unwrap();
        assert_eq!(cells[1], "5.00 (66%)");
        assert!(
            cells.iter().any(|c| c == "in the pass (spans +0.30 ms)"),
            "{cells:?}"
        );
    }

    #[test]
    fn a_pass_faster_than_its_matmuls_alone_is_called_noise() {
        let f = file();
        let Body::Generate(r) = &f.body else {
            panic!("not generate")
        };
        let mut x = r.rows[0].measured.clone().unwrap();
        let t = |ms: f64| crate::telemetry::timed_at(&[ms; 3], &[]);
        (x.pp, x.matmuls_pp, x.pp_vs_matmuls_alone_pct) = (t(10.0), t(11.8), 118.4);
        let said = pp_past_its_matmuls("fp32", &x, 2).unwrap();
        assert!(
            said.starts_with("fp32: its prompt pass took 10.00 ms, its matmuls timed alone 11.80"),
            "{said}"
        );
        assert!(
            said.contains("(pp at 118% of them)") && said.contains("median of 2 runs"),
            "{said}"
        );
        // A pass slower than its matmuls is what it should be, whatever the
        // share says (attention's FLOPs count in the pass's).
        x.matmuls_pp = t(9.0);
        assert_eq!(pp_past_its_matmuls("fp32", &x, 2), None);
    }

    #[test]
    fn rows_without_op_classes_have_no_parts_row() {
        let f = file();
        let Body::Generate(r) = &f.body else {
            panic!("not generate")
        };
        let shown = show(&f, r);
        // The speed table has every row; the parts table none (no row timed its classes).
        let (speed, parts) = (shown.tables[0].markdown(), shown.tables[2].markdown());
        let rows = |t: &str, p: &str| {
            t.lines()
                .filter(|l| l.starts_with(&format!("| {p} ")))
                .count()
        };
        for p in ["q4_1 (stored)", "fp32", "bf16"] {
            assert_eq!((rows(&speed, p), rows(&parts, p)), (1, 0), "{speed}{parts}");
        }
    }

    #[test]
    fn the_kernels_line_pairs_each_lab_row_with_its_precision() {
        let mut f = file();
        let Body::Generate(r) = &mut f.body else {
            panic!("not generate")
        };
        assert_eq!(kernels_line(r, false), None, "no lab row, no line");
        // fp32 again on the suite's kernels, its pp and tg times halved and
        // doubled (the fixture's Timed are 3 samples of one value).
        let mut lab = r.rows[1].clone();
        lab.precision = format!("fp32{LAB_SUFFIX}");
        lab.kernels = KernelChoice::Lab;
        let m = lab.measured.as_mut().unwrap();
        let t = |ms: f64| crate::telemetry::timed_at(&[ms; 3], &[]);
        m.pp = t(m.pp.median_ms / 2.0);
        m.tg = t(m.tg.median_ms * 2.0);
        r.rows.push(lab);
        let line = kernels_line(r, false).unwrap();
        // Three samples of one value a side: intervals of zero width.
        assert!(
            line.ends_with(": fp32 pp 0.50x [0.50, 0.50], tg 2.00x [2.00, 2.00]"),
            "{line}"
        );
        // The lab's caveat stays per precision: the lab row is not one.
        assert!(caveat(r).iter().all(|l| !l.contains("lab kernels")));
        // A tg gain past what the kernels replace is flagged; on the CPU the
        // lab's rotary embedding is among what they replace, on a GPU not.
        let last = r.rows.len() - 1;
        let m = r.rows[last].measured.as_mut().unwrap();
        m.tg = crate::telemetry::timed_at(&[1e-6; 3], &[]);
        let part = |class, ms_per_token| TokenPart {
            class,
            calls: 60,
            ms_per_token,
            timed: crate::telemetry::timed_at(&[0.01; 3], &[]),
        };
        let candle = r.rows[1].measured.as_mut().unwrap();
        candle.parts = vec![
            part(TokenOpClass::Matmuls, 1.0),
            part(TokenOpClass::Rotary, 0.5),
            part(TokenOpClass::Sampling, 0.25),
        ];
        let replaced = |on_gpu| -> f64 {
            let line = kernels_line(r, on_gpu).unwrap();
            let (_, rest) = line.split_once("more than the ").expect("flagged");
            rest.split(' ').next().unwrap().parse().unwrap()
        };
        assert_eq!((replaced(false), replaced(true)), (1.5, 1.0));
    }

    #[test]
    fn the_kernels_line_says_what_a_quantized_ratio_is_against() {
        let mut f = file();
        let Body::Generate(r) = &mut f.body else {
            panic!("not generate")
        };
        // q4_1 again on the suite's kernels, twice as fast at pp and tg.
        let mut lab = r.rows[0].clone();
        lab.precision = format!("q4_1 (stored){LAB_SUFFIX}");
        lab.kernels = KernelChoice::Lab;
        let m = lab.measured.as_mut().unwrap();
        let t = |ms: f64| crate::telemetry::timed_at(&[ms; 3], &[]);
        (m.pp, m.tg) = (t(m.pp.median_ms / 2.0), t(m.tg.median_ms / 2.0));
        r.rows.push(lab);
        let line = kernels_line(r, false).unwrap();
        assert!(
            line.contains(
                ": q4_1 (stored) pp 0.50x [0.50, 0.50], tg 0.50x [0.50, 0.50], against \
                 Candle's scalar Q4_1 product. Candle's Q4_1, Q5_0 and Q5_1 CPU dot products \
                 are scalar"
            ),
            "{line}"
        );
        assert!(line.ends_with(verdicts::CANDLE_BASELINES), "{line}");
        // On a GPU Candle's products are its CUDA kernels: no such words.
        let gpu = kernels_line(r, true).unwrap();
        assert!(gpu.ends_with("tg 0.50x [0.50, 0.50]"), "{gpu}");
    }
}
