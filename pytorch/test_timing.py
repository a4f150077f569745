"""Tests of timing.py: the reference lab's CPU plan."""

from __future__ import annotations

import unittest

import timing


class Plans(unittest.TestCase):
    def test_cpu_plan_follows_the_reference(self):
        self.assertEqual(timing.cpu_plan(20), timing.Plan(warmup=1, iters=5))
        self.assertEqual(timing.cpu_plan(4).iters, 3)


if __name__ == "__main__":
    unittest.main()
