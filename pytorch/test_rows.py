"""Tests of rows.py: an error in one row ends that row only (as src/matmul.rs run_rows), in
a real CPU run at n = 64 with one precision's measurement made to fail."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import rows
from testkit import run_in_process, schema_validator, torch_or_skip


class Isolation(unittest.TestCase):
    def test_a_failed_row_keeps_the_others_and_the_file_and_exits_3(self):
        torch_or_skip()
        real = rows.measure

        def measure(torch, device, gpu_name, n, plan, p, inputs):
            if p.name == "bf16":
                raise RuntimeError("injected failure\nsecond line, not kept")
            return real(torch, device, gpu_name, n, plan, p, inputs)

        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "m.json"
            with mock.patch.object(rows, "measure", measure):
                code, stdout, stderr = run_in_process(
                    "--device", "cpu", "--size", "64", "--iters", "2", "--warmup", "1",
                    "--dtypes", "fp32,bf16,fp16", "--output", str(out),
                )  # fmt: skip
            self.assertEqual(code, 3, stderr)
            self.assertEqual(
                stderr.strip().splitlines()[-1],
                "error: 1 of 3 rows failed (bf16); the other rows and the report were kept",
            )
            self.assertNotIn("Traceback", stderr)
            f = json.loads(out.read_text())
        schema_validator(self)(f)
        by_name = {r["precision"]: r for r in f["matmul"]["precisions"]}
        self.assertEqual(list(by_name), ["fp32", "bf16", "fp16"], "every row, in order")
        for name in ["fp32", "fp16"]:
            self.assertEqual((by_name[name]["status"], by_name[name]["error"]), ("ok", None))
            self.assertGreater(by_name[name]["median_ms"], 0)
        failed = by_name["bf16"]
        self.assertEqual((failed["status"], failed["error"]), ("error", "injected failure"))
        self.assertNotIn("median_ms", failed, "a failed row has no measurement")
        self.assertEqual(f["matmul"]["cpu_fp32_ms"], by_name["fp32"]["median_ms"])
        self.assertIn("error: injected failure", stdout, "the table shows the failed row")

    def test_other_errors_keep_their_type(self):
        self.assertEqual(rows.row_error(RuntimeError("CUDA error: x\nmore")), "CUDA error: x")
        self.assertEqual(rows.row_error(KeyError("k")), "KeyError: 'k'")

    def test_failed_rows_are_counted_as_the_rust_completion(self):
        ok = {"precision": "fp32", "status": "ok"}
        bad = {"precision": "bf16", "status": "error"}
        self.assertEqual(rows.failed_rows([ok, bad, None]), (["bf16"], 2))
        self.assertEqual(rows.failed_rows([ok, None]), ([], 1))


if __name__ == "__main__":
    unittest.main()
