//! One block row measured: end to end (candle-nn's kernels and, with
//! `--kernels both`, the suite's, timed in turn), its accuracy against the
//! f64 reference, its parts by op class, and its bytes against the bandwidth
//! ladder's read at the row's footprint.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};

use std::cell::RefCell;

use super::weights::{Aux, Block};
use super::{call, flat, layer_config, parts, References};
use crate::bench::gemm_mode::GemmMode;
use crate::bench::ladder::Ladder;
use crate::clock::Plan;
use crate::formulas::gb_per_s;
use crate::memory::MemoryMeter;
use crate::model::cost::block_bytes;
use crate::model::layer::{Kernels, KvCache};
use crate::precision::Precision;
use crate::schema::{
    BlockAccuracy, BlockMeasured, BlockPart, BlockPhase, Bound, KernelChoice, OpClass, Phase,
    RatioInterval, Timed,
};
use crate::stats::relative_errors;
use crate::telemetry::Telemetry;

/// The fp32 block a row is timed beside (its precision's ratio to fp32
/// measured side by side), and the guard of the GEMM switches, which each
/// call sets for its own precision.
pub(super) struct Fp32Beside<'a> {
    pub block: &'a Block,
    pub mode: &'a GemmMode,
    pub precision: Precision,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    block: &Block,
    ph: &BlockPhase,
    p: Precision,
    choice: KernelChoice,
    plan: Plan,
    telemetry: &Telemetry,
    ladder: &Ladder,
    reference: &References,
    beside: Option<&Fp32Beside<'_>>,
) -> Result<(BlockMeasured, Tensor)> {
    let kernels = Kernels::of(choice);
    let phase = ph.phase;
    let dtype = p.dtype();
    let device = block.device();
    let x = block.input(phase);
    let aux = block.aux(phase, x.dim(1)?, dtype)?;
    // Decode's preallocated cache, made off the clock; each call rewinds it.
    let cache = (phase == Phase::Decode)
        .then(|| block.decode_cache())
        .transpose()?;
    let meter = MemoryMeter::for_device(device)?;
    let base = meter.used_bytes()?;
    let label = format!("{} {p}", phase.name());
    let cache = RefCell::new(cache);
    let (end_to_end, lab_end_to_end, fp32_beside) = timed(
        block,
        (x, &aux, phase),
        choice,
        (plan, telemetry, &label),
        beside,
        &cache,
    )?;
    let mut cache = cache.into_inner();
    let (accuracy, peak_bytes, checked) = checked_call(
        block,
        (x, &aux, phase),
        cache.as_mut(),
        kernels,
        reference,
        (&meter, base),
    )?;

    let parts = parts::time_parts(block, phase, &aux, dtype, plan, telemetry)?;
    let (parts_sum_ms, matmul_ms) = (
        part_ms(&parts, |_| true),
        part_ms(&parts, OpClass::is_matmul),
    );
    let (ms, _) = end_to_end.rate_ms();
    let (bytes_min, bound) = bytes_and_bound(block, phase, dtype, ladder)?;
    let gb = gb_per_s(bytes_min, ms);
    let measured = BlockMeasured {
        bytes_min,
        tokens_per_s: ph.tokens as f64 / (ms * 1e-3),
        gflop_per_s: ph.flops / (ms * 1e-3) / 1e9,
        gb_per_s: gb,
        copy_bytes: Some(bound.footprint_bytes),
        copy_ceiling_gb_per_s: Some(bound.gb_per_s),
        pct_of_copy_ceiling: Some(100.0 * gb / bound.gb_per_s),
        bound: Some(bound),
        peak_bytes,
        matmul_share: matmul_ms / parts_sum_ms,
        parts_sum_ms,
        parts,
        lab_vs_candle: lab_end_to_end.as_ref().map(|t| t.rate_ms().0 / ms),
        lab_vs_candle_interval: lab_end_to_end
            .as_ref()
            .and_then(|t| RatioInterval::of(rate_samples(&end_to_end), rate_samples(t))),
        lab_end_to_end,
        end_to_end,
        // Filled once the phase's fp32 row is known.
        speedup_vs_fp32: None,
        fp32_beside,
        speedup_vs_fp32_interval: None,
        matmul_speedup_vs_fp32: None,
        amdahl_speedup_vs_fp32: None,
        accuracy,
    };
    Ok((measured, checked))
}

/// The fewest bytes a call of the block moves, and the ladder's bound for
/// them: the block reads its weights (and decode its cache) and writes
/// little, so the ladder's read at the block's footprint, on up to the pool's
/// threads.
fn bytes_and_bound(
    block: &Block,
    phase: Phase,
    dtype: DType,
    ladder: &Ladder,
) -> Result<(u64, Bound)> {
    let layer = layer_config(&block.shape);
    let elem = dtype.size_in_bytes() as u64;
    let bytes_min = block_bytes(&layer, call(&block.shape, phase), elem);
    let bound = ladder.bound(ladder.kernel_for(1, 0), ladder.pool_threads(), bytes_min)?;
    Ok((bytes_min, bound))
}

