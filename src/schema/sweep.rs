//! The body of `sweep`: square matmul throughput across sizes and precisions,
//! one [`SweepPoint`] per (size, precision) in the order they ran. A point is a
//! matmul [`Row`] (the same measurement and fields as `matmul`'s) plus how the
//! adaptive plan ended for it. The file is rewritten after every point, so an
//! interrupted sweep keeps what it finished: `complete` is false until the last
//! planned point is in.

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rows::TimedRow;
use super::{ClockOverhead, Sampling, StopRule};
use super::{DeviceKind, Row};
use crate::precision::Precision;

/// The sweep: what was planned, how each point was sampled, what was measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepResults {
    pub device: DeviceKind,
    /// Sides n of the n x n matrices, in the order they run.
    pub sizes: Vec<usize>,
    /// Precisions run at every size, in order.
    pub precisions: Vec<Precision>,
    /// The sampling plan every point used (adaptive: until the median is known
    /// to the target, or the time per point runs out).
    pub sampling: Sampling,
    /// What the clock adds to one sample on this device (an empty work item
    /// through the same path), measured once before the first point.
    pub clock_overhead: ClockOverhead,
    /// True once every planned point (sizes x precisions) is in.
    pub complete: bool,
    pub points: Vec<SweepPoint>,
}

/// One size at one precision: measured, or why not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SweepPoint {
    /// Side n of the n x n matrices.
    pub size: usize,
    #[serde(flatten)]
    pub row: Row,
    /// The rule that ended sampling: "noise_target", "max_time", "max_samples"
    /// (null when the point failed).
    pub stopped_by: Option<StopRule>,
    /// Wall-clock seconds the point's sampling took, warm-up included (null
    /// when it failed).
    pub sampling_s: Option<f64>,
}

impl SweepPoint {
    /// The row's own checks, and a stop rule exactly when it was measured.
    pub(crate) fn validate(&self) -> Result<()> {
        self.row.validate()?;
        if self.row.measured.is_some() != self.stopped_by.is_some() {
            bail!(
                "point {} {}: a stop rule must come with measurements, and only then",
                self.size,
                self.row.precision
            );
        }
        Ok(())
    }

    /// GFLOP/s from the median wall time, when the point was measured.
    pub fn gflops(&self) -> Option<f64> {
        self.row.measured.as_ref().map(|m| m.gflops)
    }
}

impl super::rows::Rows for SweepResults {
    fn validate(&self) -> anyhow::Result<()> {
        self.points.iter().try_for_each(SweepPoint::validate)
    }

    /// Every point in the order it ran: a failure named "fp16 at 4096", its
    /// clock "fp16 4096".
    fn timed_rows(&self) -> Vec<TimedRow<'_>> {
        self.points
            .iter()
            .map(|p| {
                let (precision, size) = (p.row.precision, p.size);
                let (name, judged) = (
                    format!("{precision} at {size}"),
                    format!("{precision} {size}"),
                );
                p.row.timed_row(name, judged, "sweep", size, self.device)
            })
            .collect()
    }
}

impl SweepResults {
    /// Points planned: every size at every precision.
    pub fn planned(&self) -> usize {
        self.sizes.len() * self.precisions.len()
    }
}
