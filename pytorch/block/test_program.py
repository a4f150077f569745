"""Tests of the program, pytorch/block, end to end on the CPU at a tiny block (hidden
64, 4 heads, MLP 96, 12 tokens, on a weights file made here): the file validates against
schema/result.schema.json, has the structure of Candle's (every phase, precision and op
class), and its derived numbers are the formulas of its own measurements; --output -,
--save-output, --dry-run; refusals in one line with their exit codes; and a row that
fails is that row's (status "error", exit 3). No timing is asserted."""

from __future__ import annotations

import json
import math
import os
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from block import run as blockrun
from block.cli import main as block_main
from block.formulas import BlockDims, amdahl, block_bytes, block_flops
from block.weights import read_header
from common.testkit import run_block, run_in_process, schema_validator, torch_or_skip, write_weights

TINY = ["--device", "cpu", "--iters", "2", "--warmup", "1"]
CLASSES = ["linear", "attention_matmul", "norm", "softmax", "rotary", "elementwise"]
CALLS = {
    "prefill": [7, 2, 2, 1, 2, 1 + 1 + 2 + 2 + 4],
    "decode": [7, 2, 2, 1, 2, 1 + 2 + 2 + 4 + 2],
}


class Runs(unittest.TestCase):
    """One real run on the CPU, all three default precisions, both phases."""

    @classmethod
    def setUpClass(cls):
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.d = Path(cls.dir.name)
        import torch

        write_weights(torch, d / "w.safetensors")
        cls.ran = run_block(
            *TINY,
            "--weights",
            str(d / "w.safetensors"),
            "--output",
            str(d / "p.json"),
            "--save-output",
            str(d / "y.safetensors"),
        )
        cls.file = json.loads((d / "p.json").read_text()) if cls.ran.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)

    def test_the_file_validates_against_the_schema(self):
        schema_validator(self)(self.file)
        f = self.file
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.3", "block"))
        self.assertEqual(f["environment"]["framework"], "pytorch")
        self.assertEqual(f["device"]["kind"], "cpu")

    def test_the_body_has_candle_s_structure(self):
        b = self.file["block"]
        shape = {"batch": 1, "seq": 12, "hidden": 64, "heads": 4, "kv_heads": 4, "head_dim": 16}
        shape |= {"mlp": 96}
        shape |= {"rms_eps": 1e-5, "rope_theta": 10000.0, "accuracy_seq": 12}
        self.assertEqual(b["shape"], shape)
        self.assertEqual((b["warmup"], b["iters"], b["seed"]), (1, 2, 42))
        self.assertEqual(b["params"], 4 * 64 * 64 + 3 * 64 * 96 + 2 * 64)
        self.assertEqual(b["time_source"], "median_ms")  # the CPU's clock: the wall
        self.assertNotIn("copy_ceiling_gb_per_s", b)  # each row has its own
        self.assertEqual([p["phase"] for p in b["phases"]], ["prefill", "decode"])
        for ph in b["phases"]:
            self.assertEqual([r["precision"] for r in ph["rows"]], ["fp32", "fp16", "bf16"])
            for r in ph["rows"]:
                self.assertEqual((r["status"], r["error"]), ("ok", None))
                m = r["measured"]
                self.assertEqual([p["class"] for p in m["parts"]], CLASSES)
                self.assertEqual([p["calls"] for p in m["parts"]], CALLS[ph["phase"]])
                for t in [m["end_to_end"], *m["parts"]]:
                    self.assertEqual(len(t["samples_wall_ms"]), 2)
                    self.assertEqual((t["gpu_median_ms"], t["samples_gpu_ms"]), (None, []))
                self.assertIsNone(m["peak_bytes"])  # no allocation peak on the CPU
        # Fused rows: RMSNorm and softmax per precision; no rope (blockparts.fused_calls).
        ops = [(f["op"], f["precision"]) for f in b["fused"]]
        want = [(op, p) for p in ["fp32", "fp16", "bf16"] for op in ["rms_norm", "softmax"]]
        self.assertEqual(ops, want)

    def test_derived_numbers_follow_from_the_measurements(self):
        b = self.file["block"]
        d = BlockDims(batch=1, seq=12, hidden=64, kv_width=64, mlp=96)
        for ph in b["phases"]:
            decode = ph["phase"] == "decode"
            self.assertEqual((ph["tokens"], ph["context"]), (d.tokens(decode), d.context(decode)))
            self.assertEqual(ph["flops"], block_flops(d, decode))
            rows = {r["precision"]: r["measured"] for r in ph["rows"]}
            fp32 = rows["fp32"]
            for p, m in rows.items():
                ms = m["end_to_end"]["median_ms"]
                elem = 4 if p == "fp32" else 2
                self.assertEqual(m["bytes_min"], block_bytes(d, decode, elem))
                self.assertAlmostEqual(m["tokens_per_s"], ph["tokens"] / (ms * 1e-3))
                self.assertAlmostEqual(m["gflop_per_s"], ph["flops"] / (ms * 1e-3) / 1e9)
                # Each row's ceiling is a copy of its own footprint.
                self.assertEqual(m["copy_bytes"], 2 * (m["bytes_min"] // 2))
                pct = 100 * m["gb_per_s"] / m["copy_ceiling_gb_per_s"]
                self.assertAlmostEqual(m["pct_of_copy_ceiling"], pct)
                medians = [x["median_ms"] for x in m["parts"]]
                self.assertAlmostEqual(m["parts_sum_ms"], sum(medians))
                self.assertAlmostEqual(m["matmul_share"], sum(medians[:2]) / sum(medians))
                s = sum(x["median_ms"] for x in fp32["parts"][:2]) / sum(medians[:2])
                self.assertAlmostEqual(m["matmul_speedup_vs_fp32"], s)
                self.assertAlmostEqual(m["speedup_vs_fp32"], fp32["end_to_end"]["median_ms"] / ms)
                self.assertAlmostEqual(m["amdahl_speedup_vs_fp32"], amdahl(fp32["matmul_share"], s))
                tokens = 12 if not decode else 1
                self.assertEqual(m["accuracy"]["tokens_checked"], tokens)
                worst = 1e-5 if p == "fp32" else 1e-1
                self.assertLess(m["accuracy"]["max_rel_err"], worst, (ph["phase"], p))
        for f in b["fused"]:
            ratio = f["composed"]["median_ms"] / f["fused"]["median_ms"]
            self.assertAlmostEqual(f["composed_over_fused"], ratio)
            self.assertLess(f["fused_bytes"], f["composed_bytes"])

    def test_the_tables_say_their_clock_and_that_tokens_per_s_is_one_layer_s(self):
        out = self.ran.stdout
        self.assertIn("tokens/s through one layer", out)
        titles = [line for line in out.splitlines() if line.startswith("=== ")]
        self.assertEqual(len(titles), 5, out)  # two per phase, and the fused rows
        for title in titles:
            self.assertIn("times from the wall clock", title)
        self.assertIn("% copy: each row's GB/s against a plain copy of the same footprint", out)

    def test_save_output_holds_each_row_s_checked_tokens(self):
        header, _ = read_header(self.d / "y.safetensors")
        for p in ["fp32", "fp16", "bf16"]:
            self.assertEqual(header[f"y_prefill_{p}"]["shape"], [1, 12, 64])
            self.assertEqual(header[f"y_decode_{p}"]["shape"], [1, 1, 64])
            self.assertEqual(header[f"y_decode_{p}"]["dtype"], "F32")
        self.assertEqual(len(header), 6)


class Modes(unittest.TestCase):
    """--output -, --dry-run, the refusals, and a failing row."""

    @classmethod
    def setUpClass(cls):
        cls.torch = torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        cls.d = Path(cls.dir.name)
        cls.weights = cls.d / "w.safetensors"
        write_weights(cls.torch, cls.weights, seq=6, hidden=32, heads=2, mlp=40)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def small(self, *args: str) -> list[str]:
        return [*TINY, "--weights", str(self.weights), "--dtypes", "fp32", *args]

    def test_output_dash_is_json_on_stdout_and_the_tables_on_stderr(self):
        r = run_block(*self.small("--phases", "decode", "--output", "-"))
        self.assertEqual(r.returncode, 0, r.stderr)
        f = json.loads(r.stdout)
        self.assertEqual([p["phase"] for p in f["block"]["phases"]], ["decode"])
        self.assertEqual(f["block"]["fused"], [])  # fused rows are at the prefill's shapes
        self.assertIn("=== block decode", r.stderr)

    def test_a_dry_run_checks_and_plans_and_writes_nothing(self):
        out = self.d / "sub" / "p.json"
        r = run_block(*self.small("--dry-run", "--output", str(out), "--hidden", "32"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dry run: pytorch block", r.stdout)
        self.assertIn("hidden 32, 2 heads of 16 (2 key/value), MLP 40", r.stdout)
        self.assertEqual(r.stdout.splitlines()[-1], f"would write: {out}")
        self.assertFalse(out.parent.exists())
        self.assertNotIn("device: cpu (", r.stderr)  # no device opened
        # A rehearsal plans the run before Candle writes the weights: not there yet is fine
        # in a dry run (a run refuses it: test_refusals_are_one_line_with_their_exit_codes).
        r = run_block("--weights", str(self.d / "later.safetensors"), "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("later.safetensors: not there yet", r.stdout)

    def refused(self, code: int, *args: str, says: str):
        r = run_block(*args)
        self.assertEqual(r.returncode, code, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertTrue(lines and lines[-1].startswith("error: "), r.stderr)
        self.assertIn(says, lines[-1])
        self.assertNotIn("Traceback", r.stderr)

    def test_refusals_are_one_line_with_their_exit_codes(self):
        w = ["--weights", str(self.weights)]
        d = self.d / "refusals"
        d.mkdir()
        self.refused(2, "--device", "cpu", says="--weights")  # required
        self.refused(2, *w, "--dtypes", "fp64", says="the block runs fp32, tf32 (on a GPU)")
        self.refused(2, *w, "--dtypes", "fp16-reduced", says="the block runs")
        self.refused(2, *w, "--dtypes", "f12", says="unknown dtype 'f12'")
        self.refused(2, *w, "--phases", "prefill,foo", says="unknown phase 'foo'")
        self.refused(2, *w, "--iters", "0", says="0 is not in 1..=100000")
        self.refused(2, *w, "--warmup", "10001", says="10001 is not in 0..=10000")
        self.refused(2, *w, "--accuracy-seq", "0", says="--accuracy-seq")
        self.refused(2, *w, "--hidden", "64", says="has hidden 32 (the block's shape comes")
        self.refused(2, *w, "--save-output", "-", says="the outputs are binary")
        self.refused(1, "--weights", str(d / "none"), says="cannot read")
        self.refused(1, *w, "--device", "cpu", "--dtypes", "tf32", says="needs a CUDA device")
        self.refused(1, *w, "--device", "cpu", "--output", str(d), says="is a directory")
        self.assertEqual(os.listdir(d), [])
        before = self.weights.read_bytes()
        for flag in ["--output", "--save-output"]:
            self.refused(1, *w, flag, str(self.weights), says="it is the weights file")
        self.assertEqual(self.weights.read_bytes(), before)

    def test_a_failing_row_is_that_row_s_and_exits_3(self):
        real = blockrun.time_parts

        def parts(torch, clock, block, phase, aux, dtype, plan):
            if dtype == torch.bfloat16 and phase == "decode":
                raise RuntimeError("an injected failure\nsecond line")
            return real(torch, clock, block, phase, aux, dtype, plan)

        out = self.d / "rows" / "p.json"
        args = self.small("--dtypes", "fp32,bf16", "--output", str(out))
        with mock.patch.object(blockrun, "time_parts", parts):
            code, _, err = run_in_process(*args, entry=block_main)
        self.assertEqual(code, 3, err)
        self.assertIn("error: 1 of 4 rows failed (bf16); the other rows", err)
        f = json.loads(out.read_text())
        phases = f["block"]["phases"]
        rows = [(p["phase"], r["precision"], r["status"]) for p in phases for r in p["rows"]]
        self.assertEqual(rows[-1], ("decode", "bf16", "error"))
        self.assertEqual([r[2] for r in rows[:3]], ["ok"] * 3)
        failed = phases[1]["rows"][1]
        self.assertEqual((failed["error"], failed["measured"]), ("an injected failure", None))
        # The prefill's bf16 row still has its speedup over fp32.
        self.assertTrue(math.isfinite(phases[0]["rows"][1]["measured"]["speedup_vs_fp32"]))
        schema_validator(self)(f)


if __name__ == "__main__":
    unittest.main()
