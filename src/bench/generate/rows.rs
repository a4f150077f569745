//! A run's rows in turn: the copy ceiling the tg bound is held against, the
//! weights made once for every row, then each row (its GGUF made once when
//! it is quantized, its model loaded, measured: [`super::measure`]), the
//! results so far handed on after every row so that the program saves them
//! as the sweep does, and a run stopped midway keeps what it measured.

use anyhow::{Context, Result};
use candle_core::Device;

use super::group::{group as group_measured, Reference};
use super::measure::{fill_vs_fp32, load};
use super::setup::Prepared;
use super::{Config, RowKind};
use crate::bench::lm::bounds::Bounds;
use crate::bench::lm::load::Rowed;
use crate::bench::lm::load::{label, made_once, row_gguf};
use crate::model::layer::Kernels;
use crate::model::text::Text;
use crate::model::weights::{Source, Weights};
use crate::schema::{
    GenerateMeasured, GenerateResults, GenerateRow, KernelChoice, ModelPath, RowStatus,
};
use crate::telemetry::Telemetry;

/// Every model of `runs` in turn (the first's body holds the others',
/// `more_models`), one ladder for all their bounds, each row saved as it
/// finishes: `on_row` gets the results so far, marked partial, so a run
/// stopped midway keeps the rows it measured.
pub fn run(
    device: &Device,
    runs: &[Prepared],
    telemetry: &Telemetry,
    on_row: &mut dyn FnMut(&GenerateResults) -> Result<()>,
) -> Result<GenerateResults> {
    let first = runs.first().context("no model to run")?;
    // One ladder for every row's bounds; its read past the caches first.
    let bounds = Bounds::new(device, telemetry, first.config.ladder_max)?;
    let mut done: Vec<GenerateResults> = Vec::new();
    for (i, p) in runs.iter().enumerate() {
        crate::note!("generate: {}", p.found());
        let (source, cfg, text) = (&p.source, &p.config, p.text.as_ref());
        let r = run_model(
            device,
            &bounds,
            (source, cfg, text),
            telemetry,
            &mut |so_far| on_row(&nested(&done, Some(so_far), runs.len())),
        )?;
        done.push(r);
        if i + 1 < runs.len() {
            on_row(&nested(&done, None, runs.len()))?;
        }
    }
    Ok(nested(&done, None, runs.len()))
}

/// The models measured so far (`done`, then the one being measured) as one
/// body: the first's, the others in its `more_models`; a note says how many
/// of `planned` it holds while the run goes on.
fn nested(
    done: &[GenerateResults],
    current: Option<&GenerateResults>,
    planned: usize,
) -> GenerateResults {
    let mut all: Vec<GenerateResults> = done.iter().chain(current).cloned().collect();
    let mut first = all.remove(0);
    first.more_models = all;
    let measured = done.len();
    if measured < planned {
        first.notes.insert(
            0,
            format!(
                "partial: {measured} of {planned} models measured whole, saved as they \
                 finished; the run had not ended when this file was written"
            ),
        );
    }
    first
}

