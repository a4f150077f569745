//! The scaling experiment shown: per axis (context depth, prompt length,
//! batch) a compact table of every row's points against their bounds, the
//! batch's ridge (predicted and measured) under them, the KV cache's bytes
//! and how many sequences fit; one chart of three panels (tokens/s against
//! depth, prompt length and batch, log axes, each point's bound dashed, the
//! batch's memory line and compute ceiling and their crossing); and one CSV
//! record per point.

mod tables;
use tables::{axis_table, capacity_table, fixed, kv_table, parts_table, step_notes};

use super::generate::what;
use super::{num, Records, Shown};
use crate::export::log_panels::{log_panels_svg, Key, LogPanel, Mark, Stroke, Swatch, Trace};
use crate::schema::{
    Axis, ResultFile, ScalingMeasured, ScalingPoint, ScalingResults, ScalingRow, Test,
    WeightSource, BEATEN_PCT, RANDOM_NAME_PREFIX,
};
use crate::units::{mib, size};

/// The axes in the order the tables and the chart's panels take them.
const AXES: [Axis; 3] = [Axis::Depth, Axis::Prompt, Axis::Batch];

/// The rows that were measured, each with its own colour in the chart.
fn measured(r: &ScalingResults) -> Vec<(&ScalingRow, &ScalingMeasured)> {
    r.rows
        .iter()
        .filter_map(|row| Some((row, row.measured.as_ref()?)))
        .collect()
}

/// What the run timed and what each point is held against.
fn run_note(r: &ScalingResults) -> String {
    format!(
        "scaling of {}: tg{} per sequence; pp at each depth, and each batch sequence's prompt, \
         {} tokens; median of {} runs after {} warm-up. Each point's bound is the lower of \
         memory (the bytes a step reads, the weights once and the KV cache it attends to, at \
         the bandwidth ladder's read of that footprint) and compute (the row's measured peak \
         over the step's FLOPs)",
        what(&r.model),
        r.tg_tokens,
        r.batch_prompt_tokens,
        r.iters,
        r.warmup
    )
}

/// A row's weights, KV cache and compute ceiling.
fn row_note(p: &str, m: &ScalingMeasured) -> String {
    format!(
        "{p}: weights {:.1} MiB ({:.1} MiB read a step); KV cache in {}, {} a token; compute \
         ceiling {} GFLOP/s ({})",
        mib(m.weight_bytes),
        mib(m.weight_bytes_per_token),
        m.kv_precision,
        size(m.kv_bytes_per_token),
        fixed(m.compute_peak_gflop_per_s, 1),
        m.compute_peak_of
    )
}

/// A row's ridge in one line: where its memory line meets its compute
/// ceiling, beside where its measured rate turns, from its batch-1 point.
fn ridge_note(p: &str, m: &ScalingMeasured) -> Option<String> {
    let ridge = m.ridge.as_ref()?;
    let one = m
        .points
        .iter()
        .find(|q| q.axis == Axis::Batch && q.batch == 1);
    let (why, of_one) = match one {
        Some(q) => (
            format!(
                " (compute bound {} / memory bound {} at batch 1)",
                fixed(q.compute_bound_tokens_per_s, 0),
                fixed(q.memory_bound_tokens_per_s, 0)
            ),
            format!(" / batch 1's {}", fixed(q.tokens_per_s, 0)),
        ),
        None => (String::new(), String::new()),
    };
    Some(format!(
        "{p}: predicted ridge B* = {}{why}; measured knee {} (best {} tok/s at batch {}{of_one}); \
         best = {}% of the compute bound",
        fixed(ridge.predicted_batch, 1),
        fixed(ridge.measured_knee_batch, 1),
        fixed(ridge.best_tokens_per_s, 0),
        ridge.best_batch,
        fixed(ridge.best_pct_of_compute, 0)
    ))
}

/// A row's checks that failed: a batch's tokens that are not the ones each
/// sequence gives alone, a deep cache's token that is not a fresh pass's.
fn check_warnings(p: &str, m: &ScalingMeasured) -> Vec<String> {
    let mut out = Vec::new();
    if m.batch_matches_alone == Some(false) {
        out.push(format!(
            "warning: {p}: a sequence of the largest batch did not give the greedy tokens it \
             gives decoded alone: the batched path is wrong, or its rounding differs enough to \
             flip a choice; check it before trusting the batch points"
        ));
    }
    if m.depth_matches_scratch == Some(false) {
        out.push(format!(
            "warning: {p}: the token after the deepest cache is not the one a pass over the \
             whole context from scratch gives: the cache at depth is wrong, or its rounding \
             differs enough to flip a choice; check it before trusting the depth points"
        ));
    }
    // The points its model could not run, each with why.
    out.extend(m.notes.iter().map(|n| format!("{p}: {n}")));
    out
}

