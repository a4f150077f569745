//! Two rows compared with each other (a precision on Candle's kernels and on
//! the suite's, `--kernels both`) measured side by side, A B A B, so that the
//! machine's drift between them is not inside their ratio: both models held,
//! their pp tests in turn, then their tg tests in turn.

use anyhow::{Context, Result};
use candle_core::Device;

use super::bounds::Bounds;
use super::measure::{finish, peak, pp_ids, pp_test, row, start, tg_test, Rowed};
use super::weights::Weights;
use super::{text::Text, Config};
use crate::bench::gemm_mode::GemmMode;
use crate::memory::MemoryMeter;
use crate::schema::GenerateMeasured;
use crate::telemetry::Telemetry;

/// Two rows compared with each other (a precision on candle's kernels and on
/// the suite's) measured side by side: both started, then their pp tests in
/// turn (A B A B ...) and their tg tests in turn, then each finished. A
/// row's peak memory is the pair's less what the other model's start left in
/// use (its weights, mostly). Each row's result is its own.
#[allow(clippy::too_many_arguments)]
pub(super) fn pair(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    (a, b): (Rowed<'_>, Rowed<'_>),
    (label_a, label_b): (&str, &str),
    text: Option<&Text>,
    telemetry: &Telemetry,
    bounds: &Bounds,
) -> (Result<GenerateMeasured>, Result<GenerateMeasured>) {
    let started = (|| -> Result<_> {
        let meter = MemoryMeter::for_device(device)?;
        let base = meter.used_bytes()?;
        let sa = start(device, weights, cfg, a, label_a, (text, telemetry, &meter))?;
        let between = meter.used_bytes()?;
        let sb = start(device, weights, cfg, b, label_b, (text, telemetry, &meter))?;
        let after = meter.used_bytes()?;
        Ok((meter, (base, between, after), sa, sb))
    })();
    let (meter, (base, between, after), mut sa, mut sb) = match started {
        Ok(x) => x,
        // Either failed to start: each measured alone, so one row's error
        // is not the other's.
        Err(_) => {
            return (
                row(device, weights, cfg, a, label_a, text, telemetry, bounds),
                row(device, weights, cfg, b, label_b, text, telemetry, bounds),
            )
        }
    };
    let tests = (|| -> Result<_> {
        let _mode = GemmMode::set(sa.precision);
        let pp_in = pp_ids(&cfg.prompt_ids, cfg.pp_tokens);
        let (lm_a, lm_b) = (&mut sa.lm, &mut sb.lm);
        let mut pa = || pp_test(lm_a, cfg, &pp_in);
        let mut pb = || pp_test(lm_b, cfg, &pp_in);
        let label = format!("{label_a} | {label_b} pp{}", cfg.pp_tokens);
        let mut pp =
            telemetry.time_interleaved(device, cfg.plan, &label, &mut [&mut pa, &mut pb])?;
        let (lm_a, lm_b) = (&mut sa.lm, &mut sb.lm);
        let mut ta = || tg_test(lm_a, cfg);
        let mut tb = || tg_test(lm_b, cfg);
        let label = format!("{label_a} | {label_b} tg{}", cfg.tg_tokens);
        let mut tg =
            telemetry.time_interleaved(device, cfg.plan, &label, &mut [&mut ta, &mut tb])?;
        // Each row's peak is the pair's less what the other model holds:
        // A's less what B's start added, B's less what A's start left.
        let pair_peak = peak(&meter, base)?;
        let less = |held: Option<(u64, u64)>| {
            pair_peak.map(|p| p.saturating_sub(held.map_or(0, |(lo, hi)| hi.saturating_sub(lo))))
        };
        let (peak_a, peak_b) = (less(between.zip(after)), less(base.zip(between)));
        let (pp_b, tg_b) = (pp.pop().context("pp B")?, tg.pop().context("tg B")?);
        let (pp_a, tg_a) = (pp.pop().context("pp A")?, tg.pop().context("tg A")?);
        Ok(((pp_a, tg_a, peak_a), (pp_b, tg_b, peak_b)))
    })();
    match tests {
        Ok((ta, tb)) => (
            finish(device, weights, cfg, sa, ta, (a.2, telemetry, bounds)),
            finish(device, weights, cfg, sb, tb, (b.2, telemetry, bounds)),
        ),
        Err(e) => {
            let why = crate::error::error_line(&e);
            (Err(anyhow::anyhow!("{why}")), Err(anyhow::anyhow!("{why}")))
        }
    }
}
