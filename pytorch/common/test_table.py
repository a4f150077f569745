"""Tests of table.py's ratio to fp32 measured side by side: the cell in its own clock's
column in src/export/views/matmul.rs's words ("0.66x [0.64, 0.67]", "(direction only)"
without an interval, "-" where there is none), and the note under the table."""

from __future__ import annotations

import contextlib
import io
import unittest

from common import table


def side(source: str, interval: dict | None, samples: int = 5) -> dict:
    gpu = source == "gpu_median_ms"
    timed = {"samples_wall_ms": [1.0] * samples, "samples_gpu_ms": [1.0] * samples if gpu else []}
    return {"speedup": 0.6612, "interval": interval, "time_source": source, "row": timed}


class Cells(unittest.TestCase):
    def test_the_ratio_sits_in_its_clocks_column_with_its_interval(self):
        r = {"vs_fp32_side_by_side": side("median_ms", {"lo": 0.6389, "hi": 0.6721})}
        self.assertEqual(table.beside(r, "median_ms"), "0.66x [0.64, 0.67]")
        self.assertEqual(table.beside(r, "gpu_median_ms"), "-")
        g = {"vs_fp32_side_by_side": side("gpu_median_ms", {"lo": 0.6389, "hi": 0.6721})}
        self.assertEqual(table.beside(g, "gpu_median_ms"), "0.66x [0.64, 0.67]")
        self.assertEqual(table.beside(g, "median_ms"), "-")

    def test_without_an_interval_a_direction_and_without_a_pass_a_dash(self):
        r = {"vs_fp32_side_by_side": side("median_ms", None)}
        self.assertEqual(table.beside(r, "median_ms"), "0.66x (direction only)")
        self.assertEqual(table.beside({}, "median_ms"), "-")
        self.assertEqual(table.beside({"vs_fp32_side_by_side": None}, "median_ms"), "-")

    def test_the_note_says_which_column_and_how_many_rounds(self):
        self.assertIsNone(table.vs_fp32_note([{"precision": "fp32"}]))
        rows = [{"precision": "fp32"}, {"vs_fp32_side_by_side": side("median_ms", None, 20)}]
        self.assertEqual(
            table.vs_fp32_note(rows),
            "x fp32: the row and fp32 timed in turn (A B A B, 20 rounds after each row's own "
            "sampling), fp32's median over the row's [its 95% bootstrap interval]",
        )
        gpu = table.vs_fp32_note([{"vs_fp32_side_by_side": side("gpu_median_ms", None)}])
        self.assertTrue(gpu.startswith("GPU x fp32: the row and fp32 timed in turn (A B A B, 5"))

    def test_the_table_has_both_columns(self):
        out = io.StringIO()
        summary = {"iqr_over_median": 0.01, "noisy": False}
        row = {"precision": "fp16", "status": "ok", "median_ms": 1.5, "gflops": 2.0}
        row |= {"wall_ms": summary, "gpu_median_ms": None, "pct_of_datasheet": None}
        row |= {"peak_mib": None, "payload_mib": 0.4, "accuracy": {"max_rel_err": 1e-3}}
        row["vs_fp32_side_by_side"] = side("median_ms", {"lo": 0.6389, "hi": 0.6721})
        with contextlib.redirect_stdout(out):
            table.print_rows("t", [row])
        header, line = out.getvalue().splitlines()[1:3]
        self.assertRegex(header, r"GFLOP/s +x fp32 +IQR/median +GPU ms +GPU x fp32 ")
        self.assertIn("  0.66x [0.64, 0.67]  ", line)


if __name__ == "__main__":
    unittest.main()
