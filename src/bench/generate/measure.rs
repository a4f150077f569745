//! One row measured, llama-bench's way (llama.cpp `tools/llama-bench`): a pp
//! test is `pp_tokens` tokens in one forward pass from an empty cache, a tg
//! test `tg_tokens` forward passes of one token from an empty cache, and each
//! reports tokens / seconds; llama-bench repeats each test (`-r`, 5) and
//! prints the mean and standard deviation of the tokens/s, where this suite's
//! clock takes warm-up runs, then the median of its samples with their spread
//! (the min and max tokens/s are kept beside it). Unlike llama-bench, whose tg
//! feeds random tokens and samples nothing, each tg step here picks the next
//! token greedily from the last logits (the sampling is part of a token, and
//! timed among the parts). Time to first token is the formatted prompt's pp
//! and the pick of its first token.

use anyhow::{Context, Result};
use candle_core::Device;

use super::parts::{self, Mats};
use super::{Config, RowKind};
use crate::bench::gemm_mode::GemmMode;
use crate::bench::lm::bounds::{Bounds, Peak};
use crate::bench::lm::load::{load_at, row_bytes, Loaded, Rowed};
use crate::memory::MemoryMeter;
use crate::model::candle::{self};
use crate::model::cost::{pp_flops, pp_matmul_flops};
use crate::model::layer::Kernels;
use crate::model::quantize::Gguf;
use crate::model::text::Text;
use crate::model::weights::Weights;
use crate::model::{answer, Config as ModelConfig, Lm};
use crate::precision::Precision;
use crate::schema::{
    Answer, GenerateMeasured, GenerateRow, KernelChoice, ModelPath, RatioInterval, Timed, VsFp32,
    LAB_SUFFIX,
};
use crate::telemetry::Telemetry;

/// tokens/s of the median, slowest and fastest sample of `t`, `tokens` a sample.
fn rates(t: &Timed, tokens: usize) -> (f64, f64, f64) {
    let (ms, _) = t.rate_ms();
    let samples = t.samples_ms();
    let r = |ms: f64| tokens as f64 / (ms * 1e-3);
    let max_ms = samples.iter().copied().fold(ms, f64::max);
    let min_ms = samples.iter().copied().fold(ms, f64::min);
    (r(ms), r(max_ms), r(min_ms))
}

/// A row's model loaded on `device` with caches of `cfg`'s positions
/// ([`crate::bench::lm::load::load_at`]), timed and said.
pub(super) fn load(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    rowed: Rowed<'_>,
    label: &str,
) -> Result<Loaded> {
    let positions = cfg.pp_tokens.max(cfg.prompt_ids.len() + cfg.tg_tokens);
    load_at(
        device,
        weights,
        positions,
        rowed,
        &format!("generate {label}"),
    )
}

/// What a row's timed tests start from: its model loaded, its answer given
/// and its time to first token measured.
pub(super) struct Started {
    pub(super) lm: Loaded,
    kind: RowKind,
    kernels: Kernels,
    label: String,
    pub(super) precision: Precision,
    answer: Answer,
    ttft: Timed,
    weight_bytes: u64,
    weight_bytes_per_token: u64,
}

/// One row's start: its model loaded, `meter`'s peak reset (the row's peak
/// leaves the load out, not the answer), the greedy answer, time to first
/// token.
pub(super) fn start(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    (kind, kernels, gguf): Rowed<'_>,
    label: &str,
    (text, telemetry, meter): (Option<&Text>, &Telemetry, &MemoryMeter),
) -> Result<Started> {
    let precision = match kind {
        RowKind::Float(p) => p,
        RowKind::Quantized(_) => Precision::F32,
    };
    let _mode = GemmMode::set(precision);
    let mut lm = load(device, weights, cfg, (kind, kernels, gguf), label)?;
    meter.reset_peak()?;
    let (weight_bytes, weight_bytes_per_token) = row_bytes(weights, kind)?;
    crate::note!("generate {label}: the answer ({} tokens)", cfg.tg_tokens);
    let (ids, stopped) = answer(&mut lm, &cfg.prompt_ids, cfg.tg_tokens, &cfg.eos)?;
    let text = text.map(|t| t.decode(&ids)).transpose()?;
    let prompt = cfg.prompt_ids.clone();
    let ttft = telemetry.time(device, cfg.plan, &format!("{label} ttft"), || {
        let logits = lm.forward(&prompt, 0)?;
        lm.pick(&logits)
    })?;
    Ok(Started {
        lm,
        kind,
        kernels,
        label: label.to_string(),
        precision,
        answer: Answer {
            token_ids: ids,
            text,
            differs_from_fp32_at: None,
            stopped_at_eos: stopped,
        },
        ttft,
        weight_bytes,
        weight_bytes_per_token,
    })
}

