//! Each precision timed in turn with fp32 (A B A B ...), in one more pass
//! after every row's own sampling: a row's "x fp32" measured side by side,
//! with the 95% interval of the paired samples, so that what drifts between
//! two rows' own samplings (a neighbour's load, the clock's boost, heat) is
//! not read as a speedup. A pass holds two precisions' inputs at once
//! ([`super::need`] counts both).

use anyhow::{Context, Result};
use candle_core::Tensor;

use super::{owned_on, RowContext};
use crate::bench::gemm_mode::GemmMode;
use crate::clock::{progress_bar, time_interleaved, Plan, Sampling, Work};
use crate::precision::Precision;
use crate::schema::{RatioInterval, Row, SideBySide};
use crate::stats::MIN_SAMPLES;
use crate::telemetry::to_timed;

/// The pass's plan: one warm-up round, then as many rounds as a row's own
/// sampling takes at least (never under the interval's [`MIN_SAMPLES`]).
pub(super) fn plan(sampling: &Sampling) -> Plan {
    Plan {
        warmup: 1,
        iters: sampling.least_samples().max(MIN_SAMPLES),
    }
}

/// Fills `vs_fp32_side_by_side` of every measured row but fp32's, when fp32's
/// row was measured. A pass that fails leaves its row's field null, saying
/// why on stderr: the row's own measurement stands.
pub(super) fn fill(ctx: &RowContext, rows: &mut [Row]) {
    let fp32 = |r: &Row| r.precision == Precision::F32 && r.measured.is_some();
    if !rows.iter().any(fp32) {
        return;
    }
    for row in rows.iter_mut().filter(|r| r.precision != Precision::F32) {
        let p = row.precision;
        let Some(m) = row.measured.as_mut() else {
            continue;
        };
        match pair(ctx, p) {
            Ok(s) => m.vs_fp32_side_by_side = Some(s),
            Err(e) => {
                let why = crate::error::error_line(&e);
                crate::note!("{p}: not timed beside fp32, its x fp32 stays apart ({why})");
            }
        }
    }
}

/// Precision `p` and fp32 timed in turn on the same inputs, each call under
/// its own GEMM mode. The clock covers one matmul and the device's
/// synchronization after it, as a row's own samples do
/// ([`crate::clock::time_interleaved`]).
fn pair(ctx: &RowContext, p: Precision) -> Result<SideBySide> {
    let on = |q: Precision| -> Result<(Tensor, Tensor)> {
        let (a, b) = (&ctx.inputs.a, &ctx.inputs.b);
        let dtype = q.dtype();
        Ok((
            owned_on(a, dtype, ctx.device)?,
            owned_on(b, dtype, ctx.device)?,
        ))
    };
    let (a, b) = on(p).context("moving the row's inputs to the device")?;
    let (fa, fb) = on(Precision::F32).context("moving fp32's inputs to the device")?;
    let mode = GemmMode::set(p);
    let mut row = || -> Result<()> {
        a.matmul(&b)?;
        Ok(())
    };
    let mut fp32 = || -> Result<()> {
        mode.switch(Precision::F32);
        let c = fa.matmul(&fb);
        mode.switch(p);
        c?;
        Ok(())
    };
    let plan = plan(&ctx.sampling);
    let rounds = Plan {
        warmup: 2 * plan.warmup,
        iters: 2 * plan.iters,
    };
    let bar = progress_bar(&rounds.into(), &format!("{p} beside fp32"));
    let works: &mut [Work<'_>] = &mut [&mut row, &mut fp32];
    let samples = time_interleaved(ctx.device, plan, &bar, works);
    bar.finish_and_clear();
    let mut timed = samples?.into_iter().map(|s| to_timed(s, None, None));
    let row = timed.next().context("the row's samples")??;
    let fp32 = timed.next().context("fp32's samples")??;
    let (row_ms, time_source) = row.rate_ms();
    let (fp32_ms, _) = fp32.rate_ms();
    Ok(SideBySide {
        speedup: fp32_ms / row_ms,
        interval: RatioInterval::of(row.samples_ms(), fp32.samples_ms()),
        time_source,
        row,
        fp32,
    })
}
