//! Where a tg point's step goes: one more sample of the point's test, run
//! under [`record`] (each op class's spans synchronize the device and read
//! the clock around its ops), split by class per step, with the read rate
//! the step's matmuls and its attention reached (the weights' bytes over the
//! matmuls' time, the KV cache's over attention's). A point far under its
//! memory bound then says what it waits on, measured: on the 2-core Xeon VM
//! SmolLM2's q4_1 tg at depth 2048 spends about half its step in attention
//! and half in the matmuls, each reading at about half the ladder's rate at
//! the step's footprint. The spans cost time (two clock reads a span; on a
//! GPU two synchronizations): the spanned step is beside the clean median,
//! and the shares are the spanned step's.

use anyhow::Result;
use candle_core::Device;

use crate::bench::lm::load::Loaded;
use crate::clock::spans::record;
use crate::schema::{StepPart, StepParts, TokenOpClass};

/// What a tg point's step must read and compute, for the parts' rates.
pub(super) struct StepWork {
    pub steps: usize,
    /// The weights, read once a step.
    pub weights: u64,
    /// The KV cache a step attends to, every sequence's.
    pub kv: u64,
    /// The products' FLOPs, every sequence's.
    pub matmul_flops: f64,
}

/// `test` run once more on `lm` under [`record`], split per step; none for
/// a model without spans (candle-transformers' own), whose cache the run
/// cannot rewind for another sample either.
pub(super) fn split(
    device: &Device,
    lm: &mut Loaded,
    test: impl FnOnce(&mut Loaded) -> Result<Vec<Vec<u32>>>,
    work: &StepWork,
    clean_ms: f64,
) -> Result<Option<StepParts>> {
    if !matches!(lm, Loaded::Decoder(_)) {
        return Ok(None);
    }
    let (_, split) = record(device, || test(lm))?;
    let steps = work.steps.max(1) as f64;
    let parts = split
        .classes
        .iter()
        .map(|&(class, ms, calls)| {
            let ms = ms / steps;
            let (read, flops) = match class {
                TokenOpClass::Matmuls => (Some(work.weights), Some(work.matmul_flops)),
                TokenOpClass::Attention => (Some(work.kv), None),
                _ => (None, None),
            };
            let per_ms = |v: f64| (ms > 0.0).then(|| v / (ms * 1e6));
            StepPart {
                class,
                ms_per_step: ms,
                calls_per_step: calls as f64 / steps,
                gb_per_s: read.and_then(|b| per_ms(b as f64)),
                gflop_per_s: flops.and_then(per_ms),
            }
        })
        .collect();
    Ok(Some(StepParts {
        spanned_ms_per_step: split.total_ms / steps,
        clean_ms_per_step: clean_ms / steps,
        parts,
    }))
}