/// The points above [`BEATEN_PCT`] of their bound, in one warning.
fn above_bound(r: &ScalingResults) -> Option<String> {
    let above: Vec<String> = measured(r)
        .iter()
        .flat_map(|(row, m)| {
            m.points
                .iter()
                .filter(|q| q.pct_of_bound > BEATEN_PCT)
                .map(|q| format!("{} {} at {:.0}%", row.precision, q.name(), q.pct_of_bound))
        })
        .collect();
    (!above.is_empty()).then(|| {
        format!(
            "warning: above its bound (over {BEATEN_PCT:.0}%: a bound that is beaten is the \
             wrong bound, its bandwidth level, footprint or compute peak, not a record): {}",
            above.join(", ")
        )
    })
}

/// Every note: what ran, each row's ceilings and ridge, the warnings, the
/// rows that failed, then the file's own.
fn notes(r: &ScalingResults) -> Vec<String> {
    let mut out = vec![run_note(r)];
    for (row, m) in measured(r) {
        out.push(row_note(&row.precision, m));
        out.extend(ridge_note(&row.precision, m));
        out.extend(step_notes(&row.precision, m));
    }
    if r.device_memory_bytes.is_none() {
        out.push("no capacity: the device's memory could not be read".into());
    }
    for (row, m) in measured(r) {
        out.extend(check_warnings(&row.precision, m));
    }
    out.extend(above_bound(r));
    for row in r.rows.iter().filter(|row| row.measured.is_none()) {
        let error = row.error.as_deref().unwrap_or("no measurement");
        out.push(format!("{}: error: {error}", row.precision));
    }
    out.extend(r.notes.iter().cloned());
    out
}

/// The point's place on its axis: its depth, prompt length or batch.
fn x_of(axis: Axis, p: &ScalingPoint) -> f64 {
    let x = match axis {
        Axis::Depth => p.depth,
        Axis::Prompt => p.pp_tokens,
        Axis::Batch => p.batch,
    };
    x as f64
}

/// A row's points of one test on `axis`, in the axis' order.
fn on_axis(m: &ScalingMeasured, axis: Axis, test: Test) -> Vec<&ScalingPoint> {
    let mut q: Vec<&ScalingPoint> = m
        .points
        .iter()
        .filter(|p| p.axis == axis && p.test == test)
        .collect();
    q.sort_by(|a, b| x_of(axis, a).total_cmp(&x_of(axis, b)));
    q
}

/// A test as a line's end label: "tg32", "pp512".
fn test_label(p: &ScalingPoint) -> String {
    match p.test {
        Test::Pp => format!("pp{}", p.pp_tokens),
        Test::Tg => format!("tg{}", p.tokens / p.batch.max(1)),
    }
}

/// The chart's panels: per axis its caption and its x axis' words.
const PANELS: [(Axis, &str, &str); 3] = [
    (
        Axis::Depth,
        "generation and prompt at context depth",
        "tokens in the cache, d (log2; d = 0 set a doubling left)",
    ),
    (
        Axis::Prompt,
        "prompt processing against prompt length",
        "prompt tokens (log2)",
    ),
    (
        Axis::Batch,
        "decode against batch, all sequences together",
        "sequences decoding together, B (log2)",
    ),
];

