//! One row's points on the three axes, each timed under the run's plan and
//! held against its roofline, and the two checks that the points compute
//! what a plain run computes: each sequence of the largest batch gives the
//! greedy tokens it gives alone, and the first token after the deepest
//! cache is the one a pass over the whole context from scratch gives.
//!
//! The clock ([`crate::clock::time_with_setup`]) times a test alone: a
//! cache's fill is the setup step, off the clock. The suite's decoder
//! truncates its caches to a call's position, so its fill is made once a
//! depth (the deepest's is the depth check's own pass) and every sample of
//! the depth's points rewinds to it; candle-transformers' models cannot
//! rewind, so theirs is made again before each sample.

use anyhow::Result;
use candle_core::Device;

use crate::bench::lm::bounds::Bounds;
use crate::bench::lm::load::{pp_ids, Loaded};
use crate::bench::lm::{random_ids, Config as RowsConfig};
use crate::clock::time_with_setup;
use crate::memory::MemoryMeter;
use crate::model::cost::{flops_after, kv_read_bytes, matmul_flops_per_token};
use crate::model::{Config as ModelConfig, Lm};
use crate::schema::{Axis, Ridge, ScalingPoint, StepParts, Test, Timed, TokenOpClass};
use crate::telemetry::Telemetry;

use super::parts::{self, StepWork};
use super::Axes;

/// What the points of a run share.
pub(super) struct Ctx<'a> {
    pub device: &'a Device,
    pub cfg: &'a RowsConfig,
    pub telemetry: &'a Telemetry,
    pub bounds: &'a Bounds<'a>,
    /// The meter, and what the device held before the row's model.
    pub meter: (&'a MemoryMeter, Option<u64>),
}

/// What a row's bounds are made of.
pub(super) struct Row<'a> {
    pub d: &'a ModelConfig,
    pub weight_bytes_per_token: u64,
    /// Bytes of one element of the row's KV cache.
    pub kv_elem: u64,
    pub compute_gflop_per_s: f64,
    /// "scaling q4_1 (stored) (lab kernels)", for the progress bars.
    pub name: &'a str,
}

/// The checks' outcomes (null: not made), and the points left out.
pub(super) struct Checks {
    pub batch: Option<bool>,
    pub depth: Option<bool>,
    pub left_out: Vec<String>,
}

/// What a test is, for its bound: tokens a sample makes and a step's
/// tokens, the cache it reads, its FLOPs.
struct Work {
    axis: Axis,
    test: Test,
    depth: usize,
    pp_tokens: usize,
    batch: usize,
    /// Tokens one sample makes.
    tokens: usize,
    /// Tokens one step (one forward) makes, and the steps of a sample.
    per_step: usize,
    steps: usize,
    /// KV bytes a sample reads, all its steps together.
    kv_bytes: u64,
    /// FLOPs of a sample.
    flops: f64,
}

/// Every point of the row, in axis order, and the checks.
pub(super) fn all(
    ctx: &Ctx,
    row: &Row,
    axes: &Axes,
    lm: &mut Loaded,
) -> Result<(Vec<ScalingPoint>, Checks)> {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    let (n, p) = (ctx.cfg.tg_tokens, ctx.cfg.pp_tokens);
    let deepest = axes.depths.iter().copied().max().filter(|&d| d > 0);
    let mut depth_check = None;
    for &depth in &axes.depths {
        let fill = pp_ids(&ctx.cfg.prompt_ids, depth);
        // The cache's fill, once per depth where the model rewinds (the
        // deepest's is the depth check's pass, which leaves it filled);
        // `refill` is what a model that cannot rewind makes before each sample.
        let refill: &[u32] = match lm {
            Loaded::Decoder(_) => &[],
            Loaded::Candle(_) => &fill,
        };
        if Some(depth) == deepest {
            depth_check = Some(depth_matches(lm, ctx.cfg, depth)?);
        } else if refill.is_empty() && depth > 0 {
            lm.forward(&fill, 0)?;
        }
        let tg = tg_work(row, Axis::Depth, depth, 1, n);
        let start = [vec![ctx.cfg.start_token]];
        out.push(point(ctx, row, tg, lm, refill, &|lm| {
            decode(lm, &start, depth, n)
        })?);
        let pp = pp_work(row, Axis::Depth, depth, p);
        let ids = pp_ids(&ctx.cfg.prompt_ids, p);
        // A model that runs no prompt after cached tokens leaves the point
        // out, said; the row's other points stand.
        match point(ctx, row, pp, lm, refill, &|lm| pass(lm, &ids, depth)) {
            Ok(pt) => out.push(pt),
            Err(e) if depth > 0 && matches!(lm, Loaded::Candle(_)) => left_out.push(format!(
                "pp{p} at depth {depth} left out: {}",
                crate::error::error_line(&e)
            )),
            Err(e) => return Err(e),
        }
    }
    for &len in &axes.pp_lengths {
        let ids = pp_ids(&ctx.cfg.prompt_ids, len);
        let work = pp_work(row, Axis::Prompt, 0, len);
        out.push(point(ctx, row, work, lm, &[], &|lm| pass(lm, &ids, 0))?);
    }
    for &b in &axes.batches {
        let seqs = prompts(ctx.cfg, row.d.vocab, b);
        let work = tg_work(row, Axis::Batch, p, b, n);
        out.push(batch_point(ctx, row, work, lm, &seqs)?);
    }
    let checks = Checks {
        batch: match axes.batches.iter().max() {
            Some(&b) if b > 1 => Some(batch_matches(lm, &prompts(ctx.cfg, row.d.vocab, b), n)?),
            _ => None,
        },
        depth: depth_check,
        left_out,
    };
    Ok((out, checks))
}

