//! The `scaling` experiment's core: one model's cost as its work grows, per
//! precision and kernel set, along three axes ([`points`]): generation (and
//! prompt processing) after `depth` tokens already in the KV cache, as
//! llama-bench's `-d`; prompt processing at each prompt length from an empty
//! cache; and B sequences of distinct prompts decoding in lockstep, one
//! forward of B rows a step, as llama.cpp's `llama-batched-bench`. Each point
//! is held against its own roofline: the bytes its step reads (the weights
//! once, and the KV cache its tokens attend to) at the bandwidth ladder's
//! read of that footprint, and its FLOPs at the compute peak this run
//! measured for the row ([`crate::bench::lm::bounds`]). The rows' models are
//! `generate`'s ([`crate::bench::lm`]).

mod ceiling;
mod parts;
mod points;

use anyhow::{bail, Result};
use candle_core::{DType, Device};

use crate::bench::lm::bounds::{Bounds, Peak};
use crate::bench::lm::load::{label, load_at, made_once, row_bytes, row_gguf, Loaded};
use crate::bench::lm::setup::Prepared;
use crate::bench::lm::{model_info, Config as RowsConfig, RowKind};
use crate::memory::fits::Need;
use crate::memory::MemoryMeter;
use crate::model::cost::kv_bytes_per_token;
use crate::model::layer::Kernels;
use crate::model::weights::{Source, Weights};
use crate::precision::Precision;
use crate::schema::{
    Capacity, KernelChoice, KvCacheBytes, RowStatus, ScalingMeasured, ScalingResults, ScalingRow,
};
use crate::telemetry::Telemetry;

/// What a scaling run asks for beyond its rows: the three axes' points.
#[derive(Clone, Debug, PartialEq)]
pub struct Axes {
    /// Tokens in the cache before a depth point's tests.
    pub depths: Vec<usize>,
    /// Prompt lengths of the prompt axis.
    pub pp_lengths: Vec<usize>,
    /// Sequences decoding together.
    pub batches: Vec<usize>,
}

/// A checked run: the model and its rows (`generate`'s setup: `pp_tokens` is
/// the length of a batch's prompts and of the pp test at each depth), the
/// axes, and the rows planned once from them ([`planned`]: each with its
/// kernels and its KV cache's precision, `None` the row's own), with the
/// pairings left out and why.
pub struct Run {
    pub prepared: Prepared,
    pub axes: Axes,
    pub plan: Vec<Planned>,
    pub kv_left_out: Vec<String>,
}

impl Axes {
    /// Refuses points the model cannot hold: a depth, prompt or batch
    /// prompt whose positions pass its context, a batch of none.
    pub fn check(&self, rows: &RowsConfig, context: usize) -> Result<()> {
        let n = rows.tg_tokens.max(rows.pp_tokens);
        for &d in &self.depths {
            if d + n > context {
                bail!(
                    "--depth {d}: with --tokens {} and --pp-tokens {}, {} positions, past the \
                     model's context of {context}",
                    rows.tg_tokens,
                    rows.pp_tokens,
                    d + n
                );
            }
        }
        if let Some(p) = self.pp_lengths.iter().find(|&&p| p > context || p == 0) {
            bail!("--pp-lengths {p}: a prompt of 1 to {context} tokens (the model's context)");
        }
        if self.batches.contains(&0) {
            bail!("--batch 0: a batch is one sequence or more");
        }
        if rows.pp_tokens + rows.tg_tokens > context {
            bail!(
                "--pp-tokens {} and --tokens {}: a batch's sequences pass the model's context \
                 of {context}",
                rows.pp_tokens,
                rows.tg_tokens
            );
        }
        Ok(())
    }

    /// Positions a row's caches hold: its deepest point's, its longest
    /// prompt's, a batch's.
    pub fn positions(&self, rows: &RowsConfig) -> usize {
        let deepest = self.depths.iter().max().copied().unwrap_or(0);
        let depth = deepest + rows.tg_tokens.max(rows.pp_tokens);
        let prompt = self.pp_lengths.iter().max().copied().unwrap_or(0);
        depth.max(prompt).max(rows.pp_tokens + rows.tg_tokens) + 1
    }
}

