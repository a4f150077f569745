//! The suite's kernels against Candle's for the whole model, per precision
//! (from a `--kernels both` run): the line under generate's tables, which
//! `summary` shows too, each quantized ratio named by its baseline on the
//! CPU ([`super::verdicts::candle_baseline`]).

use super::verdicts;
use crate::schema::{GenerateResults, KernelChoice, ModelPath, RatioInterval, Timed};
use crate::schema::{TokenOpClass, LAB_SUFFIX};

/// The suite's kernels against Candle's for the whole model, from a
/// `--kernels both` run: per precision, the time of pp and of tg with the
/// suite's kernels over the time with candle's, measured side by side (their
/// tests in turn, A B A B), each with its 95% bootstrap interval, and a flag
/// where a gain is larger than the time of the classes the suite's kernels
/// replace in candle's token (all but sampling, and on a GPU, where the lab's
/// rotary embedding is candle-nn's, all but rotary too): noise or a side
/// effect, not their gain. On the CPU each quantized ratio names its
/// baseline, Candle's scalar or vectorized product of the row's type
/// ([`verdicts::candle_baseline`]), and the line ends saying which is fair.
pub fn kernels_line(r: &GenerateResults, on_gpu: bool) -> Option<String> {
    let per_precision: Vec<(String, bool)> = r
        .rows
        .iter()
        .filter(|row| row.kernels == KernelChoice::Lab)
        .filter_map(|lab| {
            let base = lab.precision.strip_suffix(LAB_SUFFIX)?;
            let candle = r
                .rows
                .iter()
                .find(|row| row.kernels == KernelChoice::Candle && row.precision == base)?;
            let (l, c) = (lab.measured.as_ref()?, candle.measured.as_ref()?);
            let ratio = |a: &Timed, b: &Timed| {
                let x = a.rate_ms().0 / b.rate_ms().0;
                // B's time over A's: the interval of lab / candle.
                match RatioInterval::of(b.samples_ms(), a.samples_ms()) {
                    Some(i) if i.holds_one() => {
                        format!("{x:.2}x [{:.2}, {:.2}]: no difference shown", i.lo, i.hi)
                    }
                    Some(i) => format!("{x:.2}x [{:.2}, {:.2}]", i.lo, i.hi),
                    None => format!("{x:.2}x (direction only)"),
                }
            };
            let changed: f64 = c
                .parts
                .iter()
                .filter(|p| match p.class {
                    TokenOpClass::Sampling => false,
                    TokenOpClass::Rotary => !on_gpu,
                    _ => true,
                })
                .map(|p| p.ms_per_token)
                .sum();
            let gain = (c.tg.rate_ms().0 - l.tg.rate_ms().0) / r.tg_tokens as f64;
            let flag = if changed > 0.0 && gain > changed {
                format!(
                    " (flagged: tg gained {gain:.3} ms a token, more than the {changed:.3} ms \
                     of what the suite's kernels replace)"
                )
            } else {
                String::new()
            };
            // On the CPU, what a quantized row's ratio is against: Candle's
            // product of its type, scalar or vectorized.
            let baseline = match on_gpu {
                false => verdicts::candle_baseline(base).map(|b| format!(", {b}")),
                true => None,
            };
            let said = format!(
                "{base} pp {}, tg {}{flag}{}",
                ratio(&l.pp, &c.pp),
                ratio(&l.tg, &c.tg),
                baseline.unwrap_or_default()
            );
            Some((said, lab.path == ModelPath::Quantized))
        })
        .collect();
    let quantized = per_precision.iter().any(|(_, q)| *q);
    let per_precision: Vec<String> = per_precision.into_iter().map(|(s, _)| s).collect();
    let baselines = match quantized && !on_gpu {
        true => format!(". {}", verdicts::CANDLE_BASELINES),
        false => String::new(),
    };
    (!per_precision.is_empty()).then(|| {
        format!(
            "the suite's kernels against Candle's (candle-nn's on the float rows, \
             candle-transformers' on the quantized), the whole model (time with them over time \
             without, their tests in turn, A B A B; under 1 is faster; 95% bootstrap intervals): \
             {}{baselines}",
            per_precision.join("; ")
        )
    })
}
