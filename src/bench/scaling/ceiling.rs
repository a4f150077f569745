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
/// timed step (a peak the model's own products beat is no bound: the run's
/// ceiling for that product is then theirs, a note says so). The points'
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
            bounds.raise_peak(peak, in_steps);
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

/// Every measured row's ceiling raised to the highest the run holds for its
/// product ([`Bounds::compute_peak`], which keeps the highest of every
/// measurement and raise): a row measured before a later one found its
/// product faster is held to the same ceiling, its points' bounds and ridge
/// with it, and takes the name of what set it from the row that did.
pub(super) fn shared_ceilings(
    bounds: &Bounds,
    weights: &Weights,
    plan: &[Planned],
    rows: &mut [ScalingRow],
) {
    let d = weights.config();
    let peaks: Vec<Option<Peak>> = plan
        .iter()
        .map(|&(kind, kernels, _)| Peak::of_row(weights, kind, kernels).ok())
        .collect();
    let named: Vec<Option<(f64, String)>> = rows
        .iter()
        .map(|r| {
            r.measured
                .as_ref()
                .map(|m| (m.compute_peak_gflop_per_s, m.compute_peak_of.clone()))
        })
        .collect();
    for (i, row) in rows.iter_mut().enumerate() {
        let (Some(m), Some(peak)) = (row.measured.as_mut(), peaks[i]) else {
            continue;
        };
        let Ok(best) = bounds.compute_peak(peak, d.hidden) else {
            continue;
        };
        if best <= m.compute_peak_gflop_per_s {
            continue;
        }
        // The row of the same product whose ceiling is the run's.
        let setter = (0..named.len())
            .filter(|&j| peaks[j] == Some(peak))
            .filter_map(|j| named[j].as_ref())
            .find(|(g, _)| *g >= best);
        m.compute_peak_of = setter.map_or(peak.name(), |(_, of)| of.clone());
        m.compute_peak_gflop_per_s = best;
        points::rebound(&mut m.points, best);
        m.ridge = points::ridge(&m.points);
    }
}
