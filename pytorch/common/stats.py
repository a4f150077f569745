"""Statistics of timed samples, operation for operation as src/stats.rs: mean, sample
standard deviation, linear-interpolation quantiles, the schema's Summary, and the
relative error of a checked result against its f64 reference."""

from __future__ import annotations

import math

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