/// One pp test on `lm`: `cfg.pp_tokens` tokens in one pass from an empty cache.
pub(super) fn pp_test(lm: &mut Loaded, cfg: &Config, pp_in: &[u32]) -> Result<()> {
    let _ = cfg;
    lm.forward(pp_in, 0)?;
    Ok(())
}

/// One tg test on `lm`: `cfg.tg_tokens` passes of one token, each picked.
pub(super) fn tg_test(lm: &mut Loaded, cfg: &Config) -> Result<()> {
    let mut tok = cfg.start_token;
    for pos in 0..cfg.tg_tokens {
        let logits = lm.forward(&[tok], pos)?;
        tok = lm.pick(&logits)?;
    }
    Ok(())
}

/// The peak memory above `base` since the meter's last reset, where the
/// device can say.
pub(super) fn peak(meter: &MemoryMeter, base: Option<u64>) -> Result<Option<u64>> {
    Ok(match (base, meter.peak_bytes()?) {
        (Some(base), Some(peak)) => Some(peak.saturating_sub(base)),
        _ => None,
    })
}

/// A row's measurement from its start and its pp and tg tests: the parts,
/// the matmuls alone, the bounds and the roofline.
pub(super) fn finish(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    s: Started,
    (pp, tg, peak_bytes): (Timed, Timed, Option<u64>),
    (gguf, telemetry, bounds): (Option<&Gguf>, &Telemetry, &Bounds),
) -> Result<GenerateMeasured> {
    let d = weights.config().clone();
    let _mode = GemmMode::set(s.precision);
    let weight_bytes_per_token = s.weight_bytes_per_token;
    let tg_ms = tg.rate_ms().0 / cfg.tg_tokens as f64;
    let split = split(
        (device, cfg, &d),
        (s.lm, gguf),
        (s.kind, s.kernels),
        (telemetry, s.label.as_str()),
        tg_ms,
    )?;
    let (matmuls_pp, parts) = (&split.matmuls_pp, &split.parts);
    let parts_sum_ms: f64 = parts.iter().map(|p| p.ms_per_token).sum();

    let (pp_tps, pp_min, pp_max) = rates(&pp, cfg.pp_tokens);
    let (tg_tps, tg_min, tg_max) = rates(&tg, cfg.tg_tokens);
    let (flops, pp_gflop, mm_gflop) = pp_rates(&d, cfg.pp_tokens, &pp, matmuls_pp);
    let tg_bound = bounds.tg(weight_bytes_per_token)?;
    let pct = 100.0 * tg_tps / tg_bound.tokens_per_s;
    // pp reads the weights once (the least it can move): its intensity.
    let roofline = bounds.pp_roofline(
        (Peak::of_row(weights, s.kind, s.kernels)?, d.hidden),
        (flops, weight_bytes_per_token),
        &tg_bound.bound,
        (pp_gflop, mm_gflop),
    )?;
    let h = host(parts, bounds.op_cost()?.per_call_us, &tg, cfg.tg_tokens);
    let held_back_by = held_back(
        pct,
        (&tg, &split.matmuls_tg),
        parts,
        (tg_ms, weight_bytes_per_token, split.overhead),
        (&tg_bound.bound, h.ops.zip(h.floor_ms), device.is_cuda()),
    );
    Ok(GenerateMeasured {
        answer: s.answer,
        ttft: s.ttft,
        pp,
        pp_tokens_per_s: pp_tps,
        pp_tokens_per_s_min: pp_min,
        pp_tokens_per_s_max: pp_max,
        tg,
        tg_tokens_per_s: tg_tps,
        tg_tokens_per_s_min: tg_min,
        tg_tokens_per_s_max: tg_max,
        weight_bytes: s.weight_bytes,
        weight_bytes_per_token,
        tg_bound_tokens_per_s: Some(tg_bound.tokens_per_s),
        tg_pct_of_bound: Some(pct),
        tg_bound_dram_tokens_per_s: Some(tg_bound.dram_tokens_per_s),
        tg_bound: Some(tg_bound.bound),
        pp_flops: flops,
        pp_gflop_per_s: pp_gflop,
        matmuls_pp: split.matmuls_pp,
        matmuls_pp_gflop_per_s: mm_gflop,
        pp_vs_matmuls_alone_pct: 100.0 * pp_gflop / mm_gflop,
        pp_roofline: Some(roofline),
        matmuls_tg: split.matmuls_tg,
        peak_bytes,
        parts: split.parts,
        parts_sum_ms: Some(parts_sum_ms),
        parts_in_pass: split.overhead.is_some(),
        parts_remainder_ms: Some(split.remainder),
        parts_overhead_ms: split.overhead,
        ops_per_token: h.ops,
        host_floor_ms: h.floor_ms,
        hand_offs_per_token: h.hand_offs,
        held_back_by,
        vs_fp32: None,
        fp32_beside: None,
    })
}

