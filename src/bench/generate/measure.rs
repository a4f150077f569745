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

use std::collections::HashMap;

use anyhow::Result;
use candle_core::quantized::GgmlDType;
use candle_core::{Device, Tensor};

use super::parts::{self, Mats};
use super::pick;
use super::weights::Source;
use super::{float, quantized, text::Text, Config, Lm, RowKind};
use crate::bench::block::model::Kernels;
use crate::bench::decoder::{pp_flops, pp_matmul_flops, tg_bound_tokens_per_s};
use crate::bench::gemm_mode::GemmMode;
use crate::formulas::{copy_traffic, gb_per_s};
use crate::memory::MemoryMeter;
use crate::precision::Precision;
use crate::schema::{
    Answer, GenerateMeasured, GenerateResults, GenerateRow, KernelChoice, ModelPath, RowStatus,
    Timed, VsFp32, LAB_SUFFIX,
};
use crate::telemetry::Telemetry;

/// A row's model, either path.
enum Loaded {
    Quantized(quantized::QuantizedLm, GgmlDType),
    Float(float::FloatLm),
}

impl Lm for Loaded {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        match self {
            Self::Quantized(m, _) => m.forward(tokens, pos),
            Self::Float(m) => m.forward(tokens, pos),
        }
    }

    fn device(&self) -> &Device {
        match self {
            Self::Quantized(m, _) => m.device(),
            Self::Float(m) => m.device(),
        }
    }
}

/// The greedy answer to `prompt`: up to `n` new tokens, ending at an EOS.
pub fn answer(lm: &mut dyn Lm, prompt: &[u32], n: usize, eos: &[u32]) -> Result<(Vec<u32>, bool)> {
    let mut out = Vec::with_capacity(n);
    let mut next = pick(&lm.forward(prompt, 0)?)?;
    for i in 0..n {
        out.push(next);
        if eos.contains(&next) {
            return Ok((out, true));
        }
        if i + 1 < n {
            next = pick(&lm.forward(&[next], prompt.len() + i)?)?;
        }
    }
    Ok((out, false))
}

/// The ids of a pp test: the prompt's, repeated to `n`.
fn pp_ids(prompt: &[u32], n: usize) -> Vec<u32> {
    prompt.iter().copied().cycle().take(n).collect()
}

/// tokens/s of the median, slowest and fastest sample of `t`, `tokens` a sample.
fn rates(t: &Timed, tokens: usize) -> (f64, f64, f64) {
    let (ms, _) = t.rate_ms();
    let samples = if t.samples_gpu_ms.is_empty() {
        &t.samples_wall_ms
    } else {
        &t.samples_gpu_ms
    };
    let r = |ms: f64| tokens as f64 / (ms * 1e-3);
    let max_ms = samples.iter().copied().fold(ms, f64::max);
    let min_ms = samples.iter().copied().fold(ms, f64::min);
    (r(ms), r(max_ms), r(min_ms))
}

pub fn run(
    device: &Device,
    source: &Source,
    cfg: &Config,
    text: Option<&Text>,
    telemetry: &Telemetry,
) -> Result<GenerateResults> {
    // The copy over at least the largest row's bytes per token (so no cache
    // holds it), as `memory` measures it.
    let largest = cfg
        .rows
        .iter()
        .map(|r| row_bytes(source, *r).map(|(_, t)| t).unwrap_or(0))
        .max()
        .unwrap_or(0);
    let copy_bytes = largest.clamp(32 << 20, 1 << 30);
    let (_, _, copy) = crate::bench::memory::ceiling(device, copy_bytes, cfg.plan, telemetry)?;
    let copy_gb_per_s = gb_per_s(copy_traffic(copy_bytes).bytes_moved(), copy.rate_ms().0);
    let mut rows = Vec::new();
    for (kind, kernels) in runs(&cfg.rows, cfg.kernels) {
        let label = match kernels {
            Kernels::Lab => format!("{}{LAB_SUFFIX}", kind.label(source)),
            _ => kind.label(source),
        };
        crate::note!("generate {label}: loading");
        let path = match kind {
            RowKind::Quantized(_) => ModelPath::Quantized,
            RowKind::Float(_) => ModelPath::Float,
        };
        let choice = match kernels {
            Kernels::Lab => KernelChoice::Lab,
            _ => KernelChoice::Candle,
        };
        let rowed = row(
            device,
            source,
            cfg,
            (kind, kernels),
            &label,
            text,
            telemetry,
            copy_gb_per_s,
        );
        let row = match rowed {
            Ok(m) => GenerateRow {
                precision: label,
                path,
                kernels: choice,
                status: RowStatus::Ok,
                error: None,
                measured: Some(m),
            },
            Err(e) => {
                let why = crate::error::error_line(&e);
                crate::note!("generate {label}: row failed, recorded with its error ({why})");
                GenerateRow {
                    precision: label,
                    path,
                    kernels: choice,
                    status: RowStatus::Error,
                    error: Some(why),
                    measured: None,
                }
            }
        };
        rows.push(row);
    }
    fill_vs_fp32(&mut rows);
    let mut notes = Vec::new();
    if cfg.kernels != KernelChoice::Candle
        && cfg.rows.iter().any(|r| matches!(r, RowKind::Quantized(_)))
    {
        notes.push(
            "--kernels: a quantized row with the suite's kernels is the float path's layers \
             with the GGUF blocks as stored, multiplied by the suite's quantized kernels \
             (kernels::QLinear); a quantized row with Candle's is candle-transformers' \
             quantized_llama (QMatMul)"
                .into(),
        );
    }
    if device.is_cuda() {
        notes.push(
            "kernel launches per token: not counted (Candle exposes no launch counter, and \
             CUDA's profiling API is not linked)"
                .into(),
        );
    }
    Ok(GenerateResults {
        model: super::model_info(source),
        prompt: cfg.prompt.clone(),
        pp_tokens: cfg.pp_tokens,
        tg_tokens: cfg.tg_tokens,
        warmup: cfg.plan.warmup,
        iters: cfg.plan.iters,
        seed: cfg.seed,
        copy_gb_per_s: Some(copy_gb_per_s),
        copy_bytes,
        kernels: cfg.kernels,
        rows,
        notes,
    })
}