/// `b` distinct made-up prompts of the run's batch prompt length.
fn prompts(cfg: &RowsConfig, vocab: usize, b: usize) -> Vec<Vec<u32>> {
    (0..b as u64)
        .map(|s| random_ids(cfg.pp_tokens, vocab, cfg.seed.wrapping_add(1 + s * 7919)))
        .collect()
}

/// One pass of `ids` at positions `pos..` (a pp test).
fn pass(lm: &mut Loaded, ids: &[u32], pos: usize) -> Result<Vec<Vec<u32>>> {
    lm.forward(ids, pos)?;
    Ok(Vec::new())
}

/// `n` greedy steps of every sequence from `start` (each sequence's first
/// token), at positions `pos..`: one forward over all of them a step.
fn decode(lm: &mut Loaded, start: &[Vec<u32>], pos: usize, n: usize) -> Result<Vec<Vec<u32>>> {
    let mut toks: Vec<Vec<u32>> = start.to_vec();
    let mut out = vec![Vec::with_capacity(n); start.len()];
    for i in 0..n {
        let logits = match toks.len() {
            1 => lm.forward(&toks[0], pos + i)?,
            _ => lm.forward_batch(&toks, pos + i)?,
        };
        let next = lm.pick_all(&logits)?;
        for (o, t) in out.iter_mut().zip(&next) {
            o.push(*t);
        }
        toks = next.into_iter().map(|t| vec![t]).collect();
    }
    Ok(out)
}

/// A tg test's work: `n` steps of `b` sequences after `depth` cached.
fn tg_work(row: &Row, axis: Axis, depth: usize, b: usize, n: usize) -> Work {
    let d = row.d;
    // Step i's query reads depth + i + 1 keys, in each sequence.
    let kv: u64 = (0..n as u64)
        .map(|i| kv_read_bytes(d, depth as u64 + i + 1, row.kv_elem))
        .sum();
    Work {
        axis,
        test: crate::schema::Test::Tg,
        depth,
        pp_tokens: 0,
        batch: b,
        tokens: b * n,
        per_step: b,
        steps: n,
        kv_bytes: kv * b as u64,
        flops: b as f64 * flops_after(d, depth as u64, n as u64, n as u64),
    }
}

/// A pp test's work: `p` tokens in one pass after `depth` cached.
fn pp_work(row: &Row, axis: Axis, depth: usize, p: usize) -> Work {
    let d = row.d;
    Work {
        axis,
        test: Test::Pp,
        depth,
        pp_tokens: p,
        batch: 1,
        tokens: p,
        per_step: p,
        steps: 1,
        // The pass reads the cache once and writes its own keys.
        kv_bytes: kv_read_bytes(d, (depth + p) as u64, row.kv_elem),
        flops: flops_after(d, depth as u64, p as u64, 1),
    }
}

/// A point: `test` timed on `lm`, whose cache holds the point's depth
/// already where it rewinds, and is filled with `refill` before each sample,
/// off the clock, where it cannot (candle's); its peak memory, its bounds.
fn point(
    ctx: &Ctx,
    row: &Row,
    w: Work,
    lm: &mut Loaded,
    refill: &[u32],
    test: &dyn Fn(&mut Loaded) -> Result<Vec<Vec<u32>>>,
) -> Result<ScalingPoint> {
    let label = format!("{} {}", row.name, name(&w));
    let lm = std::cell::RefCell::new(lm);
    let setup = || -> Result<()> {
        if !refill.is_empty() {
            lm.borrow_mut().forward(refill, 0)?;
        }
        Ok(())
    };
    let timed = timed(ctx, &label, setup, || test(&mut lm.borrow_mut()))?;
    let parts = match w.test {
        Test::Tg => step_parts(ctx, row, &w, lm.into_inner(), test, &timed.0)?,
        Test::Pp => None,
    };
    bounded(ctx, row, w, timed, parts)
}