/// What a token asks of the host: its ops (its parts' calls), the floor
/// they set, and the suite's kernels' hand-offs to the CPU pool.
struct Host {
    ops: Option<usize>,
    floor_ms: Option<f64>,
    hand_offs: Option<f64>,
}

/// A row's [`Host`], at `op_us` an op, the hand-offs over tg's samples of
/// `tokens`.
fn host(parts: &[crate::schema::TokenPart], op_us: f64, tg: &Timed, tokens: usize) -> Host {
    let ops = (!parts.is_empty()).then(|| parts.iter().map(|p| p.calls).sum::<usize>());
    let generated = (tg.samples_ms().len() * tokens).max(1) as f64;
    let hand_offs = tg.availability.as_ref().and_then(|a| a.hand_offs);
    Host {
        ops,
        floor_ms: ops.map(|n| n as f64 * op_us * 1e-3),
        hand_offs: hand_offs.map(|h| h as f64 / generated),
    }
}

/// pp's FLOPs over `tokens`, its GFLOP/s, and its matmuls' alone.
fn pp_rates(d: &ModelConfig, tokens: usize, pp: &Timed, matmuls_pp: &Timed) -> (f64, f64, f64) {
    let flops = pp_flops(d, tokens as u64);
    let pp_gflop = flops / (pp.rate_ms().0 * 1e-3) / 1e9;
    let mm_flops = pp_matmul_flops(d, tokens as u64);
    (
        flops,
        pp_gflop,
        mm_flops / (matmuls_pp.rate_ms().0 * 1e-3) / 1e9,
    )
}

/// The matmuls alone at pp and at tg, and where a token's time goes: its
/// parts, what they leave of the token, and the spans' cost when they were
/// timed inside the pass.
struct Split {
    matmuls_pp: Timed,
    matmuls_tg: Timed,
    parts: Vec<crate::schema::TokenPart>,
    remainder: f64,
    overhead: Option<f64>,
}

/// A row's [`Split`]. The parts inside the real pass: tg runs of their own
/// with every op in a span (the float path and the suite's quantized path
/// are this suite's code); candle-transformers' model has no seam, so its
/// parts are timed alone, from the row's own weights, and the remainder is
/// what they leave of the token (`tg_ms`).
fn split(
    (device, cfg, d): (&Device, &Config, &ModelConfig),
    (mut lm, gguf): (Loaded, Option<&Gguf>),
    (kind, kernels): (RowKind, Kernels),
    (telemetry, label): (&Telemetry, &str),
    tg_ms: f64,
) -> Result<Split> {
    let in_pass = match &mut lm {
        Loaded::Decoder(f) => Some(parts::in_pass(f, cfg, telemetry, tg_ms)?),
        Loaded::Candle(_) => None,
    };
    // quantized_llama rotates interleaved pairs (a Llama file's permuted
    // rows); the suite's decoder, and candle's other models, halves.
    let interleaved = matches!(lm, Loaded::Candle(..)) && d.arch.features().permuted_qk;
    let mats = mats_of(lm, gguf, device)?;
    let act = match kind {
        RowKind::Quantized(_) => candle_core::DType::F32,
        RowKind::Float(p) => p.dtype(),
    };
    let shapes = parts::Shapes::new(d, act, device, cfg.seed, cfg.pp_tokens, cfg.tg_tokens)?;
    let matmuls_pp = parts::matmuls(&mats, &shapes, true, telemetry, cfg.plan, label)?;
    let matmuls_tg = parts::matmuls(&mats, &shapes, false, telemetry, cfg.plan, label)?;
    let (parts, remainder, overhead) = match in_pass {
        Some(p) => (p.parts, p.remainder_ms, Some(p.overhead_ms)),
        None => {
            let parts = parts::token_parts(
                d,
                &shapes,
                &matmuls_tg,
                (interleaved, kernels),
                telemetry,
                cfg.plan,
                label,
            )?;
            let sum: f64 = parts.iter().map(|p| p.ms_per_token).sum();
            (parts, tg_ms - sum, None)
        }
    };
    Ok(Split {
        matmuls_pp,
        matmuls_tg,
        parts,
        remainder,
        overhead,
    })
}

