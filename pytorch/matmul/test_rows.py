"""Tests of rows.py: an error in one row ends that row only (as src/bench/square/mod.rs run_rows), in
a real CPU run at n = 64 with one precision's measurement made to fail; a failed pass
beside fp32 (beside.py) costs that row its side-by-side ratio only; and the GPU memory
baseline, which takes cuBLAS's workspace in before the inputs (on a fake torch.cuda, and
the order of the steps in a real CPU row)."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

from common import rows as shared_rows
from matmul import beside, rows
from common.precisions import PRECISIONS
from common.testkit import run_in_process, schema_validator, torch_or_skip
from common.timing import Plan


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

    def test_a_failed_pass_beside_fp32_keeps_the_row_and_says_so(self):
        torch_or_skip()
        real = beside.pair

        def pair(torch, device, plan, p, inputs):
            if p.name == "bf16":
                raise RuntimeError("injected pass failure\nsecond line, not kept")
            return real(torch, device, plan, p, inputs)

        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "m.json"
            with mock.patch.object(beside, "pair", pair):
                code, stdout, stderr = run_in_process(
                    "--device", "cpu", "--size", "64", "--iters", "2", "--warmup", "1",
                    "--dtypes", "fp32,bf16,fp16", "--output", str(out),
                )  # fmt: skip
            self.assertEqual(code, 0, stderr)
            f = json.loads(out.read_text())
        schema_validator(self)(f)
        by_name = {r["precision"]: r for r in f["matmul"]["precisions"]}
        self.assertEqual(by_name["bf16"]["status"], "ok", "the row's own measurement stands")
        self.assertNotIn("vs_fp32_side_by_side", by_name["bf16"])
        self.assertNotIn("vs_fp32_side_by_side", by_name["fp32"])
        s = by_name["fp16"]["vs_fp32_side_by_side"]
        # --iters 2: the pass takes MIN_SAMPLES rounds, so the ratio has an interval.
        self.assertEqual([len(s[k]["samples_wall_ms"]) for k in ["row", "fp32"]], [3, 3])
        self.assertLessEqual(s["interval"]["lo"], s["interval"]["hi"])
        why = "bf16: not timed beside fp32, its x fp32 stays apart (injected pass failure)"
        self.assertEqual([line for line in stderr.splitlines() if "not timed" in line], [why])
        bf16_line = next(line for line in stdout.splitlines() if line.startswith("bf16 "))
        self.assertNotIn("x [", bf16_line, "the table shows no ratio for it")

    def test_no_fp32_row_no_pass(self):
        torch = torch_or_skip()
        cpu, plan = torch.device("cpu"), Plan(0, 1)
        with contextlib.redirect_stderr(io.StringIO()):  # the rows' progress lines
            inputs = rows.Inputs(torch, 16, 4)
            out = rows.run_rows(torch, cpu, None, 16, plan, [PRECISIONS["fp16"]], inputs)
        failed_fp32 = {"precision": "fp32", "status": "error", "error": "x"}
        with mock.patch.object(beside, "pair", side_effect=AssertionError("no pass")):
            beside.fill(torch, cpu, plan, out, inputs)
            beside.fill(torch, cpu, plan, [failed_fp32, *out], inputs)
        self.assertNotIn("vs_fp32_side_by_side", out[0])

    def test_other_errors_keep_their_type(self):
        self.assertEqual(shared_rows.row_error(RuntimeError("CUDA error: x\nmore")), "CUDA error: x")
        self.assertEqual(shared_rows.row_error(KeyError("k")), "KeyError: 'k'")

    def test_failed_rows_are_counted_as_the_rust_completion(self):
        ok = {"precision": "fp32", "status": "ok"}
        bad = {"precision": "bf16", "status": "error"}
        self.assertEqual(shared_rows.failed_rows([ok, bad, None]), (["bf16"], 2))
        self.assertEqual(shared_rows.failed_rows([ok, None]), ([], 1))


class Workspace(unittest.TestCase):
    def test_the_baseline_is_read_after_a_matmul_in_the_rows_dtype(self):
        log = []

        class Tensor:
            def __matmul__(self, other):
                log.append("matmul")
                return Tensor()

        def ones(*shape, dtype, device):
            log.append(f"ones {shape} {dtype} on {device.type}")
            return Tensor()

        def synchronize(device):
            log.append("sync")

        def memory_allocated(device):
            log.append("memory_allocated")
            return 1234

        cuda = types.SimpleNamespace(synchronize=synchronize, memory_allocated=memory_allocated)
        torch = types.SimpleNamespace(ones=ones, cuda=cuda)
        gpu = types.SimpleNamespace(type="cuda")
        self.assertEqual(shared_rows.baseline(torch, gpu, "bf16-dtype"), 1234)
        n = shared_rows.WORKSPACE_WARMUP_N
        want = [f"ones {(n, n)} bf16-dtype on cuda", "matmul", "sync", "memory_allocated"]
        self.assertEqual(log, want)
        log.clear()
        self.assertIsNone(shared_rows.baseline(torch, types.SimpleNamespace(type="cpu"), "f32"))
        self.assertEqual(log, [], "nothing on the CPU")

    def test_the_baseline_comes_before_the_inputs_in_the_rows_gemm_mode(self):
        torch = torch_or_skip()
        inputs = rows.Inputs(torch, 16, 4)
        order = []
        real_baseline, real_place = rows.baseline, rows.place_inputs

        def baseline(torch_, device, dtype):
            # _get_cublas_allow_tf32: what a cuBLAS fp32 GEMM would run with now.
            order.append(("baseline", dtype, torch._C._get_cublas_allow_tf32()))
            return real_baseline(torch_, device, dtype)

        def place_inputs(inputs_, dtype, device):
            order.append(("inputs", dtype))
            return real_place(inputs_, dtype, device)

        with mock.patch.multiple(rows, baseline=baseline, place_inputs=place_inputs):
            out = rows.run_rows(
                torch, torch.device("cpu"), None, 16, Plan(0, 1),
                [PRECISIONS["tf32"], PRECISIONS["bf16"]], inputs,
            )  # fmt: skip
        self.assertEqual([r["status"] for r in out], ["ok", "ok"])
        f32, bf16 = torch.float32, torch.bfloat16
        # tf32's row in tf32 mode, bf16's not: the switch is the row's, not left behind.
        want = [("baseline", f32, True), ("inputs", f32)]
        want += [("baseline", bf16, False), ("inputs", bf16)]
        self.assertEqual(order, want)

    def test_the_memory_source_says_so(self):
        cuda = rows.memory_source(types.SimpleNamespace(type="cuda"))
        self.assertIn("cuBLAS workspace excluded", cuda)
        self.assertNotIn("\n", cuda)
        self.assertIn("not measured", rows.memory_source(types.SimpleNamespace(type="cpu")))


if __name__ == "__main__":
    unittest.main()