/// A batch point: the sequences filled (once, or before each sample), then
/// their decode timed.
fn batch_point(
    ctx: &Ctx,
    row: &Row,
    w: Work,
    lm: &mut Loaded,
    seqs: &[Vec<u32>],
) -> Result<ScalingPoint> {
    let (n, p) = (ctx.cfg.tg_tokens, ctx.cfg.pp_tokens);
    let first = |lm: &mut Loaded| -> Result<Vec<Vec<u32>>> {
        let logits = lm.forward_batch(seqs, 0)?;
        Ok(lm.pick_all(&logits)?.into_iter().map(|t| vec![t]).collect())
    };
    let start = first(lm)?;
    let rewinds = matches!(lm, Loaded::Decoder(_));
    let label = format!("{} {}", row.name, name(&w));
    let lm = std::cell::RefCell::new(lm);
    let setup = || -> Result<()> {
        if !rewinds {
            first(&mut lm.borrow_mut())?;
        }
        Ok(())
    };
    let timed = timed(ctx, &label, setup, || {
        decode(&mut lm.borrow_mut(), &start, p, n)
    })?;
    let test = |lm: &mut Loaded| decode(lm, &start, p, n);
    let parts = step_parts(ctx, row, &w, lm.into_inner(), &test, &timed.0)?;
    bounded(ctx, row, w, timed, parts)
}

/// Where a step of the tg test `w` goes ([`parts::split`]): one more
/// sample of `test`, spanned.
fn step_parts(
    ctx: &Ctx,
    row: &Row,
    w: &Work,
    lm: &mut Loaded,
    test: &dyn Fn(&mut Loaded) -> Result<Vec<Vec<u32>>>,
    t: &Timed,
) -> Result<Option<StepParts>> {
    let work = StepWork {
        steps: w.steps,
        weights: row.weight_bytes_per_token,
        kv: w.kv_bytes / w.steps.max(1) as u64,
        matmul_flops: w.per_step as f64 * matmul_flops_per_token(row.d),
    };
    parts::split(ctx.device, lm, test, &work, t.rate_ms().0)
}

/// `work` timed under the run's plan with `setup` off the clock, the
/// meter's peak taken over it.
fn timed<R>(
    ctx: &Ctx,
    label: &str,
    setup: impl FnMut() -> Result<()>,
    work: impl FnMut() -> Result<R>,
) -> Result<(Timed, Option<u64>)> {
    let (meter, base) = ctx.meter;
    meter.reset_peak()?;
    let plan = ctx.cfg.plan;
    let t = ctx.telemetry.timed(|| {
        let bar = crate::clock::progress_bar(&plan.into(), label);
        let s = time_with_setup(ctx.device, plan, &bar, setup, work);
        bar.finish_and_clear();
        s
    })?;
    let peak = match (base, meter.peak_bytes()?) {
        (Some(b), Some(p)) => Some(p.saturating_sub(b)),
        _ => None,
    };
    Ok((t, peak))
}

/// "tg32 @ d2048", as [`ScalingPoint::name`] says it.
fn name(w: &Work) -> String {
    match w.test {
        Test::Pp => format!("pp{} @ d{}", w.pp_tokens, w.depth),
        Test::Tg => format!("tg{} x b{} @ d{}", w.steps, w.batch, w.depth),
    }
}

/// The point of `w` timed as `t`, against min(memory, compute).
fn bounded(
    ctx: &Ctx,
    row: &Row,
    w: Work,
    (t, peak): (Timed, Option<u64>),
    step_parts: Option<StepParts>,
) -> Result<ScalingPoint> {
    let (ms, _) = t.rate_ms();
    let samples = t.samples_ms();
    let rate = |ms: f64| w.tokens as f64 / (ms * 1e-3);
    let slowest = samples.iter().copied().fold(ms, f64::max);
    let fastest = samples.iter().copied().fold(ms, f64::min);
    // A step reads the weights once and its share of the cache.
    let step_bytes = row.weight_bytes_per_token + w.kv_bytes / w.steps.max(1) as u64;
    let memory = ctx.bounds.tg(step_bytes)?.bound;
    let memory_tps = memory.gb_per_s * 1e9 * w.per_step as f64 / step_bytes as f64;
    let flops_per_token = w.flops / w.tokens as f64;
    let compute_tps = row.compute_gflop_per_s * 1e9 / flops_per_token;
    let (bound, by) = bind(memory_tps, compute_tps, &memory.level);
    let tps = rate(ms);
    Ok(ScalingPoint {
        axis: w.axis,
        test: w.test,
        depth: w.depth,
        pp_tokens: w.pp_tokens,
        batch: w.batch,
        tokens: w.tokens,
        tokens_per_s: tps,
        tokens_per_s_min: rate(slowest),
        tokens_per_s_max: rate(fastest),
        per_sequence_tokens_per_s: tps / w.batch as f64,
        bytes_per_step: step_bytes,
        tokens_per_step: w.per_step,
        flops_per_token,
        memory,
        memory_bound_tokens_per_s: memory_tps,
        compute_bound_tokens_per_s: compute_tps,
        bound_tokens_per_s: bound,
        bound_by: by,
        pct_of_bound: 100.0 * tps / bound,
        peak_bytes: peak,
        timed: t,
        step_parts,
    })
}