/// The row's weights as the matmuls-alone and op-class timings take them:
/// the suite's decoder itself, or for candle-transformers' quantized model
/// (whose matmuls are private to it) the same blocks read again from the
/// row's GGUF, once the model is gone.
fn mats_of(lm: Loaded, gguf: Option<&Gguf>, device: &Device) -> Result<Mats> {
    Ok(match lm {
        Loaded::Decoder(f) => Mats::Decoder(f),
        Loaded::Candle(q) => {
            drop(q);
            let gguf = gguf.context("a quantized row without its GGUF")?;
            let (layers, head) = candle::matmuls(gguf, device)?;
            Mats::Candle { layers, head }
        }
    })
}

/// What holds a row back, said where it reaches under half its bound or
/// leaves threads idle: the idle threads (and why, when the matmuls alone
/// leave them idle too), then the part that costs most against its own
/// bound ([`parts::held_back_by`]; the ops first where their host floor,
/// `ops`, is over the bandwidth's).
fn held_back(
    pct: f64,
    (tg, matmuls_tg): (&Timed, &Timed),
    parts: &[crate::schema::TokenPart],
    (tg_ms, bytes_per_token, spans_ms): (f64, u64, Option<f64>),
    (bound, ops, on_gpu): (&crate::schema::Bound, Option<(usize, f64)>, bool),
) -> Option<String> {
    let idle = tg.availability.as_ref().and_then(|a| a.idle_threads());
    (pct < 50.0 || idle.is_some()).then(|| {
        let matmuls_idle = matmuls_tg
            .availability
            .as_ref()
            .and_then(|a| a.idle_threads());
        // Parts whose spans cost over a tenth of the token name no class.
        let why = crate::schema::spans_too_costly(spans_ms, tg_ms)
            .unwrap_or_else(|| parts::held_back_by(parts, tg_ms, bytes_per_token, bound));
        let why = match ops.and_then(|o| parts::op_bound(o, tg_ms, bytes_per_token, bound, on_gpu))
        {
            Some(floor) => format!("{floor}; {why}"),
            None => why,
        };
        match (idle, matmuls_idle) {
            (Some(t), Some(_)) => {
                format!("{t}: the matmuls at one token run single-threaded; {why}")
            }
            (Some(t), None) => format!("{t}; {why}"),
            (None, _) => why,
        }
    })
}

/// Each row against fp32's: speedups, and where its answer parts from fp32's.
/// A row is held against the fp32 row of its own kernels (a lab row against
/// "fp32 (lab kernels)", the others against "fp32"), else the other one, so
/// that a speedup changes one thing at a time where the run allows it.
pub fn fill_vs_fp32(rows: &mut [GenerateRow]) {
    let fp32 = |k: KernelChoice| {
        rows.iter()
            .find(|r| r.kernels == k && r.path == ModelPath::Float && is_fp32(&r.precision))
            .and_then(|r| Some((r.precision.clone(), r.measured.clone()?)))
    };
    let (candle, lab) = (fp32(KernelChoice::Candle), fp32(KernelChoice::Lab));
    let ms = |t: &Timed| t.rate_ms().0;
    for row in rows.iter_mut() {
        let base = match row.kernels {
            KernelChoice::Lab => lab.as_ref().or(candle.as_ref()),
            _ => candle.as_ref().or(lab.as_ref()),
        };
        let (Some((name, fp32)), Some(m)) = (base, row.measured.as_mut()) else {
            continue;
        };
        // pp and tg against the fp32 model timed in turn with this row's
        // tests where the run held one (`fp32_beside`), else fp32's own row.
        let (against, pp, tg, side_by_side) = match &m.fp32_beside {
            Some(b) => (b.against.clone(), &b.pp, &b.tg, true),
            None => (name.clone(), &fp32.pp, &fp32.tg, false),
        };
        let interval =
            |base: &Timed, row: &Timed| RatioInterval::of(row.samples_ms(), base.samples_ms());
        m.vs_fp32 = Some(VsFp32 {
            against: Some(against),
            matmuls_pp: ms(&fp32.matmuls_pp) / ms(&m.matmuls_pp),
            matmuls_tg: ms(&fp32.matmuls_tg) / ms(&m.matmuls_tg),
            pp: ms(pp) / ms(&m.pp),
            tg: ms(tg) / ms(&m.tg),
            side_by_side,
            pp_interval: side_by_side.then(|| interval(pp, &m.pp)).flatten(),
            tg_interval: side_by_side.then(|| interval(tg, &m.tg)).flatten(),
        });
        let (a, b) = (&m.answer.token_ids, &fp32.answer.token_ids);
        m.answer.differs_from_fp32_at = a
            .iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())));
    }
}