/// What must fit: the largest row's weights, and its caches at the largest
/// batch (each sequence `positions` long) beside the scores of the longest
/// pass.
pub fn needs(run: &Run) -> Vec<Need> {
    let (source, rows) = (&run.prepared.source, &run.prepared.config);
    let mut need = crate::bench::lm::needs(source, rows);
    let d = source.config();
    let positions = run.axes.positions(rows) as u64;
    let batch = run.axes.batches.iter().max().copied().unwrap_or(1) as u64;
    let caches = kv_bytes_per_token(d, 4) * positions * batch;
    let scores = d.heads as u64 * positions * positions * 4 * 3;
    for n in &mut need {
        n.device_bytes += caches + scores;
        n.host_bytes += caches + scores;
    }
    need
}

/// A planned row: its precision, its kernels, its KV cache's precision
/// where not its own.
pub type Planned = (RowKind, Kernels, Option<DType>);

/// The rows in the order they run: each with candle's kernels, or the
/// suite's, or (`both`) candle's then the suite's, each at every KV cache
/// precision of `kv` it can keep, and a note for each pairing left out. A
/// cache other than the row's own runs only where the suite's attention
/// reads it as it lies: the suite's kernels on the CPU, a 16-bit cache
/// under f32 activations. (Elsewhere the composed attention would widen
/// the whole cache every step, reading and writing more than the bound
/// counts; candle-transformers' quantized model keeps its own f32 cache.)
/// Refused in one line where a precision asked for runs on no row.
pub fn planned(
    source: &Source,
    rows: &[RowKind],
    choice: KernelChoice,
    kv: &[Option<DType>],
    on_cpu: bool,
) -> Result<(Vec<Planned>, Vec<String>)> {
    let kernels = match choice {
        KernelChoice::Candle => vec![Kernels::Fused],
        KernelChoice::Lab => vec![Kernels::Lab],
        KernelChoice::Both => vec![Kernels::Fused, Kernels::Lab],
    };
    let (mut plan, mut left_out) = (Vec::new(), Vec::new());
    for &k in rows {
        for &with in &kernels {
            let own = own_kv(k);
            for &c in kv {
                let c = c.filter(|&c| c != own);
                let readable = with == Kernels::Lab
                    && on_cpu
                    && own == DType::F32
                    && matches!(c, Some(DType::F16 | DType::BF16));
                match c.is_none() || readable {
                    true if !plan.contains(&(k, with, c)) => plan.push((k, with, c)),
                    true => {}
                    false => left_out.push(format!(
                        "{} on {} with an {} KV cache left out: the suite's attention reads \
                         a cache other than a row's own on the CPU only, 16 bits under f32 \
                         activations",
                        k.label(source),
                        match with {
                            Kernels::Lab => "the suite's kernels",
                            _ => "candle's kernels",
                        },
                        c.map_or("own".into(), precision_name)
                    )),
                }
            }
        }
    }
    for c in kv.iter().flatten() {
        let runs = plan
            .iter()
            .any(|&(k, _, p)| p == Some(*c) || (p.is_none() && own_kv(k) == *c));
        if !runs {
            bail!(
                "--kv-cache {}: no row can keep it (a cache other than a row's own runs on the \
                 suite's kernels on the CPU, 16 bits under f32 activations: a quantized or fp32 \
                 row with --kernels lab or both)",
                precision_name(*c)
            );
        }
    }
    Ok((plan, left_out))
}

/// The precision a row keeps its KV cache in by itself: its activations'.
fn own_kv(kind: RowKind) -> DType {
    match kind {
        RowKind::Float(p) => p.dtype(),
        RowKind::Quantized(_) => DType::F32,
    }
}

/// A row's name: generate's, with its KV cache's precision where it is not
/// the row's own ("q4_1 (stored), fp16 KV (lab kernels)").
fn row_label(source: &Source, (kind, kernels, kv): Planned) -> String {
    let name = label(source, kind, kernels);
    let Some(kv) = kv else { return name };
    let kv = format!(", {} KV", precision_name(kv));
    match name.strip_suffix(crate::schema::LAB_SUFFIX) {
        Some(base) => format!("{base}{kv}{}", crate::schema::LAB_SUFFIX),
        None => format!("{name}{kv}"),
    }
}