/// One panel: per row and test its measured line and its bound dashed, on
/// the batch axis its memory line and compute ceiling too, and its ridge.
fn panel(r: &ScalingResults, (axis, title, x_desc): (Axis, &str, &str)) -> LogPanel {
    let rows = measured(r);
    let tests: Vec<Test> = [Test::Tg, Test::Pp]
        .into_iter()
        .filter(|&t| rows.iter().any(|(_, m)| !on_axis(m, axis, t).is_empty()))
        .collect();
    let mut traces = Vec::new();
    let mut marks = Vec::new();
    for (i, (_, m)) in rows.iter().enumerate() {
        for &test in &tests {
            let q = on_axis(m, axis, test);
            let line = |stroke, f: fn(&ScalingPoint) -> f64| Trace {
                colour: i,
                stroke,
                points: q.iter().map(|p| (x_of(axis, p), f(p))).collect(),
                end_label: None,
            };
            traces.push(Trace {
                end_label: (tests.len() > 1)
                    .then(|| q.first().map(|p| test_label(p)))
                    .flatten(),
                ..line(Stroke::Measured, |p| p.tokens_per_s)
            });
            traces.push(line(Stroke::Bound, |p| p.bound_tokens_per_s));
            if axis == Axis::Batch {
                traces.push(line(Stroke::Guide, |p| p.memory_bound_tokens_per_s));
                traces.push(line(Stroke::Ceiling, |p| p.compute_bound_tokens_per_s));
            }
        }
        if let (Axis::Batch, Some(ridge)) = (axis, &m.ridge) {
            marks.push(Mark {
                x: ridge.predicted_batch,
                label: format!("B* = {}", fixed(ridge.predicted_batch, 1)),
                colour: i,
            });
        }
    }
    LogPanel {
        title: title.into(),
        x_desc: x_desc.into(),
        traces,
        marks,
    }
}

/// The legend: a colour per row, then what the dashes and the mark mean.
fn keys(r: &ScalingResults) -> Vec<Key> {
    let rows = measured(r);
    let key = |label: &str, swatch| Key {
        label: label.into(),
        colour: None,
        swatch,
    };
    let mut out: Vec<Key> = rows
        .iter()
        .enumerate()
        .map(|(i, (row, _))| Key {
            label: row.precision.clone(),
            colour: Some(i),
            swatch: Swatch::Line(Stroke::Measured),
        })
        .collect();
    out.push(key(
        "each point's bound (the lower of memory and compute)",
        Swatch::Line(Stroke::Bound),
    ));
    let batch = rows
        .iter()
        .any(|(_, m)| m.points.iter().any(|p| p.axis == Axis::Batch));
    if batch {
        out.push(key(
            "memory line (rises with B)",
            Swatch::Line(Stroke::Guide),
        ));
        out.push(key("compute ceiling", Swatch::Line(Stroke::Ceiling)));
    }
    if rows.iter().any(|(_, m)| m.ridge.is_some()) {
        out.push(key(
            "predicted ridge B*: where the two cross",
            Swatch::Vertical,
        ));
    }
    out
}

/// The chart beside the JSON: three panels (depth, prompt length, batch),
/// tokens/s on log axes with each point's bound dashed. `None` when no
/// point was measured.
pub fn chart(file: &ResultFile, r: &ScalingResults) -> Option<String> {
    let title = format!(
        "scaling: {} on {} ({}, {} {})",
        what(&r.model),
        file.device.label,
        file.device.name,
        file.environment.framework,
        file.environment.framework_version
    );
    let panels: Vec<LogPanel> = PANELS.into_iter().map(|p| panel(r, p)).collect();
    log_panels_svg(&title, "tokens/s (log10)", &panels, &keys(r)).ok()
}

/// One record per point in long format: the row, the point's place on its
/// axis, its rate with its spread, its bound and what binds it, and its
/// memory; a failed row is one record, its status "error".
pub fn records(machine: &str, r: &ScalingResults) -> Records {
    let header = [
        "machine",
        "experiment",
        "model",
        "precision",
        "kernels",
        "status",
        "axis",
        "test",
        "depth",
        "pp_tokens",
        "batch",
        "tokens",
        "median_ms",
        "tokens_per_s",
        "tokens_per_s_min",
        "tokens_per_s_max",
        "per_sequence_tokens_per_s",
        "bound_tokens_per_s",
        "bound_by",
        "pct_of_bound",
        "memory_bound_tokens_per_s",
        "compute_bound_tokens_per_s",
        "peak_bytes",
    ];
    let model = r.model.key().to_string();
    let mut rows = Vec::new();
    for row in &r.rows {
        let lead = [
            machine.to_string(),
            "scaling".into(),
            model.clone(),
            row.precision.clone(),
            row.kernels.name().to_string(),
        ];
        let Some(m) = &row.measured else {
            let mut cells = lead.to_vec();
            cells.push("error".into());
            cells.resize(header.len(), String::new());
            rows.push(cells);
            continue;
        };
        for p in &m.points {
            let mut cells = lead.to_vec();
            cells.extend(point_cells(p));
            rows.push(cells);
        }
    }
    Records::new(&header, rows)
}

