"""Tests of peaks.py: its datasheet table is src/peaks.rs's, entry for entry."""

from __future__ import annotations

import re
import unittest

from common import peaks
from common.precisions import PRECISIONS
from common.testkit import ROOT


class Datasheet(unittest.TestCase):
    def test_datasheet_table_is_the_rust_one(self):
        # src/peaks.rs is the source: every entry there must be here with the same numbers.
        text = (ROOT / "src" / "peaks.rs").read_text()
        entries = re.findall(
            r"names: &\[(.*?)\],\s*fp64: (None|Some\(([\d.]+)\)),\s*fp32: ([\d.]+),\s*"
            r"tf32: ([\d.]+),\s*fp16_bf16: ([\d.]+),\s*fp16_acc16: (None|Some\(([\d.]+)\))",
            text,
            re.S,
        )
        self.assertEqual(len(entries), 7, "src/peaks.rs changed shape: update this parser")
        count = 0
        for names, _, fp64, fp32, tf32, half, _, acc16 in entries:
            want = (
                float(fp64) if fp64 else None,
                float(fp32),
                float(tf32),
                float(half),
                float(acc16) if acc16 else None,
            )
            for name in re.findall(r'"([^"]+)"', names):
                self.assertEqual(peaks.DATASHEET_TFLOPS.get(name), want, name)
                count += 1
        self.assertEqual(count, len(peaks.DATASHEET_TFLOPS))
        self.assertEqual(peaks.datasheet_tflops("NVIDIA H200", PRECISIONS["bf16"]), 989.5)
        self.assertEqual(
            peaks.datasheet_tflops("NVIDIA GeForce RTX 4090", PRECISIONS["fp16-reduced"]), 330.3
        )
        self.assertIsNone(peaks.datasheet_tflops("NVIDIA GB10", PRECISIONS["fp32"]))


if __name__ == "__main__":
    unittest.main()
