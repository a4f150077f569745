//! Summary statistics of repeated measurements, as pure functions over `&[f64]`.
//! A benchmark reports the median (robust to the odd slow sample) with its spread,
//! never one sample. Quantiles interpolate linearly between order statistics
//! (numpy's default, "type 7"), so results match what a user gets in Python.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Half-width of the "no real difference" band around a ratio of 1: ±5%.
/// The bootstrap interval measures the noise within one run only; between two
/// runs of the same binary on the same machine the median also drifts (clock
/// boost, heat, other processes, memory placement) by a few percent, which no
/// resampling of one run can see. 5% sits above that drift on a quiet machine
/// and below the differences worth acting on (a precision or build change that
/// matters moves a matmul by tens of percent). The band is symmetric in ratio
/// space, 1/1.05 to 1.05, so swapping A and B swaps FAST and SLOW (`compare`'s
/// verdicts; `kernels`' "never slower").
pub const BAND: f64 = 0.05;

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

/// z of a two-sided 95% interval of the standard normal distribution.
const Z95: f64 = 1.959_963_984_540_054;

/// How tightly `samples` pin down their median: the half-width of a
/// distribution-free 95% confidence interval of the median, over the median.
/// The adaptive clock stops sampling when this falls to its target.
///
/// Exactly: sort the n samples, x(1) <= ... <= x(n); take the 1-based ranks
/// j = round(n/2 - z sqrt(n)/2) and k = round(1 + n/2 + z sqrt(n)/2), z = 1.96,
/// each clamped to 1..=n (the normal approximation of the binomial interval for
/// a median, as in Conover, "Practical Nonparametric Statistics"); the result
/// is (x(k) - x(j)) / (2 median). No distribution is assumed, an outlier moves
/// it by at most one rank, and it shrinks like 1/sqrt(n) on steady samples,
/// whereas IQR/median (PyTorch's `adaptive_autorange` test) and stddev/mean
/// (nvbench's `stdrel`) describe the samples and do not shrink with more of
/// them. Up to about n = 6 the ranks clamp to the whole range.
/// `None` for fewer than two samples, a non-finite sample, or a median <= 0.
pub fn median_ci95_rel(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_ci95_rel_sorted(&sorted)
}

/// [`median_ci95_rel`] of samples already in ascending order (finite).
pub fn median_ci95_rel_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    let median = quantile_sorted(sorted, 0.5);
    if n < 2 || median <= 0.0 {
        return None;
    }
    let half = Z95 * (n as f64).sqrt() / 2.0;
    let rank = |r: f64| (r.round().clamp(1.0, n as f64) as usize) - 1;
    let (j, k) = (
        rank(n as f64 / 2.0 - half),
        rank(1.0 + n as f64 / 2.0 + half),
    );
    Some((sorted[k] - sorted[j]) / (2.0 * median))
}

/// Error of `got` against `want`, each element's |got - want| divided by the
/// root-mean-square of `want` (a relative error that does not explode where an
/// output happens to be near zero). Returns (max, mean).
pub fn relative_errors(got: &[f64], want: &[f64]) -> (f64, f64) {
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt();
    let errs: Vec<f64> = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / rms)
        .collect();
    let max = errs.iter().copied().fold(0.0, f64::max);
    (max, mean(&errs))
}

/// Two-sided confidence level of the bootstrap interval.
pub const CONFIDENCE: f64 = 0.95;
/// Bootstrap resamples per row: the interval's ends move by well under 1% of
/// the ratio between seeds at this count.
pub const RESAMPLES: usize = 10_000;
/// Fixed seed, fresh for every row: a rerun prints the same intervals, and a
/// row's interval does not depend on which other rows the files hold.
pub const SEED: u64 = 0x5EED_C0DE;
/// Fewer samples than this on a side give no interval: the median of one or
/// two samples has no spread a resample could show.
pub const MIN_SAMPLES: usize = 3;

/// A confidence interval of a ratio B/A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// The most samples of one side the bootstrap resamples: a side with more is
/// stood for by a seeded random [`MAX_BOOTSTRAP_SAMPLES`] of them, drawn without
/// replacement ([`bootstrap_ratio`]). This bounds a row's work whatever the
/// file holds (3,000,000 samples took minutes; now a row takes the time of
/// 1,000 samples a side, 0.1 s), at the cost of an interval a little wider
/// than all of them would give (a median's spread over 1,000 samples is
/// already far inside the ±5% band); the ratio is still the files' medians.
pub const MAX_BOOTSTRAP_SAMPLES: usize = 1_000;

/// The [`CONFIDENCE`] percentile-bootstrap interval of median(b) / median(a)
/// (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13):
/// [`RESAMPLES`] times, resample each side with replacement (same size as the
/// side) and take the ratio of the two medians; the interval is the middle
/// [`CONFIDENCE`] share of those ratios. A side of more than
/// [`MAX_BOOTSTRAP_SAMPLES`] is first subsampled to that many (seeded: a rerun
/// gives the same interval). `None` when a side has fewer than
/// [`MIN_SAMPLES`] samples or one that is not a positive finite time.
pub fn bootstrap_ratio(a: &[f64], b: &[f64]) -> Option<Interval> {
    use rand::{rngs::StdRng, SeedableRng};
    let usable = |s: &[f64]| s.len() >= MIN_SAMPLES && s.iter().all(|x| x.is_finite() && *x > 0.0);
    if !usable(a) || !usable(b) {
        return None;
    }
    let (a, b) = (subsample(a), subsample(b));
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut scratch = Vec::with_capacity(a.len().max(b.len()));
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let mb = resampled_median(&b, &mut rng, &mut scratch);
            mb / resampled_median(&a, &mut rng, &mut scratch)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval {
        lo: quantile_sorted(&ratios, tail),
        hi: quantile_sorted(&ratios, 1.0 - tail),
    })
}

