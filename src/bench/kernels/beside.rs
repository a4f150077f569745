//! A `kernels` row's implementations and its bound timed side by side: each
//! implementation called once (its output is what accuracy is checked on;
//! one that fails is that variant's error and is left out), then those that
//! ran timed in turn with the ladder's kernel at the row's footprint
//! ([`Ladder::bound_beside`]), so that the row's share of its bound and the
//! suite's speed against Candle's are ratios of samples taken side by side,
//! each with an interval.

use anyhow::{Context, Result};
use candle_core::Tensor;

use crate::bench::ladder::{Called, Ladder};
use crate::clock::Plan;
use crate::schema::{
    Bound, Implementation, KernelCeiling, KernelVariant, LadderKernel, LadderPoint, RatioInterval,
};

/// A row's implementations measured beside their bound.
pub(super) struct Beside {
    pub ceiling: KernelCeiling,
    /// Per implementation, in the order asked: its first output and its
    /// timing, or why it failed.
    pub runs: Vec<(Implementation, Result<(Tensor, Called)>)>,
}

/// Measures `imps` (each through `call`) in turn with the ladder's `kernels`
/// (the row's pattern, with the store kinds it is held to) at `footprint`
/// bytes, under `plan`; `label` names the progress line.
/// Where the side-by-side timing itself fails, every variant that ran gets
/// that error and the bound is the ladder's own reading.
pub(super) fn measure(
    plan: Plan,
    ladder: &Ladder,
    (kernels, footprint): (&[LadderKernel], u64),
    label: &str,
    imps: &[Implementation],
    call: &dyn Fn(Implementation) -> Result<Tensor>,
) -> Result<Beside> {
    let mut ran = Vec::new();
    let mut runs: Vec<(Implementation, Option<anyhow::Error>)> = Vec::new();
    for &imp in imps {
        match call(imp) {
            Ok(out) => {
                ran.push((imp, out));
                runs.push((imp, None));
            }
            Err(e) => runs.push((imp, Some(e))),
        }
    }
    let works: Vec<Box<dyn FnMut() -> Result<()> + '_>> = ran
        .iter()
        .map(|&(imp, _)| Box::new(move || call(imp).map(|_| ())) as Box<dyn FnMut() -> Result<()>>)
        .collect();
    let (ceiling, timed) = match ladder.bound_beside(kernels, footprint, (plan, label), works) {
        Ok((bound, point, called)) => (ceiling(bound, point, true), Ok(called)),
        Err(e) => {
            let bound = ladder.bound_of(kernels, ladder.pool_threads(), footprint)?;
            let point = ladder.point(bound.kernel, bound.threads, bound.footprint_bytes)?;
            (ceiling(bound, point, false), Err(e))
        }
    };
    let mut called = timed.map(|c| c.into_iter());
    let mut outs = ran.into_iter();
    let mut measured = Vec::with_capacity(runs.len());
    for (imp, failed) in runs {
        // A variant that failed its first call has no output and no timing.
        let r = match failed {
            Some(e) => Err(e),
            None => match (outs.next(), &mut called) {
                (Some((_, out)), Ok(c)) => c.next().map(|c| (out, c)).context("no timing"),
                (_, Err(e)) => Err(anyhow::anyhow!("{}", crate::error::error_line(e))),
                (None, _) => Err(anyhow::anyhow!("no output for a variant that ran")),
            },
        };
        measured.push((imp, r));
    }
    Ok(Beside {
        ceiling,
        runs: measured,
    })
}

/// The row's ceiling from its ladder bound and the point it was read at.
pub(super) fn ceiling(bound: Bound, point: LadderPoint, side_by_side: bool) -> KernelCeiling {
    KernelCeiling {
        call: format!(
            "the ladder's {} on {} thread(s) at {} ({}){}{}",
            bound.kernel.name(),
            bound.threads,
            crate::units::size(bound.footprint_bytes),
            bound.level,
            if point.from_fastest_sample {
                ", its fastest sample"
            } else {
                ""
            },
            if side_by_side {
                ", timed in turn with the row"
            } else {
                ""
            }
        ),
        bytes_copied: point.bytes_moved / 2,
        time_ms: point.time_per_call_ms,
        time_source: point.timed.rate_ms().1,
        gb_per_s: bound.gb_per_s,
        bound: Some(bound),
        side_by_side,
        timed: point.timed,
    }
}

/// Holds a row to the run's whole ladder once it is measured
/// ([`Ladder::faster_than`]): where a larger footprint read faster after the
/// row was bounded, that reading is its ceiling (its call says so, and what
/// was read beside the row) and each variant's share is taken again.
/// Returns whether the ceiling moved.
pub(super) fn rebound(
    ladder: &Ladder,
    ceiling: &mut KernelCeiling,
    variants: &mut [KernelVariant],
) -> bool {
    let Some(point) = ceiling.bound.as_ref().and_then(|b| ladder.faster_than(b)) else {
        return false;
    };
    let beside = ceiling.gb_per_s;
    *ceiling = self::ceiling(point.bound(), point, false);
    ceiling.call +=
        &format!(", read later in the run (the ladder's reading beside the row: {beside:.1} GB/s)");
    for m in variants.iter_mut().filter_map(|v| v.measured.as_mut()) {
        m.pct_of_ceiling = 100.0 * m.gb_per_s / ceiling.gb_per_s;
    }
    true
}

