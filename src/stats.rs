//! Summary statistics of repeated measurements, as pure functions over `&[f64]`.
//! A benchmark reports the median (robust to the odd slow sample) with its spread,
//! never one sample. Quantiles interpolate linearly between order statistics
//! (numpy's default, "type 7"), so results match what a user gets in Python.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A result is flagged noisy when the interquartile range exceeds this share of
/// the median: its median then moves by more than timing differences we report.
pub const NOISY_IQR_OVER_MEDIAN: f64 = 0.10;

/// Summary of `n` samples. Units are the samples' own: the field that holds a
/// `Summary` names them (`wall_ms`, `gpu_ms`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p25: f64,
    pub p75: f64,
    pub p90: f64,
    /// Sample standard deviation (n - 1 in the denominator); 0 for one sample.
    pub stddev: f64,
    /// Coefficient of variation: stddev / mean.
    pub cv: f64,
    /// (p75 - p25) / median: the spread measure behind `noisy`.
    pub iqr_over_median: f64,
    pub noisy: bool,
}

/// Summarizes `samples`; `None` when there are none or one is not finite.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let q = |p| quantile_sorted(&sorted, p);
    let (mean, stddev) = (mean(samples), stddev(samples));
    let median = q(0.5);
    let iqr_over_median = if median > 0.0 {
        (q(0.75) - q(0.25)) / median
    } else {
        0.0
    };
    Some(Summary {
        n: samples.len(),
        median,
        mean,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        p10: q(0.10),
        p25: q(0.25),
        p75: q(0.75),
        p90: q(0.90),
        stddev,
        cv: if mean != 0.0 { stddev / mean } else { 0.0 },
        iqr_over_median,
        noisy: iqr_over_median > NOISY_IQR_OVER_MEDIAN,
    })
}

/// The `p` quantile (0..=1) of ascending `sorted`, interpolating linearly
/// between the two nearest ranks.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let rank = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

pub fn mean(samples: &[f64]) -> f64 {
    samples.iter().sum::<f64>() / samples.len() as f64
}

/// Sample standard deviation (Bessel's n - 1); 0 for fewer than two samples.
pub fn stddev(samples: &[f64]) -> f64 {
    if samples.len() < 2 {
        return 0.0;
    }
    let m = mean(samples);
    let ss: f64 = samples.iter().map(|x| (x - m).powi(2)).sum();
    (ss / (samples.len() - 1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let median = |x: &[f64]| summarize(x).unwrap().median;
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
    }

    #[test]
    fn quantiles_match_numpy_linear() {
        // numpy.percentile([1..=10], [10, 25, 75, 90]) = 1.9, 3.25, 7.75, 9.1
        let s = summarize(&(1..=10).map(f64::from).collect::<Vec<_>>()).unwrap();
        for (got, want) in [(s.p10, 1.9), (s.p25, 3.25), (s.p75, 7.75), (s.p90, 9.1)] {
            assert!((got - want).abs() < 1e-12, "{got} != {want}");
        }
        assert_eq!((s.min, s.max, s.n), (1.0, 10.0, 10));
    }

    #[test]
    fn stddev_is_the_sample_one() {
        // numpy.std([2, 4, 4, 4, 5, 5, 7, 9], ddof=1) = 2.138089935299395
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert!((stddev(&x) - 2.138089935299395).abs() < 1e-12);
        assert_eq!(mean(&x), 5.0);
        assert_eq!(stddev(&[1.0]), 0.0);
    }

    #[test]
    fn spread_flags_noisy_results() {
        let steady = summarize(&[10.0, 10.1, 9.9, 10.0, 10.05]).unwrap();
        assert!(!steady.noisy, "{steady:?}");
        let noisy = summarize(&[10.0, 14.0, 8.0, 12.0, 9.0]).unwrap();
        assert!(noisy.noisy, "{noisy:?}");
        assert!((noisy.cv - stddev(&[10.0, 14.0, 8.0, 12.0, 9.0]) / 10.6).abs() < 1e-12);
    }

    #[test]
    fn nothing_to_summarize() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn order_does_not_matter() {
        let a = summarize(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        let b = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(a, b);
    }
}