/// Every row of `run` on `device`, one ladder for all their bounds; `on_row`
/// gets the results so far after each row but the last.
pub fn run(
    device: &Device,
    (run, memory): (&Run, Option<u64>),
    telemetry: &Telemetry,
    on_row: &mut dyn FnMut(&ScalingResults) -> Result<()>,
) -> Result<ScalingResults> {
    let (source, cfg) = (&run.prepared.source, &run.prepared.config);
    crate::note!("scaling: {}", run.prepared.found());
    let bounds = Bounds::new(device, telemetry, cfg.ladder_max)?;
    let weights = made_once(source, &cfg.rows, "scaling")?;
    let plan = &run.plan;
    for why in &run.kv_left_out {
        crate::note!("scaling: {why}");
    }
    let mut rows = Vec::new();
    for (i, &(kind, kernels, kv)) in plan.iter().enumerate() {
        let name = row_label(source, (kind, kernels, kv));
        let measured = crate::error::contained(&format!("row {name}"), || {
            let row = (kind, kernels, kv, name.as_str());
            measure_row(device, (run, memory), &weights, row, telemetry, &bounds)
        });
        rows.push(finished(name, kernels, measured));
        if i + 1 < plan.len() {
            let mut r = results((run, memory), &rows, (i + 1, plan.len()));
            r.ladder = Some(bounds.ladder());
            on_row(&r)?;
        }
    }
    ceiling::shared_ceilings(&weights, plan, &mut rows);
    let mut r = results((run, memory), &rows, (plan.len(), plan.len()));
    r.ladder = Some(bounds.ladder());
    Ok(r)
}

/// One row: its model loaded, its points measured, what they add up to.
fn measure_row(
    device: &Device,
    (run, memory): (&Run, Option<u64>),
    weights: &Weights,
    (kind, kernels, kv, name): (RowKind, Kernels, Option<DType>, &str),
    telemetry: &Telemetry,
    bounds: &Bounds,
) -> Result<ScalingMeasured> {
    let cfg = &run.prepared.config;
    let d = weights.config();
    let precision = match kind {
        RowKind::Float(p) => p,
        RowKind::Quantized(_) => Precision::F32,
    };
    let _mode = crate::bench::gemm_mode::GemmMode::set(precision);
    let who = format!("scaling {name}");
    let gguf = row_gguf(weights, (kind, kernels), &who)?;
    let positions = run.axes.positions(cfg);
    let meter = MemoryMeter::for_device(device)?;
    let base = meter.used_bytes()?;
    let mut lm = load_at(
        device,
        weights,
        positions,
        (kind, kernels, gguf.as_ref()),
        &who,
    )?;
    kv_cache(&mut lm, kv)?;
    let (weight_bytes, weight_bytes_per_token) = row_bytes(weights, kind)?;
    let kv_dtype = kv.unwrap_or(own_kv(kind));
    let kv_elem = kv_dtype.size_in_bytes() as u64;
    let peak = Peak::of_row(weights, kind, kernels)?;
    let compute = bounds.compute_peak(peak, d.hidden)?;
    let row = points::Row {
        d,
        weight_bytes_per_token,
        kv_elem,
        compute_gflop_per_s: compute,
        name: &who,
    };
    let ctx = points::Ctx {
        device,
        cfg,
        telemetry,
        bounds,
        meter: (&meter, base),
    };
    let (mut points, mut checks) = points::all(&ctx, &row, &run.axes, &mut lm)?;
    let held = (&mut points[..], &mut checks.left_out);
    let (ceiling, of) = ceiling::held_ceiling(bounds, (peak, d.hidden, compute), held);
    let ridge = points::ridge(&points);
    let kv_bytes_per_token = kv_bytes_per_token(d, kv_elem);
    let capacity = memory.map(|device_bytes| {
        let per_sequence = kv_bytes_per_token * d.context as u64;
        Capacity {
            context_tokens: d.context,
            device_bytes,
            weight_bytes,
            kv_bytes_per_sequence: per_sequence,
            sequences: device_bytes.saturating_sub(weight_bytes) / per_sequence.max(1),
        }
    });
    Ok(ScalingMeasured {
        weight_bytes,
        weight_bytes_per_token,
        kv_precision: precision_name(kv_dtype),
        kv_bytes_per_token,
        compute_peak_gflop_per_s: ceiling,
        compute_peak_of: of,
        points,
        ridge,
        capacity,
        batch_matches_alone: checks.batch,
        depth_matches_scratch: checks.depth,
        notes: checks.left_out,
    })
}

