//! Rows compared with each other measured side by side, so that the
//! machine's drift between minutes is not inside their ratios: a precision on
//! Candle's kernels and on the suite's (`--kernels both`), and each of them
//! against fp32, whose model a run holds a copy of for that ([`Reference`]).
//! Every model of the group is started, then their pp tests run in turn (A B
//! R A B R ...), then their tg tests; each row's peak memory comes from an
//! untimed prompt pass, pp and tg of its own afterwards, less what the
//! others hold.

use anyhow::{Context, Result};
use candle_core::Device;

use super::measure::{finish, load, peak, pp_test, start, tg_test, Started};
use super::{Config, RowKind};
use crate::bench::gemm_mode::GemmMode;
use crate::bench::lm::bounds::Bounds;
use crate::bench::lm::load::{pp_ids, Loaded, Rowed};
use crate::memory::MemoryMeter;
use crate::model::layer::Kernels;
use crate::model::text::Text;
use crate::model::weights::Weights;
use crate::model::Lm;
use crate::precision::Precision;
use crate::schema::{Fp32Beside, GenerateMeasured, KernelChoice, Timed};
use crate::telemetry::Telemetry;

/// A copy of the fp32 model held for the run, timed in turn with every
/// later row so that its ratio to fp32 is measured side by side.
pub(super) struct Reference {
    /// The fp32 row it copies ("fp32", "fp32 (lab kernels)").
    pub against: String,
    pub kernels: KernelChoice,
    pub lm: Loaded,
}

impl Reference {
    /// The fp32 model on `kernels`, loaded on `device`.
    pub fn load(
        device: &Device,
        weights: &Weights,
        cfg: &Config,
        (kernels, against): (Kernels, &str),
    ) -> Result<Self> {
        let label = format!("{against}, the reference the later rows are timed beside");
        let lm = load(
            device,
            weights,
            cfg,
            (RowKind::Float(Precision::F32), kernels, None),
            &label,
        )?;
        Ok(Self {
            against: against.to_string(),
            kernels: kernels.choice(),
            lm,
        })
    }
}

/// The reference a row on `kernels` is held against: fp32 on the same
/// kernels, else the other one (so a ratio changes one thing where it can).
fn reference_for(refs: &[Reference], kernels: Kernels) -> Option<usize> {
    let want = kernels.choice();
    refs.iter()
        .position(|r| r.kernels == want)
        .or((!refs.is_empty()).then_some(0))
}

