//! A scaling row's compute ceiling held to the run: its product's peak
//! measured again after the row's points, never under what the row's own
//! matmuls did inside a timed step, and every row of one product held to
//! the highest the run found for it. A ceiling is what the product did do:
//! a bound the model's own products beat is no bound, and a peak taken in a
//! shared VM's slow milliseconds reads a batch's step over 100% of it (a
//! batch of 16's matmuls read 104-110% of a once-measured median on a
//! 2-core AMD EPYC VM).

use super::{points, Planned};
use crate::bench::lm::bounds::{Bounds, Peak};
use crate::model::weights::Weights;
use crate::schema::{ScalingPoint, ScalingRow};

/// A row's compute ceiling held to the run, from its product's first
/// peak (`compute`): the product measured again after the points (the
/// higher kept: a shared VM's slow seconds can fall on a peak's few
/// milliseconds), and never under what the row's matmuls did inside a
/// timed step (a peak the model's own products beat is no bound: the
/// ceiling is then theirs, a note says so). The points'
/// bounds follow it; returns it and what set it.
pub(super) fn held_ceiling(
    bounds: &Bounds,
    (peak, width, compute): (Peak, usize, f64),
    (points, notes): (&mut [ScalingPoint], &mut Vec<String>),
) -> (f64, String) {
    let alone = match bounds.compute_peak_again(peak, width) {
        Ok(again) => compute.max(again),
        Err(e) => {
            let why = crate::error::error_line(&e);
            notes.push(format!(
                "compute ceiling: not measured again after the points ({why})"
            ));
            compute
        }
    };
    let in_steps = points::matmuls_in_steps(points);
    let (ceiling, of) = match in_steps > alone {
        true => {
            notes.push(format!(
                "compute ceiling: the matmuls inside a timed step ran at {in_steps:.0} GFLOP/s, \
                 over the {} product's {alone:.0} measured alone (before and after the points): \
                 the ceiling is theirs",
                peak.name()
            ));
            (in_steps, format!("{}, {IN_STEPS}", peak.name()))
        }
        false => (alone, peak.name()),
    };
    if ceiling > compute {
        points::rebound(points, ceiling);
    }
    (ceiling, of)
}

/// What a ceiling set by a row's own matmuls is said to be measured on.
const IN_STEPS: &str = "its matmuls inside a timed step";

/// Every measured row's ceiling raised to the highest any row of its
/// product ended with (each row's is the highest of every measurement of
/// the product before it and its own steps'): a row measured before a later
/// one found its product faster is held to the same ceiling, its points'
/// bounds and ridge with it, and takes that row's name for what set it.
pub(super) fn shared_ceilings(weights: &Weights, plan: &[Planned], rows: &mut [ScalingRow]) {
    let held: Vec<Option<(Peak, f64, String)>> = plan
        .iter()
        .zip(rows.iter())
        .map(|(&(kind, kernels, _), r)| {
            let m = r.measured.as_ref()?;
            let peak = Peak::of_row(weights, kind, kernels).ok()?;
            Some((peak, m.compute_peak_gflop_per_s, m.compute_peak_of.clone()))
        })
        .collect();
    for (row, mine) in rows.iter_mut().zip(&held) {
        let (Some(m), Some((peak, _, _))) = (row.measured.as_mut(), mine) else {
            continue;
        };
        let best = held
            .iter()
            .flatten()
            .filter(|(q, _, _)| q == peak)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((_, best, of)) = best.filter(|b| b.1 > m.compute_peak_gflop_per_s) else {
            continue;
        };
        (m.compute_peak_gflop_per_s, m.compute_peak_of) = (*best, of.clone());
        points::rebound(&mut m.points, *best);
        m.ridge = points::ridge(&m.points);
    }
}