/// `lm`'s KV caches made in `kv` where it is given (the suite's decoder
/// alone can: candle-transformers' quantized model keeps its own).
fn kv_cache(lm: &mut Loaded, kv: Option<DType>) -> Result<()> {
    match (kv, lm) {
        (None, _) => Ok(()),
        (Some(kv), Loaded::Decoder(m)) => m.set_kv_dtype(kv),
        (Some(kv), Loaded::Candle(_)) => bail!(
            "candle-transformers' quantized model keeps its KV cache in f32: a cache of {} runs \
             on the suite's decoder (--kernels lab)",
            precision_name(kv)
        ),
    }
}

/// A cache's precision as the tables name it.
fn precision_name(dtype: DType) -> String {
    match dtype {
        DType::F32 => "fp32",
        DType::F16 => "fp16",
        DType::BF16 => "bf16",
        _ => "other",
    }
    .into()
}

/// A row as the result keeps it: measured, or failed with its error.
fn finished(name: String, kernels: Kernels, measured: Result<ScalingMeasured>) -> ScalingRow {
    let (status, error, measured) = match measured {
        Ok(m) => (RowStatus::Ok, None, Some(m)),
        Err(e) => {
            let why = crate::error::error_line(&e);
            crate::note!("scaling {name}: row failed, recorded with its error ({why})");
            (RowStatus::Error, Some(why), None)
        }
    };
    ScalingRow {
        precision: name,
        kernels: kernels.choice(),
        status,
        error,
        measured,
    }
}

/// The result of `rows`; (done, planned) says a run still going on.
fn results(
    (run, memory): (&Run, Option<u64>),
    rows: &[ScalingRow],
    (done, planned): (usize, usize),
) -> ScalingResults {
    let (source, cfg) = (&run.prepared.source, &run.prepared.config);
    let d = source.config();
    let mut notes = Vec::new();
    if done < planned {
        notes.push(format!(
            "partial: {done} of {planned} rows, saved as they finished; the run had not ended \
             when this file was written"
        ));
    }
    notes.extend(method_notes(source, cfg));
    notes.extend(run.kv_left_out.iter().cloned());
    ScalingResults {
        model: model_info(source),
        depths: run.axes.depths.clone(),
        pp_tokens: run.axes.pp_lengths.clone(),
        batches: run.axes.batches.clone(),
        tg_tokens: cfg.tg_tokens,
        batch_prompt_tokens: cfg.pp_tokens,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        seed: cfg.seed,
        kernels: cfg.kernels,
        ladder: None,
        kv_cache: [("fp32", 4), ("fp16", 2), ("bf16", 2)]
            .into_iter()
            .map(|(p, e)| KvCacheBytes {
                precision: p.into(),
                bytes_per_token: kv_bytes_per_token(d, e),
            })
            .collect(),
        device_memory_bytes: memory,
        rows: rows.to_vec(),
        notes,
    }
}

/// What every scaling file says of its method.
fn method_notes(source: &Source, cfg: &RowsConfig) -> Vec<String> {
    let mut notes = vec![
        "depth: the cache filled by an untimed pass of the prompt repeated to the depth (once a \
         depth: the deepest's is the depth check's pass from scratch), then each sample times \
         its tg test (and a pp test of the batch prompt's length) from that depth; the suite's \
         decoder rewinds its cache to the depth, candle's models are filled again before each \
         sample (untimed)"
            .to_string(),
        "batch: distinct made-up prompts of one length (--pp-tokens), filled untimed, then \
         --tokens steps of one forward over every sequence's next token, each picked greedily; \
         tokens/s is every sequence's together"
            .to_string(),
        format!(
            "bounds: memory = the ladder's read at the step's bytes (the weights once, the KV \
             cache its tokens attend to) x its tokens / those bytes (\"past-L3 cache\" where \
             that footprint, over twice the last cache, read over {}x memory's, and again \
             measured in turn with it: a cache the system does not report); compute = the row's compute peak / FLOPs per token \
             (projections, head, attention at the point's context); the lower binds",
            crate::schema::UNREPORTED_CACHE_RATIO
        ),
    ];
    if cfg.kernels != KernelChoice::Lab && source.config().arch.name() == "qwen3" {
        notes.push(
            "candle's Qwen 3 model decodes one sequence at a time on the CPU: its batch points \
             above 1 fail there"
                .into(),
        );
    }
    notes
}