/// Every row of one model on `device`, each handed to `on_row` as it
/// finishes (but the last), marked partial in its notes. The weights are
/// made once for every row before the first ([`Weights::new`]), a quantized
/// row's GGUF once for its model and its matmuls ([`Gguf::of`]); each of
/// these host-side steps says how long it took.
fn run_model(
    device: &Device,
    bounds: &Bounds,
    (source, cfg, text): (&Source, &Config, Option<&Text>),
    telemetry: &Telemetry,
    on_row: &mut dyn FnMut(&GenerateResults) -> Result<()>,
) -> Result<GenerateResults> {
    // Memory's read as the file states it: the best so far, when it is written.
    let dram = || bounds.dram().map(|d| (d.footprint_bytes, d.gb_per_s));
    let weights = made_once(source, &cfg.rows, "generate")?;
    let planned = runs(&cfg.rows, cfg.kernels);
    let fp32s = leading_fp32(&planned);
    let mut refs: Vec<Reference> = Vec::new();
    let mut rows = Vec::new();
    let mut i = 0;
    while i < planned.len() {
        let (kind, kernels) = planned[i];
        // `--kernels both`: a precision on candle's kernels and on the suite's
        // are compared with each other, so they are measured side by side.
        let n = match planned.get(i + 1) {
            Some(&(k, lab)) if k == kind && kernels == Kernels::Fused && lab == Kernels::Lab => 2,
            _ => 1,
        };
        let group: Vec<(RowKind, Kernels, String)> = planned[i..i + n]
            .iter()
            .map(|&(k, kern)| (k, kern, label(source, k, kern)))
            .collect();
        let names: Vec<&str> = group.iter().map(|g| g.2.as_str()).collect();
        // A panic inside Candle on a row is the row's error, as a failure is.
        let measured = crate::error::contained(&format!("rows {}", names.join(", ")), || {
            let ggufs = group
                .iter()
                .map(|(k, kern, l)| row_gguf(&weights, (*k, *kern), &format!("generate {l}")))
                .collect::<Result<Vec<_>>>()?;
            let rowed: Vec<(Rowed<'_>, &str)> = group
                .iter()
                .zip(&ggufs)
                .map(|((k, kern, l), g)| ((*k, *kern, g.as_ref()), l.as_str()))
                .collect();
            Ok(group_measured(
                device, &weights, cfg, &rowed, &mut refs, text, telemetry, bounds,
            ))
        })
        .unwrap_or_else(|e| {
            let why = crate::error::error_line(&e);
            group
                .iter()
                .map(|_| Err(anyhow::anyhow!("{why}")))
                .collect()
        });
        for ((k, kern, l), m) in group.into_iter().zip(measured) {
            rows.push(finished(l, k, kern, m));
        }
        i += n;
        // The fp32 rows come first: once measured, a copy of each fp32 model
        // is held for the rest of the run, timed beside every later row.
        if i == fp32s && fp32s > 0 && i < planned.len() {
            refs = references(device, &weights, cfg, source, &planned[..i]);
        }
        if i < planned.len() {
            let done = (rows.len(), planned.len());
            let mut partial = results(device, source, cfg, dram()?, &rows, Some(done));
            partial.ladder = Some(bounds.ladder());
            partial.op_cost = bounds.op_cost().ok().cloned();
            on_row(&partial)?;
        }
    }
    let mut done = results(device, source, cfg, dram()?, &rows, None);
    done.ladder = Some(bounds.ladder());
    done.op_cost = bounds.op_cost().ok().cloned();
    Ok(done)
}

/// How many of `planned`'s first runs are fp32's ([`runs`] puts them first).
fn leading_fp32(planned: &[(RowKind, Kernels)]) -> usize {
    let fp32 = RowKind::Float(crate::precision::Precision::F32);
    planned.iter().take_while(|(k, _)| *k == fp32).count()
}

/// The fp32 models the rows after `measured` are timed beside: one per
/// fp32 row among them (each on its kernels), loaded now; none where a
/// load fails (said: the ratios then come from fp32's own rows).
fn references(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    source: &Source,
    measured: &[(RowKind, Kernels)],
) -> Vec<Reference> {
    let fp32 = RowKind::Float(crate::precision::Precision::F32);
    let mut refs = Vec::new();
    for &(kind, kernels) in measured.iter().filter(|(k, _)| *k == fp32) {
        let against = label(source, kind, kernels);
        match Reference::load(device, weights, cfg, (kernels, &against)) {
            Ok(r) => refs.push(r),
            Err(e) => {
                crate::note!(
                    "generate: {against} could not be held beside the later rows ({}); their \
                     ratios to it come from its own row, measured at another moment",
                    crate::error::error_line(&e)
                );
                return Vec::new();
            }
        }
    }
    refs
}

/// What a run does before its first measurement, alone and timed: the
/// weights made once, then per row its GGUF (quantized rows) and its model
/// loaded on `device`. `--prepare-only`: the host side the GPU call's plan
/// sizes generate's step from (scripts/gpu-run.sh's rehearsal measures it on
/// the CPU). The result has no rows; its notes give the times, each model's
/// in its own body.
pub fn prepare_only(device: &Device, runs: &[Prepared]) -> Result<GenerateResults> {
    let mut done = Vec::new();
    for p in runs {
        crate::note!("generate: {}", p.found());
        done.push(prepare_model(device, &p.source, &p.config)?);
    }
    Ok(nested(&done, None, runs.len()))
}

/// [`prepare_only`] for one model.
fn prepare_model(device: &Device, source: &Source, cfg: &Config) -> Result<GenerateResults> {
    let started = std::time::Instant::now();
    let weights = made_once(source, &cfg.rows, "generate")?;
    let mut times = vec![format!(
        "--prepare-only: the weights made in {:.1} s",
        started.elapsed().as_secs_f64()
    )];
    for (kind, kernels) in runs(&cfg.rows, cfg.kernels) {
        let label = label(source, kind, kernels);
        let t0 = std::time::Instant::now();
        let gguf = row_gguf(&weights, (kind, kernels), &format!("generate {label}"))?;
        let made = t0.elapsed().as_secs_f64();
        load(
            device,
            &weights,
            cfg,
            (kind, kernels, gguf.as_ref()),
            &label,
        )?;
        let loaded = t0.elapsed().as_secs_f64() - made;
        times.push(match gguf {
            Some(g) if g.bytes_in_memory() > 0 => format!(
                "--prepare-only: {label}: quantized once in {made:.1} s, loaded in {loaded:.1} s"
            ),
            _ => format!("--prepare-only: {label}: loaded in {loaded:.1} s"),
        });
    }
    let planned = runs(&cfg.rows, cfg.kernels);
    let fp32s = leading_fp32(&planned);
    if fp32s > 0 && fp32s < planned.len() {
        let t0 = std::time::Instant::now();
        let refs = references(device, &weights, cfg, source, &planned[..fp32s]);
        times.push(format!(
            "--prepare-only: {} fp32 cop{} held beside the later rows, loaded in {:.1} s",
            refs.len(),
            if refs.len() == 1 { "y" } else { "ies" },
            t0.elapsed().as_secs_f64()
        ));
    }
    let mut r = results(device, source, cfg, (0, 0.0), &[], None);
    r.copy_gb_per_s = None;
    times.push(format!(
        "--prepare-only: {:.1} s in all; no row measured",
        started.elapsed().as_secs_f64()
    ));
    r.notes.splice(0..0, times);
    Ok(r)
}

/// A row as the result keeps it: measured, or failed with its error.
fn finished(
    label: String,
    kind: RowKind,
    kernels: Kernels,
    measured: Result<GenerateMeasured>,
) -> GenerateRow {
    let path = match kind {
        RowKind::Quantized(_) => ModelPath::Quantized,
        RowKind::Float(_) => ModelPath::Float,
    };
    let kernels = kernels.choice();
    let (status, error, measured) = match measured {
        Ok(m) => (RowStatus::Ok, None, Some(m)),
        Err(e) => {
            let why = crate::error::error_line(&e);
            crate::note!("generate {label}: row failed, recorded with its error ({why})");
            (RowStatus::Error, Some(why), None)
        }
    };
    GenerateRow {
        precision: label,
        path,
        kernels,
        status,
        error,
        measured,
    }
}

/// The result of `rows`; `partial` (done, planned) while the run goes on.
fn results(
    device: &Device,
    source: &Source,
    cfg: &Config,
    (copy_bytes, copy_gb_per_s): (u64, f64),
    rows: &[GenerateRow],
    partial: Option<(usize, usize)>,
) -> GenerateResults {
    let mut rows = rows.to_vec();
    fill_vs_fp32(&mut rows);
    let mut notes = Vec::new();
    if let Some((done, planned)) = partial {
        notes.push(format!(
            "partial: {done} of {planned} rows, saved as they finished; the run had not ended \
             when this file was written"
        ));
    }
    if cfg.kernels != KernelChoice::Candle
        && cfg.rows.iter().any(|r| matches!(r, RowKind::Quantized(_)))
    {
        notes.push(
            "--kernels: a quantized row with the suite's kernels is the float path's layers \
             with the GGUF blocks as stored, multiplied by the suite's quantized kernels \
             (kernels::QLinear); a quantized row with Candle's is candle-transformers' \
             quantized model of the architecture (QMatMul)"
                .into(),
        );
    }
    let candle_rows = cfg.kernels != KernelChoice::Lab
        && cfg.rows.iter().any(|r| matches!(r, RowKind::Quantized(_)));
    if let Some(caveat) = source.config().arch.candle_caveat().filter(|_| candle_rows) {
        notes.push(format!("candle's quantized rows: {caveat}"));
    }
    if device.is_cuda() {
        notes.push(
            "kernel launches per token: not counted apart from the ops (each op one launch or \
             more: Candle exposes no launch counter, and CUDA's profiling API is not linked)"
                .into(),
        );
    }
    GenerateResults {
        model: super::model_info(source),
        prompt: cfg.prompt.clone(),
        pp_tokens: cfg.pp_tokens,
        tg_tokens: cfg.tg_tokens,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        seed: cfg.seed,
        copy_gb_per_s: Some(copy_gb_per_s),
        copy_bytes,
        ladder: None,
        op_cost: None,
        kernels: cfg.kernels,
        rows,
        notes,
        more_models: Vec::new(),
    }
}

/// What the run times, in order: each row with candle's kernels, or with the
/// suite's (`lab`), or (`both`) each row with candle's and then with the
/// suite's. A quantized row with the suite's kernels is its own model path
/// ([`crate::model::decoder::Decoder::load_quantized`]); with candle's,
/// candle-transformers' quantized model.
fn runs(rows: &[RowKind], choice: KernelChoice) -> Vec<(RowKind, Kernels)> {
    let mut out = Vec::new();
    // fp32 first: every later row is timed beside a copy of its model.
    let fp32 = RowKind::Float(crate::precision::Precision::F32);
    let ordered = rows
        .iter()
        .filter(|k| **k == fp32)
        .chain(rows.iter().filter(|k| **k != fp32));
    for &kind in ordered {
        match choice {
            KernelChoice::Lab => out.push((kind, Kernels::Lab)),
            KernelChoice::Both => {
                out.push((kind, Kernels::Fused));
                out.push((kind, Kernels::Lab));
            }
            KernelChoice::Candle => out.push((kind, Kernels::Fused)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quantize::Quant;
    use crate::precision::Precision;
    use candle_core::quantized::GgmlDType;

    #[test]
    fn both_times_each_row_twice_candles_first_and_fp32_before_the_rest() {
        let (q, f, h) = (
            RowKind::Quantized(Quant::Type(GgmlDType::Q4_1)),
            RowKind::Float(Precision::F32),
            RowKind::Float(Precision::F16),
        );
        let got = runs(&[q, f, h], KernelChoice::Both);
        assert_eq!(
            got,
            [
                (f, Kernels::Fused),
                (f, Kernels::Lab),
                (q, Kernels::Fused),
                (q, Kernels::Lab),
                (h, Kernels::Fused),
                (h, Kernels::Lab)
            ]
        );
        assert_eq!(
            runs(&[q, f], KernelChoice::Lab),
            [(f, Kernels::Lab), (q, Kernels::Lab)]
        );
        assert_eq!(
            runs(&[h, q], KernelChoice::Candle),
            [(h, Kernels::Fused), (q, Kernels::Fused)]
        );
    }
}
