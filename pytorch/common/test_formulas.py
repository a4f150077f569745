"""Tests of formulas.py: FLOPs, GFLOP/s and payload bytes against the reference lab's
numbers, and which rows of C are checked."""

from __future__ import annotations

import unittest

from common import formulas


class Formulas(unittest.TestCase):
    def test_flops_bytes_and_the_reference_lab(self):
        self.assertEqual(formulas.matmul_flops(4096), 2.0 * 4096**3)
        # The reference: 4096 at 7.44 ms is 18473.0 GFLOP/s; payload 192 MiB at fp32.
        self.assertLess(abs(formulas.gflops(4096, 7.44) - 18473.0), 0.1)
        self.assertEqual(formulas.payload_bytes(4096, 4) / formulas.MIB, 192.0)
        self.assertEqual(formulas.payload_bytes(4096, 2) / formulas.MIB, 96.0)

    def test_checked_rows_are_evenly_spaced(self):
        self.assertEqual(formulas.accuracy_rows(64, 16), list(range(0, 64, 4)))
        self.assertEqual(formulas.accuracy_rows(4, 16), [0, 1, 2, 3])
        self.assertEqual(formulas.accuracy_rows(10, 3), [0, 3, 6])


if __name__ == "__main__":
    unittest.main()