/// A point's cells after its row's: status on.
fn point_cells(p: &ScalingPoint) -> Vec<String> {
    vec![
        "ok".into(),
        p.axis.name().into(),
        p.test.name().into(),
        p.depth.to_string(),
        p.pp_tokens.to_string(),
        p.batch.to_string(),
        p.tokens.to_string(),
        num(Some(p.timed.median_ms)),
        num(Some(p.tokens_per_s)),
        num(Some(p.tokens_per_s_min)),
        num(Some(p.tokens_per_s_max)),
        num(Some(p.per_sequence_tokens_per_s)),
        num(Some(p.bound_tokens_per_s)),
        p.bound_by.clone(),
        num(Some(p.pct_of_bound)),
        num(Some(p.memory_bound_tokens_per_s)),
        num(Some(p.compute_bound_tokens_per_s)),
        p.peak_bytes.map_or(String::new(), |b| b.to_string()),
    ]
}

impl super::View for ScalingResults {
    fn show(&self, _file: &ResultFile) -> Shown {
        let mut tables: Vec<_> = AXES
            .into_iter()
            .filter_map(|a| axis_table(self, a))
            .collect();
        tables.extend(parts_table(self));
        tables.extend(kv_table(self));
        tables.extend(capacity_table(self));
        Shown {
            tables,
            notes: notes(self),
        }
    }

    fn records(&self, machine: &str) -> Option<Records> {
        Some(records(machine, self))
    }

    fn chart(&self, file: &ResultFile) -> Option<String> {
        chart(file, self)
    }

