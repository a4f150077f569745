"""Statistics of timed samples, operation for operation as src/stats.rs: mean, sample
standard deviation, linear-interpolation quantiles, the schema's Summary, the relative
error of a checked result against its f64 reference, and the bootstrap interval of a ratio
of two medians (what a ratio measured side by side carries)."""

from __future__ import annotations

import math
import random

# A row whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISY_IQR_OVER_MEDIAN = 0.10


def mean(samples: list[float]) -> float:
    # A plain left-to-right sum, as Rust's `iter().sum()`: Python 3.12's sum() of
    # floats compensates rounding and would differ in the last bits.
    total = 0.0
    for x in samples:
        total += x
    return total / len(samples)


def stddev(samples: list[float]) -> float:
    """Sample standard deviation (n - 1); 0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    m = mean(samples)
    ss = 0.0
    for x in samples:
        ss += (x - m) ** 2
    return math.sqrt(ss / (len(samples) - 1))


def quantile_sorted(sorted_samples: list[float], p: float) -> float:
    """Linear interpolation between the two nearest ranks (numpy's default)."""
    rank = min(max(p, 0.0), 1.0) * (len(sorted_samples) - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (rank - lo)


def summarize(samples: list[float]) -> dict | None:
    """The schema's Summary; None when there are no samples or one is not finite."""
    if not samples or any(not math.isfinite(x) for x in samples):
        return None
    s = sorted(samples)
    m, sd, median = mean(samples), stddev(samples), quantile_sorted(s, 0.5)
    p25, p75 = quantile_sorted(s, 0.25), quantile_sorted(s, 0.75)
    iqr_over_median = (p75 - p25) / median if median > 0.0 else 0.0
    return {
        "n": len(samples),
        "median": median,
        "mean": m,
        "min": s[0],
        "max": s[-1],
        "p10": quantile_sorted(s, 0.10),
        "p25": p25,
        "p75": p75,
        "p90": quantile_sorted(s, 0.90),
        "stddev": sd,
        "cv": sd / m if m != 0.0 else 0.0,
        "iqr_over_median": iqr_over_median,
        "noisy": iqr_over_median > NOISY_IQR_OVER_MEDIAN,
    }


def relative_errors(got: list[float], want: list[float]) -> tuple[float, float]:
    """(max, mean) of |got - want| / rms(want): a relative error that does not explode
    where one output happens to be near zero."""
    ss = 0.0
    for w in want:
        ss += w * w
    rms = math.sqrt(ss / len(want))
    errs = [abs(g - w) / rms if rms > 0 else math.inf for g, w in zip(got, want)]
    worst = 0.0
    for e in errs:  # as Rust's fold with f64::max: a NaN never wins
        if e > worst:
            worst = e
    return worst, mean(errs)


# src/stats.rs's bootstrap constants: the two-sided confidence level, resamples per
# interval, the seed (fresh for every interval, so a rerun prints the same ones), and the
# fewest samples a side that give an interval.
CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0x5EED_C0DE
MIN_SAMPLES = 3
# A side with more samples is resampled from a seeded random MAX_BOOTSTRAP_SAMPLES of them,
# drawn without replacement (src/stats.rs: a row's work is bounded whatever a file holds).
MAX_BOOTSTRAP_SAMPLES = 1_000


def bootstrap_ratio(a: list[float], b: list[float]) -> dict | None:
    """The CONFIDENCE percentile-bootstrap interval of median(b) / median(a), as
    src/stats.rs bootstrap_ratio (Efron and Tibshirani, 1993, ch. 13): RESAMPLES times,
    resample each side with replacement (same size as the side, a side of more than
    MAX_BOOTSTRAP_SAMPLES first subsampled to that many without replacement), b's first, and
    take the ratio of the two medians; the interval is the middle CONFIDENCE share of those ratios,
    as the schema's RatioInterval {"lo", "hi"}. None when a side has fewer than
    MIN_SAMPLES samples or one that is not a positive finite time: a median of one or two
    samples has no spread a resample could show.

    The draws are Python's random.Random(SEED), not Rust's StdRng: the two programs'
    intervals agree in method and constants, not bit for bit (at this many resamples the
    ends move by well under 1% of the ratio between generators)."""

    def usable(s: list[float]) -> bool:
        return len(s) >= MIN_SAMPLES and all(math.isfinite(x) and x > 0.0 for x in s)

    if not usable(a) or not usable(b):
        return None

    def subsample(s: list[float]) -> list[float]:
        if len(s) <= MAX_BOOTSTRAP_SAMPLES:
            return s
        return random.Random(SEED ^ 0x5EED).sample(s, MAX_BOOTSTRAP_SAMPLES)

    a, b = subsample(a), subsample(b)
    rng = random.Random(SEED)

    def resampled_median(s: list[float]) -> float:
        return quantile_sorted(sorted(rng.choices(s, k=len(s))), 0.5)

    ratios = []
    for _ in range(RESAMPLES):
        mb = resampled_median(b)
        ratios.append(mb / resampled_median(a))
    ratios.sort()
    tail = (1.0 - CONFIDENCE) / 2.0
    return {"lo": quantile_sorted(ratios, tail), "hi": quantile_sorted(ratios, 1.0 - tail)}