/// Each measured variant's speed against Candle's (Candle's time over its
/// own) and that ratio's 95% bootstrap interval from the per-call samples.
pub(crate) fn fill_speedups(variants: &mut [KernelVariant]) {
    let per_call = |m: &crate::schema::VariantMeasured| -> Vec<f64> {
        m.timed
            .samples_ms()
            .iter()
            .map(|x| x / m.calls_per_sample as f64)
            .collect()
    };
    let candle = variants
        .iter()
        .find(|v| v.implementation == Implementation::Candle)
        .and_then(|v| v.measured.as_ref())
        .map(|m| (m.time_ms, per_call(m)));
    for m in variants.iter_mut().filter_map(|v| v.measured.as_mut()) {
        m.speedup_vs_candle = candle.as_ref().map(|(c, _)| c / m.time_ms);
        m.speedup_interval = candle
            .as_ref()
            .and_then(|(_, c)| RatioInterval::of(&per_call(m), c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Telemetry;
    use candle_core::Device;

    #[test]
    fn a_failing_variant_is_its_own_error_and_the_bound_is_read_beside_the_rest() {
        let dev = Device::Cpu;
        let telemetry = Telemetry::open(&dev);
        let ladder = Ladder::new(&dev, &telemetry, Some(1 << 20)).unwrap();
        let x = Tensor::randn(0f32, 1.0, 4096, &dev).unwrap();
        let call = |imp: Implementation| -> Result<Tensor> {
            match imp {
                Implementation::Candle => anyhow::bail!("no such op here"),
                _ => Ok((&x + 1.0)?),
            }
        };
        let plan = Plan {
            warmup: 1,
            iters: 3,
        };
        let imps = [Implementation::Lab, Implementation::Candle];
        let kernel = LadderKernel::Copy;
        let b = measure(plan, &ladder, (&[kernel], 32 << 10), "test", &imps, &call).unwrap();
        assert!(b.ceiling.side_by_side, "{}", b.ceiling.call);
        assert!(b.ceiling.call.contains("timed in turn"));
        let (lab, candle) = (&b.runs[0], &b.runs[1]);
        assert_eq!(
            (lab.0, candle.0),
            (Implementation::Lab, Implementation::Candle)
        );
        let (out, c) = lab.1.as_ref().unwrap();
        assert_eq!(out.dims(), &[4096]);
        assert_eq!(c.timed.samples_wall_ms.len(), 3);
        assert!(c.calls_per_sample >= 1 && c.per_call_ms > 0.0);
        let e = candle.1.as_ref().unwrap_err();
        assert!(e.to_string().contains("no such op here"));
        // The ladder keeps the points read beside the row (1 thread, and the
        // pool's with fixed parts and with chunked ones), at its footprint.
        let file = ladder.finish();
        let beside: Vec<_> = file.points.iter().filter(|p| !p.standard).collect();
        let n = if file.pool_threads > 1 { 3 } else { 1 };
        assert_eq!(beside.len(), n);
        assert_eq!(beside.iter().filter(|p| p.chunked).count(), n / 3);
        assert!(beside
            .iter()
            .all(|p| p.kernel == kernel && p.timed.samples_wall_ms.len() == 3));
    }

    #[test]
    fn a_speedup_carries_the_interval_of_its_per_call_samples() {
        let variant = |imp, samples: &[f64], k: u64| {
            let median = crate::stats::summarize(samples).unwrap().median / k as f64;
            KernelVariant {
                implementation: imp,
                call: String::new(),
                status: crate::schema::RowStatus::Ok,
                error: None,
                measured: Some(crate::schema::VariantMeasured {
                    time_ms: median,
                    time_source: crate::schema::TimeSource::MedianMs,
                    gb_per_s: 1.0,
                    pct_of_ceiling: 1.0,
                    speedup_vs_candle: None,
                    speedup_interval: None,
                    accuracy: crate::schema::KernelAccuracy {
                        elements_checked: 0,
                        max_rel_err: 0.0,
                        mean_rel_err: 0.0,
                    },
                    calls_per_sample: k,
                    threads_held: None,
                    timed: crate::telemetry::timed_at(samples, &[]),
                }),
            }
        };
        // The lab's 2 calls a sample take what Candle's 1 takes: 2x.
        let mut v = [
            variant(Implementation::Lab, &[1.0, 1.1, 0.9, 1.0], 2),
            variant(Implementation::Candle, &[1.0, 1.05, 0.95, 1.0], 1),
        ];
        fill_speedups(&mut v);
        let m = v[0].measured.as_ref().unwrap();
        assert!((m.speedup_vs_candle.unwrap() - 2.0).abs() < 1e-9);
        let i = m.speedup_interval.unwrap();
        assert!(i.lo <= 2.0 && 2.0 <= i.hi && i.lo > 1.5, "{i:?}");
        // Too few samples: the ratio alone.
        let mut few = [
            variant(Implementation::Lab, &[1.0, 1.1], 1),
            variant(Implementation::Candle, &[1.0, 1.1], 1),
        ];
        fill_speedups(&mut few);
        assert!(few[0].measured.as_ref().unwrap().speedup_interval.is_none());
    }
}