    fn section(&self, _file: &ResultFile) -> super::Section {
        let m = &self.model;
        let heading = match m.source {
            WeightSource::File => format!("{} ({})", m.name, m.file.as_deref().unwrap_or("")),
            WeightSource::Random => format!(
                "{RANDOM_NAME_PREFIX}{} (no text)",
                m.shape.as_deref().unwrap_or("")
            ),
        };
        super::Section::Own(super::Own {
            heading: Some(heading),
            ..super::Own::new(
                "One model's cost as its work grows: generation against context depth, prompt \
                 processing against prompt length, and decode of B sequences at once against \
                 B. In each chart's panel a solid line is what was measured and the dashed line \
                 in its colour is each point's bound, the lower of memory (the bytes a step \
                 reads at the bandwidth ladder's rate) and compute (the row's measured peak); on \
                 the batch panel the memory line rises with B to the flat compute ceiling, and \
                 B* marks where they cross: the predicted ridge, where decode turns from \
                 memory-bound to compute-bound.",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::views::View;
    use crate::schema::{
        Body, Bound, Capacity, KernelChoice, LadderKernel, Ridge, RowStatus, StepPart, StepParts,
        TokenOpClass,
    };
    use serde_json::json;

    /// One point of `tokens` tokens at `tok_s` (its samples 3% either side)
    /// against its memory and compute bounds.
    fn point(
        axis: Axis,
        test: Test,
        (depth, pp_tokens, batch): (usize, usize, usize),
        tok_s: f64,
        memory: f64,
        compute: f64,
    ) -> ScalingPoint {
        let tokens = match test {
            Test::Pp => pp_tokens,
            Test::Tg => 32 * batch,
        };
        let ms = tokens as f64 / tok_s * 1e3;
        let bound = memory.min(compute);
        ScalingPoint {
            axis,
            test,
            depth,
            pp_tokens,
            batch,
            tokens,
            timed: crate::telemetry::timed_at(&[ms * 1.03, ms, ms * 0.97], &[]),
            tokens_per_s: tok_s,
            tokens_per_s_min: tok_s / 1.03,
            tokens_per_s_max: tok_s / 0.97,
            per_sequence_tokens_per_s: tok_s / batch as f64,
            bytes_per_step: 90 << 20,
            tokens_per_step: batch,
            flops_per_token: 2.7e8,
            memory: Bound {
                kernel: LadderKernel::Read,
                threads: 2,
                footprint_bytes: 90 << 20,
                level: "DRAM".into(),
                gb_per_s: 28.0,
                chunked: false,
            },
            memory_bound_tokens_per_s: memory,
            compute_bound_tokens_per_s: compute,
            bound_tokens_per_s: bound,
            bound_by: if memory <= compute {
                "memory (DRAM)".into()
            } else {
                "compute".into()
            },
            pct_of_bound: 100.0 * tok_s / bound,
            peak_bytes: (axis == Axis::Depth).then_some(((depth as u64) * 46080) + (4 << 20)),
            // A deep or wide tg step split: matmuls 4 ms (at 70 GFLOP/s),
            // attention the clean step but 3.5 ms (read at depth / 100
            // GB/s), the norms 0.5 ms, the spans' own 1 ms.
            step_parts: (test == Test::Tg && (depth >= 1024 || batch >= 8)).then(|| {
                let clean = batch as f64 * 1e3 / tok_s;
                let part = |class, ms: f64, gb: Option<f64>| StepPart {
                    class,
                    ms_per_step: ms,
                    calls_per_step: 30.0,
                    gb_per_s: gb,
                    gflop_per_s: (class == TokenOpClass::Matmuls).then_some(70.0),
                };
                StepParts {
                    spanned_ms_per_step: clean + 1.0,
                    clean_ms_per_step: clean,
                    parts: vec![
                        part(TokenOpClass::Matmuls, 4.0, Some(22.0)),
                        part(
                            TokenOpClass::Attention,
                            clean - 3.5,
                            Some(depth as f64 / 100.0),
                        ),
                        part(TokenOpClass::Norms, 0.5, None),
                    ],
                }
            }),
        }
    }

    /// A row's points on every axis, `scale` times q4_1's on a 2-core CPU
    /// (tg 300 tok/s at depth 0 to 150 at 2048; pp 1300 to 600; batch 1 to
    /// 16 at 300 to 1300 against a memory line of 330 x B and a compute
    /// ceiling of 1900), and its ridge.
    fn row(precision: &str, scale: f64, weight_bytes: u64) -> ScalingRow {
        let s = |v: f64| v * scale;
        let mut points = Vec::new();
        for (d, tg, mem, pp) in [
            (0, 300.0, 330.0, 1000.0),
            (512, 260.0, 290.0, 900.0),
            (1024, 220.0, 250.0, 800.0),
            (2048, 150.0, 180.0, 650.0),
        ] {
            let compute = 1900.0 - d as f64 / 10.0;
            points.push(point(
                Axis::Depth,
                Test::Tg,
                (d, 0, 1),
                s(tg),
                s(mem),
                s(compute),
            ));
            let pp_point = (d, 512, 1);
            points.push(point(
                Axis::Depth,
                Test::Pp,
                pp_point,
                s(pp),
                s(1.5e5),
                s(compute),
            ));
        }
        for (n, pp, compute) in [
            (64, 1300.0, 1950.0),
            (512, 1000.0, 1900.0),
            (2048, 600.0, 1700.0),
        ] {
            points.push(point(
                Axis::Prompt,
                Test::Pp,
                (0, n, 1),
                s(pp),
                s(1e5),
                s(compute),
            ));
        }
        for (b, tg) in [
            (1, 300.0),
            (2, 560.0),
            (4, 900.0),
            (8, 1200.0),
            (16, 1300.0),
        ] {
            let memory = s(330.0 * b as f64);
            points.push(point(
                Axis::Batch,
                Test::Tg,
                (0, 0, b),
                s(tg),
                memory,
                s(1900.0),
            ));
        }
        let kv = 46080;
        ScalingRow {
            precision: precision.into(),
            kernels: match precision.ends_with(crate::schema::LAB_SUFFIX) {
                true => KernelChoice::Lab,
                false => KernelChoice::Candle,
            },
            status: RowStatus::Ok,
            error: None,
            measured: Some(ScalingMeasured {
                weight_bytes,
                weight_bytes_per_token: weight_bytes,
                kv_precision: "fp32".into(),
                kv_bytes_per_token: kv,
                compute_peak_gflop_per_s: s(1900.0) * 2.7e8 / 1e9,
                compute_peak_of: "its product on 2 threads".into(),
                points,
                ridge: Some(Ridge {
                    predicted_batch: 1900.0 / 330.0,
                    measured_knee_batch: 1300.0 / 300.0,
                    best_tokens_per_s: s(1300.0),
                    best_batch: 16,
                    best_pct_of_compute: 100.0 * 1300.0 / 1900.0,
                }),
                capacity: Some(Capacity {
                    context_tokens: 8192,
                    device_bytes: 8 << 30,
                    weight_bytes,
                    kv_bytes_per_sequence: 8192 * kv,
                    sequences: ((8u64 << 30) - weight_bytes) / (8192 * kv),
                }),
                batch_matches_alone: Some(true),
                depth_matches_scratch: Some(true),
                notes: Vec::new(),
            }),
        }
    }

    /// SmolLM2-135M on a 2-core CPU: q4_1 and fp32 measured on every axis,
    /// bf16 failed.
    fn results() -> ScalingResults {
        let model = json!({"source": "file", "file": "SmolLM2-135M-Instruct-Q4_1.gguf",
            "file_bytes": 90000000, "shape": null, "name": "SmolLM2 135M Instruct", "layers": 30,
            "hidden": 576, "heads": 9, "kv_heads": 3, "head_dim": 64, "mlp": 1536,
            "vocab": 49152, "context": 8192, "rope_theta": 1e5, "rms_eps": 1e-5,
            "tied_embeddings": true, "params": 134515008, "stored": [], "rotary_layout": "x"});
        let failed = ScalingRow {
            precision: "bf16".into(),
            kernels: KernelChoice::Candle,
            status: RowStatus::Error,
            error: Some("unsupported dtype BF16 for op matmul".into()),
            measured: None,
        };
        ScalingResults {
            model: serde_json::from_value(model).unwrap(),
            depths: vec![0, 512, 1024, 2048],
            pp_tokens: vec![64, 512, 2048],
            batches: vec![1, 2, 4, 8, 16],
            tg_tokens: 32,
            batch_prompt_tokens: 512,
            warmup: 1,
            iters: 3,
            seed: 42,
            kernels: KernelChoice::Candle,
            ladder: None,
            kv_cache: vec![
                crate::schema::KvCacheBytes {
                    precision: "fp32".into(),
                    bytes_per_token: 46080,
                },
                crate::schema::KvCacheBytes {
                    precision: "fp16".into(),
                    bytes_per_token: 23040,
                },
            ],
            device_memory_bytes: Some(8 << 30),
            rows: vec![
                row("q4_1 (stored)", 1.0, 90 << 20),
                // The longest kind of row name: the tables still fit.
                row("fp32 (lab kernels)", 0.14, 540 << 20),
                failed,
            ],
            notes: vec!["a note of the run".into()],
        }
    }

    /// `r` in a result file of a CPU run.
    fn file(r: ScalingResults) -> ResultFile {
        let file = json!({
            "schema_version": "2.10", "experiment": "scaling",
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
            "scaling": serde_json::to_value(r).unwrap()
        });
        crate::schema::from_json(&file.to_string()).unwrap()
    }

    /// The text nodes of an SVG document.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
            .collect()
    }

    #[test]
    fn every_table_fits_120_columns_and_holds_every_point() {
        let f = file(results());
        let shown = super::super::show(&f);
        assert_eq!(
            shown.tables.len(),
            3 + 3,
            "three axes, where a tg step goes, the KV cache, capacity"
        );
        let text: String = shown.tables.iter().map(|t| t.to_string()).collect();
        for line in text.lines() {
            let width = line.chars().count();
            assert!(width <= 120, "{width} columns: {line}\n{text}");
        }
        for want in [
            "tg32 @ d2048",
            "pp512 @ d1024",
            "pp2048",
            "tg32 x b16",
            "memory (DRAM)",
            "compute",
            // q4_1 at batch 16: 1300 tok/s, 81.2 a sequence, 68% of 1900.
            "1300",
            "81.2",
            "68%",
            // Its depth 2048's peak: 2048 x 46080 bytes and 4 MiB.
            "94.0",
            // Its depth 2048's step: clean 6.67 ms, spanned 7.67, attention
            // 3.17 ms reading its KV cache at 20.5 GB/s.
            "where a tg step goes",
            "6.67 ┆    7.67",
            "3.17 ┆ 20.5",
            // The KV cache at the model's context, and the sequences that fit.
            "MiB at 8192 tokens",
            "360.0",
            "22",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
    }

    #[test]
    fn notes_give_each_ridge_and_flag_what_went_wrong() {
        let mut r = results();
        let f = file(r.clone());
        let notes = super::super::show(&f).notes;
        let ridge = "q4_1 (stored): predicted ridge B* = 5.8 (compute bound 1900 / memory bound \
                     330 at batch 1); measured knee 4.3 (best 1300 tok/s at batch 16 / batch 1's \
                     300); best = 68% of the compute bound";
        assert!(notes.iter().any(|n| n == ridge), "{notes:#?}");
        assert!(notes
            .iter()
            .any(|n| n.starts_with("fp32 (lab kernels): predicted ridge")));
        assert!(notes.contains(&"bf16: error: unsupported dtype BF16 for op matmul".into()));
        assert!(notes.contains(&"a note of the run".into()));
        // What the deepest point and the largest batch wait on, measured.
        let depth = "q4_1 (stored): tg32 @ d2048's step: the matmuls 4.00 ms reading the weights \
                     at 22.0 GB/s, attention 3.17 ms reading the KV cache at 20.5 GB/s, where \
                     the ladder reads 28.0 GB/s at the step's footprint (DRAM)";
        assert!(notes.iter().any(|n| n == depth), "{notes:#?}");
        let batch = notes
            .iter()
            .find(|n| n.starts_with("q4_1 (stored): tg32 x b16"))
            .unwrap();
        assert!(
            batch.contains("the matmuls 4.00 ms at 70 GFLOP/s ("),
            "{batch}"
        );
        assert!(batch.ends_with("the rest 0.50 ms"), "{batch}");
        assert!(
            !notes.iter().any(|n| n.starts_with("warning")),
            "{notes:#?}"
        );
        // A point over its bound, a batch and a depth that did not match.
        let m = r.rows[0].measured.as_mut().unwrap();
        m.points[0].pct_of_bound = 112.0;
        (m.batch_matches_alone, m.depth_matches_scratch) = (Some(false), Some(false));
        let notes = notes_of(r);
        let warned = |s: &str| notes.iter().filter(|n| n.contains(s)).count();
        assert_eq!(warned("above its bound"), 1, "{notes:#?}");
        assert_eq!(warned("q4_1 (stored) tg32 @ d0 at 112%"), 1, "{notes:#?}");
        assert_eq!(
            warned("warning: q4_1 (stored): a sequence of the largest batch"),
            1
        );
        assert_eq!(
            warned("warning: q4_1 (stored): the token after the deepest cache"),
            1
        );
    }

    fn notes_of(r: ScalingResults) -> Vec<String> {
        notes(&r)
    }

    #[test]
    fn odd_numbers_neither_panic_nor_print_as_nan() {
        let mut r = results();
        let m = r.rows[0].measured.as_mut().unwrap();
        m.points[0].tokens_per_s = f64::NAN;
        m.points[1].bound_tokens_per_s = f64::INFINITY;
        m.points[2].pct_of_bound = f64::NAN;
        m.ridge.as_mut().unwrap().predicted_batch = f64::NAN;
        r.kv_cache[0].bytes_per_token = u64::MAX;
        // The envelope only: a file cannot hold a NaN rate.
        let f = file(results());
        let shown = r.show(&f);
        let text: String = shown.tables.iter().map(|t| t.to_string()).collect();
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
        let svg = r.chart(&f).unwrap();
        assert!(
            !svg.contains("NaN") && !svg.contains("inf"),
            "non-finite in the chart"
        );
    }

    #[test]
    fn records_are_one_per_point_and_one_per_failed_row() {
        let r = results();
        let text = crate::export::csv::write(&records("intel-xeon-2t", &r)).unwrap();
        let text = String::from_utf8(text).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "machine,experiment,model,precision,kernels,status,axis,test,depth,pp_tokens,batch,\
             tokens,median_ms,tokens_per_s,tokens_per_s_min,tokens_per_s_max,\
             per_sequence_tokens_per_s,bound_tokens_per_s,bound_by,pct_of_bound,\
             memory_bound_tokens_per_s,compute_bound_tokens_per_s,peak_bytes"
        );
        // 16 points a measured row, one line for the failed one.
        assert_eq!(lines.len(), 1 + 16 * 2 + 1);
        let batch16 = lines
            .iter()
            .find(|l| l.contains(",q4_1 (stored),") && l.contains(",batch,tg,0,0,16,512,"))
            .unwrap();
        assert!(
            batch16.starts_with(
                "intel-xeon-2t,scaling,SmolLM2-135M-Instruct-Q4_1.gguf,q4_1 (stored),candle,ok,\
                 batch,tg,0,0,16,512,"
            ),
            "{batch16}"
        );
        assert!(batch16.ends_with(",1900.0,compute,68.42105263157895,5280.0,1900.0,"));
        assert_eq!(
            lines[lines.len() - 1],
            "intel-xeon-2t,scaling,SmolLM2-135M-Instruct-Q4_1.gguf,bf16,candle,error\
             ,,,,,,,,,,,,,,,,,"
        );
        let mut reader = ::csv::Reader::from_reader(text.as_bytes());
        assert!(reader.records().all(|r| r.unwrap().len() == 23));
    }

    #[test]
    fn the_chart_has_three_panels_bounds_and_each_ridge() {
        let r = results();
        let f = file(r.clone());
        let svg = r.chart(&f).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let t = texts(&svg);
        for want in [
            "scaling: SmolLM2 135M Instruct (SmolLM2-135M-Instruct-Q4_1.gguf) on cpu (Xeon, \
             candle 0.11.1)",
            "generation and prompt at context depth",
            "prompt processing against prompt length",
            "decode against batch, all sequences together",
            "B* = 5.8",
            "q4_1 (stored)",
            "fp32 (lab kernels)",
            "tg32",
            "pp512",
            "0",
            "2048",
            "16",
            "memory line (rises with B)",
            "compute ceiling",
        ] {
            assert!(t.contains(&want), "{want:?} not in {t:?}");
        }
        // Both rows' ridges; the failed row is in no panel nor the legend.
        assert_eq!(t.iter().filter(|x| x.starts_with("B* = ")).count(), 2);
        assert!(!t.contains(&"bf16"), "{t:?}");
    }

    #[test]
    fn a_missing_axis_says_no_points_and_no_point_draws_no_chart() {
        let mut r = results();
        for row in &mut r.rows {
            if let Some(m) = &mut row.measured {
                m.points.retain(|p| p.axis != Axis::Prompt);
            }
        }
        let f = file(r.clone());
        let svg = r.chart(&f).unwrap();
        assert_eq!(texts(&svg).iter().filter(|&&x| x == "no points").count(), 1);
        assert_eq!(super::super::show(&f).tables.len(), 2 + 3);
        // Rows without points (a run that prepared only): no chart, no
        // failure; the records and the notes still come.
        for row in &mut r.rows {
            if let Some(m) = &mut row.measured {
                m.points.clear();
                m.ridge = None;
            }
        }
        let f = file(r.clone());
        assert!(r.chart(&f).is_none());
        assert!(r.records("m").is_some());
        let Body::Scaling(body) = &f.body else {
            panic!("a scaling file")
        };
        assert_eq!(body.rows.len(), 3);
    }

    #[test]
    fn the_section_is_headed_by_the_model_and_says_how_to_read_the_chart() {
        let f = file(results());
        let super::super::Section::Own(own) = super::super::section(&f) else {
            panic!("scaling has its own section")
        };
        assert_eq!(
            own.heading.as_deref(),
            Some("SmolLM2 135M Instruct (SmolLM2-135M-Instruct-Q4_1.gguf)")
        );
        for want in ["dashed", "ridge", "B*"] {
            assert!(own.intro.contains(want), "{want}");
        }
    }

    /// results/README.md's scaling section, as `report` builds it from a
    /// machine folder: the model in its heading, the intro, the tables in
    /// Markdown, the notes and the chart.
    #[test]
    fn the_report_gives_scaling_its_section_and_chart() {
        let dir = tempfile::tempdir().unwrap();
        let machine = dir.path().join("intel-xeon-2t");
        std::fs::create_dir_all(&machine).unwrap();
        let json = serde_json::to_string_pretty(&file(results())).unwrap();
        std::fs::write(machine.join("scaling.json"), json).unwrap();
        let listing = crate::read::report::load(dir.path()).unwrap();
        let built = crate::read::report::build(&listing.sources).unwrap();
        let section = &built.readme[built.readme.find("## scaling").unwrap()..];
        for want in [
            "### candle 0.11.1 on intel-xeon-2t: SmolLM2 135M Instruct \
             (SmolLM2-135M-Instruct-Q4_1.gguf)",
            "B* marks where they cross",
            "### batch: B sequences decoding together",
            "| q4_1 (stored)      | tg32 x b16 |  1300 |",
            "- q4_1 (stored): predicted ridge B\\* = 5.8",
            "(intel-xeon-2t/scaling.svg)",
        ] {
            assert!(section.contains(want), "no {want:?} in\n{section}");
        }
        assert!(built
            .files
            .iter()
            .any(|(p, _)| p == "intel-xeon-2t/scaling.svg"));
    }
}