/// The parts' times summed, ms per call, over the op classes `pred` keeps.
fn part_ms(parts: &[BlockPart], pred: fn(OpClass) -> bool) -> f64 {
    parts
        .iter()
        .filter(|x| pred(x.class))
        .map(|x| x.timed.rate_ms().0)
        .sum()
}

/// One more, untimed, call of the row's block for its accuracy against the
/// f64 reference (on the tokens the reference has), and the row's peak from
/// this call alone (above `base`, what `meter` saw before the row): the timed
/// calls took turns with others (the suite's kernels, the fp32 block) whose
/// use is not the row's. Returns the accuracy, the peak and the checked
/// output as f32 on the host.
fn checked_call(
    block: &Block,
    (x, aux, phase): (&Tensor, &Aux, Phase),
    cache: Option<&mut KvCache>,
    kernels: Kernels,
    reference: &References,
    (meter, base): (&MemoryMeter, Option<u64>),
) -> Result<(BlockAccuracy, Option<u64>, Tensor)> {
    meter.reset_peak()?;
    let y = block.forward(x, phase, aux, cache, kernels)?;
    let peak_bytes = match (base, meter.peak_bytes()?) {
        (Some(base), Some(peak)) => Some(peak.saturating_sub(base)),
        _ => None,
    };
    let (checked, want) = match phase {
        Phase::Prefill => (
            y.narrow(1, 0, block.shape.accuracy_seq)?,
            &reference.prefill,
        ),
        Phase::Decode => (y, &reference.decode),
    };
    let got = flat(&checked)?;
    let checked = checked.to_dtype(DType::F32)?.to_device(&Device::Cpu)?;
    let (max_rel_err, mean_rel_err) = relative_errors(&got, want);
    let accuracy = BlockAccuracy {
        tokens_checked: got.len() / block.shape.hidden,
        max_rel_err,
        mean_rel_err,
    };
    Ok((accuracy, peak_bytes, checked))
}

/// The row's block call end to end, timed in turn (a sample each at a time,
/// on the same inputs, so whatever drifts falls on all) with the same call on
/// the suite's kernels (`--kernels both`) and with the fp32 block's (where
/// the row is held beside it): the row's, the lab's and fp32's timings. The
/// clock covers one block call and the device's synchronization after it.
fn timed(
    block: &Block,
    (x, aux, phase): (&Tensor, &super::weights::Aux, Phase),
    choice: KernelChoice,
    (plan, telemetry, label): (Plan, &Telemetry, &str),
    beside: Option<&Fp32Beside<'_>>,
    cache: &RefCell<Option<KvCache>>,
) -> Result<(Timed, Option<Timed>, Option<Timed>)> {
    let kernels = Kernels::of(choice);
    // The fp32 block on its own inputs, mask and cache (in f32).
    let fp32 = match beside {
        Some(f) => {
            let fx = f.block.input(phase);
            let faux = f.block.aux(phase, fx.dim(1)?, DType::F32)?;
            let fcache = match phase {
                Phase::Prefill => None,
                Phase::Decode => Some(f.block.decode_cache()?),
            };
            Some((f, fx.clone(), faux, RefCell::new(fcache)))
        }
        None => None,
    };
    let mut works: Vec<Box<dyn FnMut() -> Result<()> + '_>> = vec![Box::new(|| {
        block.forward(x, phase, aux, cache.borrow_mut().as_mut(), kernels)?;
        Ok(())
    })];
    if choice == KernelChoice::Both {
        works.push(Box::new(|| {
            block.forward(x, phase, aux, cache.borrow_mut().as_mut(), Kernels::Lab)?;
            Ok(())
        }));
    }
    if let Some((f, fx, faux, fcache)) = &fp32 {
        works.push(Box::new(move || {
            // fp32's own GEMM mode for its call, the row's back after it.
            f.mode.switch(Precision::F32);
            let r = f
                .block
                .forward(fx, phase, faux, fcache.borrow_mut().as_mut(), kernels);
            f.mode.switch(f.precision);
            r.map(|_| ())
        }));
    }
    let mut refs: Vec<crate::clock::Work<'_>> = works.iter_mut().map(|w| &mut **w as _).collect();
    let mut t = if refs.len() == 1 {
        vec![telemetry.time(block.device(), plan, label, &mut refs[0])?]
    } else {
        telemetry.time_interleaved(block.device(), plan, label, &mut refs)?
    }
    .into_iter();
    let row = t.next().context("the row's samples")?;
    let lab = (choice == KernelChoice::Both).then(|| t.next()).flatten();
    Ok((row, lab, t.next()))
}

/// The samples a row's rate divides by: CUDA events' on a GPU, else the wall's.
fn rate_samples(t: &crate::schema::Timed) -> &[f64] {
    if t.gpu_median_ms.is_some() {
        &t.samples_gpu_ms
    } else {
        &t.samples_wall_ms
    }
}