/// "fp32" or "fp32 (lab kernels)".
fn is_fp32(label: &str) -> bool {
    label.strip_suffix(LAB_SUFFIX).unwrap_or(label) == "fp32"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::RowStatus;

    /// A measured row of `kind` whose pp and tg take `ms`.
    fn row(precision: &str, kernels: KernelChoice, ms: f64) -> GenerateRow {
        let t = crate::telemetry::timed_at(&[ms; 3], &[]);
        let measured: GenerateMeasured = serde_json::from_value(serde_json::json!({
            "answer": {"token_ids": [1, 2], "text": null, "differs_from_fp32_at": null,
                       "stopped_at_eos": false},
            "ttft": t, "pp": t, "pp_tokens_per_s": 1.0, "pp_tokens_per_s_min": 1.0,
            "pp_tokens_per_s_max": 1.0, "tg": t, "tg_tokens_per_s": 1.0,
            "tg_tokens_per_s_min": 1.0, "tg_tokens_per_s_max": 1.0, "weight_bytes": 1,
            "weight_bytes_per_token": 1, "tg_bound_tokens_per_s": null, "tg_pct_of_bound": null,
            "pp_flops": 1.0, "pp_gflop_per_s": 1.0, "matmuls_pp": t,
            "matmuls_pp_gflop_per_s": 1.0, "pp_vs_matmuls_alone_pct": 1.0, "matmuls_tg": t,
            "peak_bytes": null, "parts": [], "parts_sum_ms": null, "held_back_by": null,
            "vs_fp32": null
        }))
        .unwrap();
        let path = match precision.starts_with('q') {
            true => ModelPath::Quantized,
            false => ModelPath::Float,
        };
        GenerateRow {
            precision: precision.into(),
            path,
            kernels,
            status: RowStatus::Ok,
            error: None,
            measured: Some(measured),
        }
    }

    #[test]
    fn each_row_is_held_against_the_fp32_of_its_own_kernels() {
        use KernelChoice::{Candle, Lab};
        let lab = |p: &str| format!("{p}{LAB_SUFFIX}");
        let mut rows = vec![
            row("q8_0", Candle, 5.0),
            row("fp32", Candle, 10.0),
            row(&lab("fp32"), Lab, 8.0),
            row("fp16", Candle, 4.0),
            row(&lab("fp16"), Lab, 2.0),
        ];
        fill_vs_fp32(&mut rows);
        let vs = |i: usize| rows[i].measured.as_ref().unwrap().vs_fp32.clone().unwrap();
        let want = [
            ("fp32", 2.0),
            ("fp32", 1.0),
            (lab("fp32").as_str(), 1.0),
            ("fp32", 2.5),
            (lab("fp32").as_str(), 4.0),
        ]
        .map(|(a, x)| (a.to_string(), x));
        for (i, (against, pp)) in want.iter().enumerate() {
            assert_eq!(vs(i).against.as_deref(), Some(against.as_str()), "row {i}");
            assert!((vs(i).pp - pp).abs() < 1e-12, "row {i}: {}", vs(i).pp);
        }
        // --kernels lab: the quantized row (candle's) against the only fp32 there is.
        let mut rows = vec![row("q8_0", Candle, 5.0), row(&lab("fp32"), Lab, 10.0)];
        fill_vs_fp32(&mut rows);
        assert_eq!(
            rows[0]
                .measured
                .as_ref()
                .unwrap()
                .vs_fp32
                .as_ref()
                .unwrap()
                .against,
            Some(lab("fp32"))
        );
    }
}