/// The lower of a point's memory and compute bounds (tokens/s) and its name.
fn bind(memory_tps: f64, compute_tps: f64, level: &str) -> (f64, String) {
    match memory_tps <= compute_tps {
        true => (memory_tps, format!("memory ({level})")),
        false => (compute_tps, "compute".to_string()),
    }
}

/// Every point's compute bound at a new ceiling (`gflop_per_s`), and the
/// lower bound, its name and the point's share of it with it.
pub(super) fn rebound(points: &mut [ScalingPoint], gflop_per_s: f64) {
    for p in points {
        p.compute_bound_tokens_per_s = gflop_per_s * 1e9 / p.flops_per_token;
        let (bound, by) = bind(
            p.memory_bound_tokens_per_s,
            p.compute_bound_tokens_per_s,
            &p.memory.level,
        );
        (p.bound_tokens_per_s, p.bound_by) = (bound, by);
        p.pct_of_bound = 100.0 * p.tokens_per_s / bound;
    }
}

/// The highest rate the row's matmuls ran at inside a timed step (the
/// spans of [`step_parts`]), GFLOP/s: what its compute ceiling cannot be under.
pub(super) fn matmuls_in_steps(points: &[ScalingPoint]) -> f64 {
    points
        .iter()
        .filter_map(|p| p.step_parts.as_ref())
        .flat_map(|s| &s.parts)
        .filter(|part| part.class == TokenOpClass::Matmuls)
        .filter_map(|part| part.gflop_per_s)
        .fold(0.0, f64::max)
}

/// Each of the first four sequences of a batch of `b` gives, decoded alone,
/// the greedy tokens it gave in the batch.
fn batch_matches(lm: &mut Loaded, seqs: &[Vec<u32>], n: usize) -> Result<bool> {
    let p = seqs[0].len();
    let logits = lm.forward_batch(seqs, 0)?;
    let first = lm.pick_all(&logits)?;
    let start: Vec<Vec<u32>> = first.iter().map(|&t| vec![t]).collect();
    let together = decode(lm, &start, p, n)?;
    for (s, seq) in seqs.iter().enumerate().take(4) {
        let logits = lm.forward(seq, 0)?;
        let t = lm.pick(&logits)?;
        let alone = decode(lm, &[vec![t]], p, n)?;
        if t != first[s] || alone[0] != together[s] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The token after the prompt repeated to `depth` and the start token, from
/// scratch (one pass) and from the cache (the depth filled, then one step).
/// The suite's decoder steps from the scratch pass's own cache, rewound to
/// `depth`, and is left holding the depth's fill for the points: the check
/// holds the cache the deepest depth's points run on (a pass of exactly
/// `depth` tokens, the shallower depths' fill, it does not check). Candle's
/// model, which cannot rewind, is filled again first.
fn depth_matches(lm: &mut Loaded, cfg: &RowsConfig, depth: usize) -> Result<bool> {
    let mut ids = pp_ids(&cfg.prompt_ids, depth);
    ids.push(cfg.start_token);
    let logits = lm.forward(&ids, 0)?;
    let scratch = lm.pick(&logits)?;
    if matches!(lm, Loaded::Candle(_)) {
        lm.forward(&ids[..depth], 0)?;
    }
    let logits = lm.forward(&[cfg.start_token], depth)?;
    let cached = lm.pick(&logits)?;
    Ok(cached == scratch)
}

/// The batch axis' ridge: the predicted batch where batch 1's memory bound,
/// grown with B, meets the compute bound, and the measured knee where batch
/// 1's rate, grown so, meets the best rate measured.
pub(super) fn ridge(points: &[ScalingPoint]) -> Option<Ridge> {
    let batch: Vec<&ScalingPoint> = points.iter().filter(|p| p.axis == Axis::Batch).collect();
    let one = batch.iter().find(|p| p.batch == 1)?;
    let best = batch
        .iter()
        .max_by(|a, b| a.tokens_per_s.total_cmp(&b.tokens_per_s))?;
    Some(Ridge {
        predicted_batch: one.compute_bound_tokens_per_s / one.memory_bound_tokens_per_s,
        measured_knee_batch: best.tokens_per_s / one.tokens_per_s,
        best_tokens_per_s: best.tokens_per_s,
        best_batch: best.batch,
        best_pct_of_compute: 100.0 * best.tokens_per_s / best.compute_bound_tokens_per_s,
    })
}
