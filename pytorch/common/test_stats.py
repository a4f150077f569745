"""Tests of stats.py: the Summary's statistics and the relative error against hand values
(numpy's where it has them); the bootstrap interval of a ratio of medians on samples whose
answer is plain (src/stats.rs's cases: its draws are another generator's)."""

from __future__ import annotations

import math
import unittest

from common import stats
from common.testkit import close


class Statistics(unittest.TestCase):
    def test_median_of_odd_and_even_counts(self):
        self.assertEqual(stats.summarize([3.0, 1.0, 2.0])["median"], 2.0)
        self.assertEqual(stats.summarize([4.0, 1.0, 3.0, 2.0])["median"], 2.5)
        self.assertEqual(stats.summarize([7.0])["median"], 7.0)

    def test_quantiles_match_numpy_linear(self):
        # numpy.percentile([1..10], [10, 25, 75, 90]) = 1.9, 3.25, 7.75, 9.1
        s = stats.summarize([float(i) for i in range(1, 11)])
        for got, want in [(s["p10"], 1.9), (s["p25"], 3.25), (s["p75"], 7.75), (s["p90"], 9.1)]:
            self.assertTrue(close(got, want), f"{got} != {want}")
        self.assertEqual((s["min"], s["max"], s["n"]), (1.0, 10.0, 10))

    def test_stddev_is_the_sample_one(self):
        # numpy.std([2, 4, 4, 4, 5, 5, 7, 9], ddof=1) = 2.138089935299395
        x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
        self.assertTrue(close(stats.stddev(x), 2.138089935299395))
        self.assertEqual(stats.mean(x), 5.0)
        self.assertEqual(stats.stddev([1.0]), 0.0)

    def test_every_field_by_hand(self):
        # [1, 2, 4, 8]: mean 3.75; squares of deviations 7.5625 + 3.0625 + 0.0625 +
        # 18.0625 = 28.75, / 3 -> stddev sqrt(9.58333...); ranks 0.3, 0.75, 1.5, 2.25, 2.7.
        s = stats.summarize([8.0, 1.0, 4.0, 2.0])
        sd = math.sqrt(28.75 / 3)
        want = {
            "n": 4,
            "median": 3.0,
            "mean": 3.75,
            "min": 1.0,
            "max": 8.0,
            "p10": 1.3,
            "p25": 1.75,
            "p75": 5.0,
            "p90": 6.8,
            "stddev": sd,
            "cv": sd / 3.75,
            "iqr_over_median": (5.0 - 1.75) / 3.0,
            "noisy": True,
        }
        self.assertEqual(list(s), list(want), "the schema's field order")
        for k, v in want.items():
            self.assertTrue(close(s[k], v) if isinstance(v, float) else s[k] == v, f"{k}: {s[k]}")

    def test_spread_flags_noisy_results(self):
        self.assertFalse(stats.summarize([10.0, 10.1, 9.9, 10.0, 10.05])["noisy"])
        noisy = stats.summarize([10.0, 14.0, 8.0, 12.0, 9.0])
        self.assertTrue(noisy["noisy"])
        self.assertTrue(close(noisy["cv"], stats.stddev([10.0, 14.0, 8.0, 12.0, 9.0]) / 10.6))

    def test_nothing_to_summarize(self):
        self.assertIsNone(stats.summarize([]))
        self.assertIsNone(stats.summarize([1.0, math.nan]))
        self.assertIsNone(stats.summarize([1.0, math.inf]))

    def test_order_does_not_matter(self):
        self.assertEqual(
            stats.summarize([5.0, 1.0, 4.0, 2.0, 3.0]), stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
        )

    def test_relative_error_is_scaled_by_the_reference_rms(self):
        self.assertEqual(stats.relative_errors([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), (0.0, 0.0))
        # rms([3, 4]) = sqrt(12.5); errors 0 and 1.
        mx, mn = stats.relative_errors([3.0, 5.0], [3.0, 4.0])
        self.assertTrue(close(mx, 1 / math.sqrt(12.5)) and close(mn, 0.5 / math.sqrt(12.5)))


class Bootstrap(unittest.TestCase):
    def test_clearly_separated_samples_exclude_one(self):
        a = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]
        b = [2.0 * x for x in [1.01, 0.99, 1.0, 1.02, 0.98, 1.0]]
        i = stats.bootstrap_ratio(a, b)
        self.assertTrue(1.0 < i["lo"] <= 2.0 <= i["hi"] < 3.0, i)
        flipped = stats.bootstrap_ratio(b, a)
        self.assertTrue(flipped["hi"] < 1.0, "median(b) / median(a): the order matters")

    def test_identical_samples_hold_one(self):
        s = [1.0, 1.3, 0.8, 1.1, 0.9]
        i = stats.bootstrap_ratio(s, list(s))
        self.assertTrue(i["lo"] <= 1.0 <= i["hi"], i)
        self.assertEqual(list(i), ["lo", "hi"], "the schema's RatioInterval")

    def test_the_same_samples_give_the_same_interval(self):
        a, b = [1.0, 1.2, 0.9, 1.1], [1.5, 1.4, 1.7, 1.6]
        self.assertEqual(stats.bootstrap_ratio(a, b), stats.bootstrap_ratio(a, b), "seeded")

    def test_too_few_or_unusable_samples_give_none(self):
        three = [1.0, 2.0, 3.0]
        self.assertIsNone(stats.bootstrap_ratio([1.0, 2.0], three))
        self.assertIsNone(stats.bootstrap_ratio(three, [1.0, 2.0]))
        self.assertIsNone(stats.bootstrap_ratio([1.0, 0.0, 2.0], three))
        self.assertIsNone(stats.bootstrap_ratio(three, [1.0, -1.0, 2.0]))
        self.assertIsNone(stats.bootstrap_ratio(three, [1.0, math.inf, 2.0]))
        self.assertIsNone(stats.bootstrap_ratio(three, [1.0, math.nan, 2.0]))
        self.assertIsNotNone(stats.bootstrap_ratio(three, three))


if __name__ == "__main__":
    unittest.main()
