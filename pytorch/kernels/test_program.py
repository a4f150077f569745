"""Tests of pytorch/kernels, the PyTorch twin of `kernels`, end to end on the CPU at
tiny sizes: the file validates against schema/result.schema.json and has the structure of
Candle's (every op, case and precision, PyTorch's op and the composed form, the ceiling),
its rates are its own bytes over its own times, its outputs are right against f64, the
cases and bytes are Candle's (so `compare` pairs them); --dry-run; refusals in one line
with their exit codes. No timing is asserted."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

from common.testkit import run_program, schema_validator, torch_or_skip
from kernels.run import cases, normwise, shape, traffic

TINY = ["--device", "cpu", "--iters", "2", "--warmup", "1", "--seq", "8", "--large-mib", "1"]


class Runs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = Path(cls.dir.name) / "k.json"
        cls.ran = run_program(
            *TINY, "--cases", "block-decode,large", "--output", str(cls.path), program="kernels"
        )
        cls.file = json.loads(cls.path.read_text()) if cls.ran.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)

    def test_the_file_validates_against_the_schema(self):
        schema_validator(self)(self.file)
        f = self.file
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.3", "kernels"))
        self.assertEqual(f["environment"]["framework"], "pytorch")

    def test_every_row_has_its_variants_and_rates(self):
        k = self.file["kernels"]
        self.assertEqual([c["name"] for c in k["cases"]], ["block-decode", "large"])
        rows = k["rows"]
        self.assertEqual(len(rows), 6 * 2 * 3)
        for r in rows:
            self.assertEqual(r["bytes_moved"], r["bytes_read"] + r["bytes_written"])
            self.assertEqual(r["ceiling"]["bytes_copied"], r["bytes_moved"] // 2)
            want = ["pytorch"] if r["op"] in ("copy", "add") else ["pytorch", "composed"]
            self.assertEqual([v["implementation"] for v in r["variants"]], want)
            for v in r["variants"]:
                m = v["measured"]
                self.assertEqual(v["status"], "ok")
                rate = r["bytes_moved"] / (m["time_ms"] * 1e-3) / 1e9
                self.assertAlmostEqual(m["gb_per_s"], rate, delta=1e-9 * rate)
                pct = 100 * m["gb_per_s"] / r["ceiling"]["gb_per_s"]
                self.assertAlmostEqual(m["pct_of_ceiling"], pct, delta=1e-9 * pct)
                bound = 1e-5 if r["precision"] == "fp32" else 2e-2
                self.assertLess(m["accuracy"]["max_rel_err"], bound, (r["op"], r["case"]))

    def test_cases_and_bytes_are_candles(self):
        # bench::kernels::tests::cases_take_the_block_and_smollm2_sizes, the CPU's defaults.
        got = [(c.name, c.tokens, c.hidden, c.heads, c.mlp, c.context)
               for c in cases(False, ["block-prefill", "smollm2-decode", "large"], None, 32)]
        self.assertEqual(got, [("block-prefill", 128, 512, 8, 1376, 128),
                               ("smollm2-decode", 1, 576, 9, 1536, 129),
                               ("large", 2048, 4096, 1, 4096, 4096)])
        c = cases(False, ["smollm2-decode"], None, 16)[0]
        self.assertEqual(shape("softmax", c), [9, 1, 129])
        self.assertEqual(traffic("rms_norm_mul", 100, 10, 2), (220, 200))
        self.assertEqual(traffic("add", 100, 10, 4), (800, 400))
        self.assertAlmostEqual(normwise([1.0, 0.0, 2.1], [1.0, 0.1, 2.0])[0], 0.05, places=12)


class Refusals(unittest.TestCase):
    def setUp(self):
        torch_or_skip()

    def refused(self, args, expect, code=2):
        ran = run_program(*args, program="kernels")
        self.assertEqual(ran.returncode, code, ran.stderr)
        errors = [line for line in ran.stderr.splitlines() if line.startswith("error")]
        self.assertEqual(len(errors), 1, ran.stderr)
        self.assertIn(expect, errors[0])

    def test_bad_flags_are_one_line_and_exit_2(self):
        self.refused(["--dtypes", "tf32"], "the kernels run fp32, fp16 and bf16")
        self.refused(["--cases", "huge"], "unknown case 'huge'")
        self.refused(["--ops", "matmul"], "unknown op 'matmul'")
        self.refused(["--large-mib", "0"], "--large-mib")

    def test_dry_run_plans_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "sub" / "k.json"
            ran = run_program("--dry-run", "--device", "cpu", "--output", str(out),
                              program="kernels")
            self.assertEqual(ran.returncode, 0, ran.stderr)
            self.assertIn("dry run: kernels", ran.stdout)
            self.assertIn("block-prefill", ran.stdout)
            self.assertFalse(out.parent.exists())


if __name__ == "__main__":
    unittest.main()
