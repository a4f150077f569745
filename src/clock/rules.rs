//! The stopping rules of a sampling plan, applied after every sample (see
//! [`crate::schema::Adaptive`] for their order).

use std::time::Duration;

use indicatif::ProgressBar;

use crate::schema::{Sampling, StopRule};
use crate::stats::median_ci95_rel_sorted;

/// The stopping rules' state: how many samples, their measured time, and
/// sorted copies of them, so the median's spread costs O(n) per sample rather
/// than a sort.
pub(super) struct Rules {
    sampling: Sampling,
    samples: usize,
    measured: Duration,
    wall_sorted: Vec<f64>,
    gpu_sorted: Vec<f64>,
}

impl Rules {
    pub(super) fn new(sampling: Sampling) -> Self {
        Self {
            sampling,
            samples: 0,
            measured: Duration::ZERO,
            wall_sorted: Vec::new(),
            gpu_sorted: Vec::new(),
        }
    }

    pub(super) fn record(&mut self, wall: Duration, gpu_ms: Option<f64>) {
        self.samples += 1;
        self.measured += wall;
        if let Sampling::Adaptive(_) = self.sampling {
            insert_sorted(&mut self.wall_sorted, wall.as_secs_f64() * 1e3);
            if let Some(ms) = gpu_ms {
                insert_sorted(&mut self.gpu_sorted, ms);
            }
        }
    }

    /// The rule that stops sampling now, if any (see [`crate::schema::Adaptive`]).
    pub(super) fn check(&self, elapsed: Duration, progress: &ProgressBar) -> Option<StopRule> {
        let a = match self.sampling {
            Sampling::Fixed(p) => return (self.samples >= p.iters).then_some(StopRule::FixedCount),
            Sampling::Adaptive(a) => a,
        };
        if self.samples < a.min_samples {
            return None;
        }
        if self.samples >= a.max_samples {
            return Some(StopRule::MaxSamples);
        }
        if elapsed.as_secs_f64() >= a.max_time_s {
            return Some(StopRule::MaxTime);
        }
        if self.measured.as_secs_f64() < a.min_time_s {
            return None;
        }
        let spread = self.spread()?;
        progress.set_message(format!(
            "median +-{:.2}% (target {:.2}%)",
            100.0 * spread,
            100.0 * a.target_rel_spread
        ));
        (spread <= a.target_rel_spread).then_some(StopRule::NoiseTarget)
    }

    /// The larger spread of the wall and (when timed) GPU medians; `None` when
    /// either cannot be estimated.
    fn spread(&self) -> Option<f64> {
        let wall = median_ci95_rel_sorted(&self.wall_sorted)?;
        if self.gpu_sorted.is_empty() {
            return Some(wall);
        }
        Some(wall.max(median_ci95_rel_sorted(&self.gpu_sorted)?))
    }
}

/// Inserts `x` into ascending `v`, keeping it ascending. NaN never arrives here:
/// durations are finite.
fn insert_sorted(v: &mut Vec<f64>, x: f64) {
    let at = v.partition_point(|&y| y <= x);
    v.insert(at, x);
}