/// What the run times, in order: each row with candle's kernels, or with the
/// suite's (`lab`), or (`both`) each row with candle's and then with the
/// suite's. A quantized row with the suite's kernels is its own model path
/// ([`float::FloatLm::load_quantized`]); with candle's, quantized_llama.
fn runs(rows: &[RowKind], choice: KernelChoice) -> Vec<(RowKind, Kernels)> {
    let mut out = Vec::new();
    for &kind in rows {
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

/// (bytes held, bytes per token) of a row.
fn row_bytes(source: &Source, kind: RowKind) -> Result<(u64, u64)> {
    let d = source.dims();
    Ok(match kind {
        RowKind::Quantized(t) => quantized::bytes(d, &quantized::row_types(source, t)?),
        RowKind::Float(p) => float::bytes(d, p.dtype()),
    })
}

fn types(source: &Source, t: GgmlDType) -> Result<HashMap<String, GgmlDType>> {
    quantized::row_types(source, t)
}

#[allow(clippy::too_many_arguments)]
fn row(
    device: &Device,
    source: &Source,
    cfg: &Config,
    (kind, kernels): (RowKind, Kernels),
    label: &str,
    text: Option<&Text>,
    telemetry: &Telemetry,
    copy_gb_per_s: f64,
) -> Result<GenerateMeasured> {
    let d = source.dims().clone();
    let precision = match kind {
        RowKind::Float(p) => p,
        RowKind::Quantized(_) => Precision::F32,
    };
    let _mode = GemmMode::set(precision);
    let meter = MemoryMeter::for_device(device)?;
    let base = meter.used_bytes()?;
    let positions = cfg.pp_tokens.max(cfg.prompt_ids.len() + cfg.tg_tokens);
    let mut lm = match (kind, kernels) {
        (RowKind::Quantized(t), Kernels::Lab) => {
            let types = types(source, t)?;
            Loaded::Float(float::FloatLm::load_quantized(
                source, &types, device, positions,
            )?)
        }
        (RowKind::Quantized(t), _) => {
            Loaded::Quantized(quantized::QuantizedLm::load(source, t, device)?, t)
        }
        (RowKind::Float(p), _) => Loaded::Float(float::FloatLm::load(
            source,
            p.dtype(),
            device,
            positions,
            kernels,
        )?),
    };
    // quantized_llama rotates interleaved pairs; the float path's layers halves.
    let interleaved = matches!(lm, Loaded::Quantized(..));
    meter.reset_peak()?;
    let (weight_bytes, weight_bytes_per_token) = row_bytes(source, kind)?;

    crate::note!("generate {label}: the answer ({} tokens)", cfg.tg_tokens);
    let (ids, stopped) = answer(&mut lm, &cfg.prompt_ids, cfg.tg_tokens, &cfg.eos)?;
    let answer_text = text.map(|t| t.decode(&ids)).transpose()?;

    let prompt = cfg.prompt_ids.clone();
    let ttft = telemetry.time(device, cfg.plan, &format!("{label} ttft"), || {
        pick(&lm.forward(&prompt, 0)?)
    })?;
    let pp_in = pp_ids(&cfg.prompt_ids, cfg.pp_tokens);
    let pp = telemetry.time(
        device,
        cfg.plan,
        &format!("{label} pp{}", cfg.pp_tokens),
        || lm.forward(&pp_in, 0),
    )?;
    let (n, start) = (cfg.tg_tokens, cfg.start_token);
    let tg = telemetry.time(device, cfg.plan, &format!("{label} tg{n}"), || {
        let mut tok = start;
        for pos in 0..n {
            tok = pick(&lm.forward(&[tok], pos)?)?;
        }
        Ok(tok)
    })?;
    let peak_bytes = match (base, meter.peak_bytes()?) {
        (Some(base), Some(peak)) => Some(peak.saturating_sub(base)),
        _ => None,
    };

    // The matmuls alone and the op classes, from the row's own weights.
    let mats = match lm {
        Loaded::Float(f) => Mats::Float(Box::new(f)),
        Loaded::Quantized(q, t) => {
            // The model's own matmuls are private to quantized_llama: the same
            // tensors are loaded again, once the model is gone.
            drop(q);
            let (layers, head) = quantized::matmuls(source, &types(source, t)?, device)?;
            Mats::Quantized { layers, head }
        }
    };
    let act = match kind {
        RowKind::Quantized(_) => candle_core::DType::F32,
        RowKind::Float(p) => p.dtype(),
    };
    let shapes = parts::Shapes::new(&d, act, device, cfg.seed, cfg.pp_tokens, cfg.tg_tokens)?;
    let matmuls_pp = parts::matmuls(&mats, &shapes, true, telemetry, cfg.plan, label)?;
    let matmuls_tg = parts::matmuls(&mats, &shapes, false, telemetry, cfg.plan, label)?;
    let parts = parts::token_parts(
        &d,
        &shapes,
        &matmuls_tg,
        (interleaved, kernels),
        telemetry,
        cfg.plan,
        label,
    )?;
    let parts_sum_ms: f64 = parts.iter().map(|p| p.ms_per_token).sum();

    let (pp_tps, pp_min, pp_max) = rates(&pp, cfg.pp_tokens);
    let (tg_tps, tg_min, tg_max) = rates(&tg, cfg.tg_tokens);
    let flops = pp_flops(&d, cfg.pp_tokens as u64);
    let pp_gflop = flops / (pp.rate_ms().0 * 1e-3) / 1e9;
    let mm_gflop =
        pp_matmul_flops(&d, cfg.pp_tokens as u64) / (matmuls_pp.rate_ms().0 * 1e-3) / 1e9;
    let bound = tg_bound_tokens_per_s(copy_gb_per_s, weight_bytes_per_token);
    let pct = 100.0 * tg_tps / bound;
    let held_back_by = (pct < 50.0)
        .then(|| parts::held_back_by(&parts, parts_sum_ms, weight_bytes_per_token, copy_gb_per_s));
    Ok(GenerateMeasured {
        answer: Answer {
            token_ids: ids,
            text: answer_text,
            differs_from_fp32_at: None,
            stopped_at_eos: stopped,
        },
        ttft,
        pp,
        pp_tokens_per_s: pp_tps,
        pp_tokens_per_s_min: pp_min,
        pp_tokens_per_s_max: pp_max,
        tg,
        tg_tokens_per_s: tg_tps,
        tg_tokens_per_s_min: tg_min,
        tg_tokens_per_s_max: tg_max,
        weight_bytes,
        weight_bytes_per_token,
        tg_bound_tokens_per_s: Some(bound),
        tg_pct_of_bound: Some(pct),
        pp_flops: flops,
        pp_gflop_per_s: pp_gflop,
        matmuls_pp,
        matmuls_pp_gflop_per_s: mm_gflop,
        pp_pct_of_matmul_roofline: 100.0 * pp_gflop / mm_gflop,
        matmuls_tg,
        peak_bytes,
        parts,
        parts_sum_ms: Some(parts_sum_ms),
        held_back_by,
        vs_fp32: None,
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
        m.vs_fp32 = Some(VsFp32 {
            against: Some(name.clone()),
            matmuls_pp: ms(&fp32.matmuls_pp) / ms(&m.matmuls_pp),
            matmuls_tg: ms(&fp32.matmuls_tg) / ms(&m.matmuls_tg),
            pp: ms(&fp32.pp) / ms(&m.pp),
            tg: ms(&fp32.tg) / ms(&m.tg),
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

    #[test]
    fn both_times_each_row_twice_candles_first() {
        let (q, f) = (
            RowKind::Quantized(GgmlDType::Q4_1),
            RowKind::Float(Precision::F32),
        );
        let got = runs(&[q, f], KernelChoice::Both);
        assert_eq!(
            got,
            [
                (q, Kernels::Fused),
                (q, Kernels::Lab),
                (f, Kernels::Fused),
                (f, Kernels::Lab)
            ]
        );
        assert_eq!(
            runs(&[q, f], KernelChoice::Lab),
            [(q, Kernels::Lab), (f, Kernels::Lab)]
        );
        assert_eq!(
            runs(&[q, f], KernelChoice::Candle),
            [(q, Kernels::Fused), (f, Kernels::Fused)]
        );
    }

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
            "matmuls_pp_gflop_per_s": 1.0, "pp_pct_of_matmul_roofline": 1.0, "matmuls_tg": t,
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

    #[test]
    fn pp_tests_repeat_the_prompt_to_their_length() {
        assert_eq!(pp_ids(&[5, 6, 7], 7), [5, 6, 7, 5, 6, 7, 5]);
        assert_eq!(pp_ids(&[5, 6, 7], 2), [5, 6]);
    }
}