/// `samples` when there are at most [`MAX_BOOTSTRAP_SAMPLES`], else that many
/// of them drawn without replacement (a partial Fisher-Yates shuffle with its
/// own generator seeded from [`SEED`], so the resampling that follows is the
/// same as for a side that needed none).
fn subsample(samples: &[f64]) -> std::borrow::Cow<'_, [f64]> {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    if samples.len() <= MAX_BOOTSTRAP_SAMPLES {
        return std::borrow::Cow::Borrowed(samples);
    }
    let mut rng = StdRng::seed_from_u64(SEED.rotate_left(32));
    let mut all = samples.to_vec();
    for i in 0..MAX_BOOTSTRAP_SAMPLES {
        let j = rng.random_range(i..all.len());
        all.swap(i, j);
    }
    all.truncate(MAX_BOOTSTRAP_SAMPLES);
    std::borrow::Cow::Owned(all)
}

/// The median of one resample with replacement: the middle element(s) found
/// by selection, not a sort (the same value [`quantile_sorted`] gives at 0.5).
fn resampled_median(samples: &[f64], rng: &mut rand::rngs::StdRng, scratch: &mut Vec<f64>) -> f64 {
    use rand::Rng;
    scratch.clear();
    scratch.extend((0..samples.len()).map(|_| samples[rng.random_range(0..samples.len())]));
    let n = scratch.len();
    let lo = (n - 1) / 2;
    let (_, &mut low, above) = scratch.select_nth_unstable_by(lo, f64::total_cmp);
    if n % 2 == 1 {
        return low;
    }
    let high = above.iter().copied().min_by(f64::total_cmp).unwrap_or(low);
    low + (high - low) * 0.5
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

    #[test]
    fn median_ci_uses_the_binomial_ranks() {
        // n = 10: ranks 2 and 9 (the exact binomial table's 97.9% interval).
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let got = median_ci95_rel(&x).unwrap();
        assert!((got - (9.0 - 2.0) / (2.0 * 5.5)).abs() < 1e-12, "{got}");
        // n = 100: ranks round(50 - 9.8) = 40 and round(1 + 50 + 9.8) = 61.
        let x: Vec<f64> = (1..=100).map(f64::from).collect();
        let got = median_ci95_rel(&x).unwrap();
        assert!((got - (61.0 - 40.0) / (2.0 * 50.5)).abs() < 1e-12, "{got}");
        // Small n: the interval is the whole range.
        let got = median_ci95_rel(&[3.0, 1.0, 2.0]).unwrap();
        assert!((got - (3.0 - 1.0) / 4.0).abs() < 1e-12, "{got}");
    }

    #[test]
    fn median_ci_shrinks_with_more_samples_but_not_an_outlier() {
        // The same spread of values, repeated: more samples, tighter median.
        let base = [9.0, 9.5, 10.0, 10.5, 11.0];
        let few: Vec<f64> = base.repeat(2);
        let many: Vec<f64> = base.repeat(40);
        assert!(median_ci95_rel(&many).unwrap() < median_ci95_rel(&few).unwrap());
        // One wild sample among 100 steady ones leaves it at zero.
        let mut x = vec![10.0; 100];
        x[7] = 1000.0;
        assert_eq!(median_ci95_rel(&x), Some(0.0));
    }

    #[test]
    fn median_ci_needs_two_positive_finite_samples() {
        assert_eq!(median_ci95_rel(&[]), None);
        assert_eq!(median_ci95_rel(&[5.0]), None);
        assert_eq!(median_ci95_rel(&[1.0, f64::NAN]), None);
        assert_eq!(median_ci95_rel(&[0.0, 0.0, 0.0]), None);
    }

    #[test]
    fn the_resampled_median_is_the_sorted_one_and_a_huge_side_is_subsampled() {
        use rand::{rngs::StdRng, Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(7);
        let mut scratch = Vec::new();
        for n in [3, 4, 5, 20, 21] {
            let x: Vec<f64> = (0..n).map(|_| rng.random_range(1.0..2.0)).collect();
            let (mut r1, mut r2) = (StdRng::seed_from_u64(1), StdRng::seed_from_u64(1));
            let got = resampled_median(&x, &mut r1, &mut scratch);
            let mut sorted: Vec<f64> = (0..n).map(|_| x[r2.random_range(0..n)]).collect();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(got, quantile_sorted(&sorted, 0.5), "n = {n}");
        }
        // 300,000 samples (issue 52: 15 s a row, 3,000,000 minutes): a bounded
        // subsample of distinct samples, the same on every run (tests/compare.rs
        // runs such a row end to end).
        let a: Vec<f64> = (0..300_000).map(|i| 1.0 + i as f64).collect();
        let sub = subsample(&a);
        assert_eq!(sub.len(), MAX_BOOTSTRAP_SAMPLES);
        assert_eq!(sub, subsample(&a));
        let mut distinct = sub.to_vec();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert_eq!(distinct.len(), MAX_BOOTSTRAP_SAMPLES, "without replacement");
        assert!(matches!(subsample(&a[..5]), std::borrow::Cow::Borrowed(_)));
    }
}
