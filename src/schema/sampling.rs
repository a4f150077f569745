//! How many samples a timed row takes, as a result file records it: a fixed
//! [`Plan`] (the reference lab's method) or an [`Adaptive`] one, the
//! [`StopRule`] that ended sampling, and the clock's own [`ClockOverhead`].
//! Plain data: the clock (`crate::clock`) applies these rules; these types only
//! describe them.

use std::fmt;

use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A fixed plan: how many untimed and timed runs to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub warmup: usize,
    pub iters: usize,
}

/// An adaptive plan: sample until the median is known to `target_rel_spread`,
/// within bounds on samples and time. After every sample the rules are read in
/// this order, and the first that applies decides:
/// 1. fewer than `min_samples`: go on (a median of one or two runs is no
///    median, so this floor beats every budget);
/// 2. `max_samples` reached: stop, `max_samples`;
/// 3. `max_time_s` of wall-clock time spent since the call began (warm-up,
///    setup and synchronization included: the budget a user waits for): stop,
///    `max_time`;
/// 4. less than `min_time_s` of measured time (the sum of the timed samples):
///    go on;
/// 5. the spread of the median, [`crate::stats::median_ci95_rel`], at or below
///    `target_rel_spread`: stop, `noise_target`. On a GPU the larger of the
///    wall-clock and CUDA-event spreads counts, so both medians are held to it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Adaptive {
    /// Untimed runs before sampling.
    pub warmup: usize,
    pub min_samples: usize,
    /// A cap on samples (and on the memory they take) for very fast work.
    pub max_samples: usize,
    pub min_time_s: f64,
    pub max_time_s: f64,
    /// Half-width of the median's 95% confidence interval over the median,
    /// e.g. 0.01 for +-1%.
    pub target_rel_spread: f64,
}

impl Default for Adaptive {
    /// Two warm-up runs, 10 to 10,000 samples, 0.1 to 10 s (PyTorch's
    /// `adaptive_autorange` allows 10 s too), median to +-1%.
    fn default() -> Self {
        Self {
            warmup: 2,
            min_samples: 10,
            max_samples: 10_000,
            min_time_s: 0.1,
            max_time_s: 10.0,
            target_rel_spread: 0.01,
        }
    }
}

/// How many samples the clock takes: a program builds one from its validated
/// flags (and calls [`Sampling::validate`] while parsing them).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Sampling {
    Fixed(Plan),
    Adaptive(Adaptive),
}

impl From<Plan> for Sampling {
    fn from(plan: Plan) -> Self {
        Self::Fixed(plan)
    }
}

impl From<Adaptive> for Sampling {
    fn from(plan: Adaptive) -> Self {
        Self::Adaptive(plan)
    }
}

impl Sampling {
    /// Refuses plans whose rules contradict each other or cannot be met.
    pub fn validate(&self) -> Result<()> {
        let Self::Adaptive(a) = self else {
            return Ok(());
        };
        if a.min_samples == 0 {
            bail!("adaptive sampling needs at least one sample (min_samples is 0)");
        }
        if a.max_samples < a.min_samples {
            bail!(
                "max_samples {} is below min_samples {}",
                a.max_samples,
                a.min_samples
            );
        }
        let times_ok = a.min_time_s.is_finite() && a.max_time_s.is_finite() && a.min_time_s >= 0.0;
        if !times_ok || a.max_time_s < a.min_time_s {
            bail!(
                "sampling times must satisfy 0 <= min <= max (min {} s, max {} s)",
                a.min_time_s,
                a.max_time_s
            );
        }
        if !(a.target_rel_spread.is_finite() && a.target_rel_spread > 0.0) {
            bail!(
                "the target spread must be a positive number (got {})",
                a.target_rel_spread
            );
        }
        Ok(())
    }

    /// Untimed runs before the first sample.
    pub fn warmup(&self) -> usize {
        match self {
            Self::Fixed(p) => p.warmup,
            Self::Adaptive(a) => a.warmup,
        }
    }

    /// Timed runs every row makes at least: a fixed plan's `iters`, an
    /// adaptive one's `min_samples`.
    pub fn least_samples(&self) -> usize {
        match self {
            Self::Fixed(p) => p.iters,
            Self::Adaptive(a) => a.min_samples,
        }
    }

    /// Runs (warm-up included) known in advance: fixed plans only.
    pub fn runs(&self) -> Option<usize> {
        match self {
            Self::Fixed(p) => Some(p.warmup + p.iters),
            Self::Adaptive(_) => None,
        }
    }
}

impl fmt::Display for Sampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(p) => write!(f, "warmup {}, iters {}", p.warmup, p.iters),
            Self::Adaptive(a) => write!(
                f,
                "warmup {}, adaptive: {}..{} samples, {}..{} s, until the median is within +-{}%",
                a.warmup,
                a.min_samples,
                a.max_samples,
                a.min_time_s,
                a.max_time_s,
                100.0 * a.target_rel_spread
            ),
        }
    }
}

/// The rule that ended sampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopRule {
    /// A fixed plan's `iters` were taken.
    FixedCount,
    /// The median's spread reached the adaptive target.
    NoiseTarget,
    /// The adaptive time budget ran out first.
    MaxTime,
    /// The adaptive sample cap was reached first.
    MaxSamples,
}

/// What the clock itself adds to a sample: an empty work item timed through
/// the same path (setup, synchronizations, events, two clock reads). Medians
/// and interquartile ranges in milliseconds; a result file records it next to
/// timings it qualifies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClockOverhead {
    pub samples: usize,
    pub wall_median_ms: f64,
    pub wall_iqr_ms: f64,
    /// CUDA events around nothing; `None` on the CPU.
    pub gpu_median_ms: Option<f64>,
    pub gpu_iqr_ms: Option<f64>,
}