/// `rows` (one or two, each with its label) measured side by side with
/// `refs`: all started, their pp tests in turn, then their tg tests in turn,
/// then each row's peak and finish. A row that cannot start is measured
/// without the others. Each row's result is its own, with the fp32
/// reference's samples taken beside it (`fp32_beside`).
#[allow(clippy::too_many_arguments)]
pub(super) fn group(
    device: &Device,
    weights: &Weights,
    cfg: &Config,
    rows: &[(Rowed<'_>, &str)],
    refs: &mut [Reference],
    text: Option<&Text>,
    telemetry: &Telemetry,
    bounds: &Bounds,
) -> Vec<Result<GenerateMeasured>> {
    let started = start_all((device, weights, cfg), rows, text, telemetry);
    let (meter, base, held, mut started) = match started {
        Ok(x) => x,
        // A row that cannot start: each measured alone, so one row's error
        // is not the other's.
        Err(e) if rows.len() > 1 => {
            crate::note!(
                "generate: the rows could not start together ({}); each is measured alone",
                crate::error::error_line(&e)
            );
            return rows
                .iter()
                .flat_map(|r| {
                    let one = std::slice::from_ref(r);
                    group(device, weights, cfg, one, refs, text, telemetry, bounds)
                })
                .collect();
        }
        Err(e) => return vec![Err(e)],
    };
    let names: Vec<&str> = rows.iter().map(|r| r.1).collect();
    let tested = test_rows(
        (device, cfg, telemetry),
        &names,
        &mut started,
        refs,
        (&meter, base, &held),
    );
    let (mut pp, mut tg, peaks) = match tested {
        Ok(x) => x,
        Err(e) => {
            let why = crate::error::error_line(&e);
            return rows.iter().map(|_| Err(anyhow::anyhow!("{why}"))).collect();
        }
    };
    let (ref_pp, ref_tg) = (pp.split_off(rows.len()), tg.split_off(rows.len()));
    let mut out = Vec::with_capacity(rows.len());
    for (((s, (pp, tg)), peak), &(rowed, _)) in started
        .into_iter()
        .zip(pp.into_iter().zip(tg))
        .zip(peaks)
        .zip(rows)
    {
        let beside = reference_for(refs, rowed.1).map(|i| Fp32Beside {
            against: refs[i].against.clone(),
            pp: ref_pp[i].clone(),
            tg: ref_tg[i].clone(),
        });
        let measured = finish(
            device,
            weights,
            cfg,
            s,
            (pp, tg, peak),
            (rowed.2, telemetry, bounds),
        );
        out.push(measured.map(|mut m| {
            m.fp32_beside = beside;
            m
        }));
    }
    out
}

/// The group's rows started, with the meter that watched them, what the
/// device held before the first (`base`) and what each row's start added
/// (`held`, where the device can say), so that a row's peak can leave out
/// what the others hold.
type StartedAll = (MemoryMeter, Option<u64>, Vec<Option<u64>>, Vec<Started>);

/// Every row of `rows` started in turn (loaded, its answer generated, its
/// first token timed), measuring what each adds to the device's memory.
fn start_all(
    (device, weights, cfg): (&Device, &Weights, &Config),
    rows: &[(Rowed<'_>, &str)],
    text: Option<&Text>,
    telemetry: &Telemetry,
) -> Result<StartedAll> {
    let meter = MemoryMeter::for_device(device)?;
    let base = meter.used_bytes()?;
    let mut held = Vec::new();
    let mut started = Vec::new();
    for &(rowed, label) in rows {
        let before = meter.used_bytes()?;
        started.push(start(
            device,
            weights,
            cfg,
            rowed,
            label,
            (text, telemetry, &meter),
        )?);
        let after = meter.used_bytes()?;
        held.push(before.zip(after).map(|(b, a)| a.saturating_sub(b)));
    }
    Ok((meter, base, held, started))
}

/// Every model's pp and tg timings (the rows', then the references'), and
/// each row's peak.
type Tested = (Vec<Timed>, Vec<Timed>, Vec<Option<u64>>);

/// The group's pp tests in turn, then its tg tests in turn (the rows',
/// then the references'), then each row's peak: untimed, its answer's
/// prompt pass, a pp and a tg of its own, less what the group's other rows
/// hold (`held`; the references were loaded before `base`).
fn test_rows(
    (device, cfg, telemetry): (&Device, &Config, &Telemetry),
    names: &[&str],
    started: &mut [Started],
    refs: &mut [Reference],
    (meter, base, held): (&MemoryMeter, Option<u64>, &[Option<u64>]),
) -> Result<Tested> {
    let rows = started.len();
    let mut modes: Vec<Precision> = started.iter().map(|s| s.precision).collect();
    modes.extend(refs.iter().map(|_| Precision::F32));
    let mut models: Vec<&mut Loaded> = started.iter_mut().map(|s| &mut s.lm).collect();
    models.extend(refs.iter_mut().map(|r| &mut r.lm));
    let pp_in = pp_ids(&cfg.prompt_ids, cfg.pp_tokens);
    let label = format!("{} pp{}", names.join(" | "), cfg.pp_tokens);
    let pp = in_turn(device, cfg, telemetry, &label, &mut models, &modes, |lm| {
        pp_test(lm, cfg, &pp_in)
    })?;
    let label = format!("{} tg{}", names.join(" | "), cfg.tg_tokens);
    let tg = in_turn(device, cfg, telemetry, &label, &mut models, &modes, |lm| {
        tg_test(lm, cfg)
    })?;
    let mut peaks = Vec::new();
    for (i, lm) in models.iter_mut().take(rows).enumerate() {
        let _mode = GemmMode::set(modes[i]);
        meter.reset_peak()?;
        lm.forward(&cfg.prompt_ids, 0)?;
        pp_test(lm, cfg, &pp_in)?;
        tg_test(lm, cfg)?;
        let others: u64 = (0..rows)
            .filter(|&k| k != i)
            .map(|k| held[k].unwrap_or(0))
            .sum();
        peaks.push(peak(meter, base)?.map(|p| p.saturating_sub(others)));
    }
    Ok((pp, tg, peaks))
}

/// `test` on every model in turn under the run's plan (A B R A B R ...),
/// each with its own precision's GEMM switches set; one timing per model.
fn in_turn(
    device: &Device,
    cfg: &Config,
    telemetry: &Telemetry,
    label: &str,
    models: &mut [&mut Loaded],
    modes: &[Precision],
    test: impl Fn(&mut Loaded) -> Result<()>,
) -> Result<Vec<Timed>> {
    let (test, n) = (&test, models.len());
    let mut works: Vec<Box<dyn FnMut() -> Result<()> + '_>> = models
        .iter_mut()
        .zip(modes)
        .map(|(lm, &mode)| {
            Box::new(move || {
                let _mode = GemmMode::set(mode);
                test(lm)
            }) as Box<dyn FnMut() -> Result<()>>
        })
        .collect();
    let mut refs: Vec<crate::clock::Work<'_>> = works.iter_mut().map(|w| &mut **w as _).collect();
    let timed = telemetry.time_interleaved(device, cfg.plan, label, &mut refs)?;
    (timed.len() == n)
        .then_some(timed)
        .context("a timing per model")
}
