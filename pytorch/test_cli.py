"""Tests of cli.py through the program: bad input is one `error:` line, the documented exit
code, no traceback and no file."""

from __future__ import annotations

import os
import tempfile
import unittest
from pathlib import Path

from testkit import run_program, torch_or_skip


class Refusals(unittest.TestCase):
    """Bad input: one `error:` line, a non-zero exit, no traceback, no file."""

    def refused(self, code: int, *args: str, says: str, output: Path | None = None):
        extra = ["--output", str(output)] if output else []
        r = run_program(
            "--device", "cpu", "--size", "8", "--iters", "1", "--warmup", "0", *args, *extra
        )
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.strip().splitlines()
        self.assertTrue(lines and lines[-1].startswith("error: "), r.stderr)
        self.assertIn(says, lines[-1])
        self.assertNotIn("Traceback", r.stderr)
        return lines[-1]

    def test_bad_arguments_exit_2_before_anything_runs(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "out.json"
            self.refused(2, "--dtypes", "fp32,f12", says="unknown dtype 'f12'", output=out)
            self.refused(2, "--size", "0", says="--size", output=out)
            self.refused(2, "--size", "x", says="--size", output=out)
            self.refused(2, "--dtypes", "bf16-reduced", says="no switch", output=out)
            self.refused(2, "--device", "tpu", says="auto, cpu, cuda, cuda:N", output=out)
            self.refused(2, "--experiment", "cpu_vs_gpu", "--dtypes", "fp16", says="matmul only")
            self.assertEqual(os.listdir(d), [])
            # The whole stderr is the one line.
            r = run_program("--iters", "0")
            self.assertEqual((r.returncode, len(r.stderr.splitlines())), (2, 1), r.stderr)

    def test_cublas_modes_need_cuda(self):
        torch_or_skip()
        line = self.refused(1, "--dtypes", "fp32,tf32", says="--dtypes tf32")
        self.assertIn("needs a CUDA device", line)

    def test_unwritable_outputs_are_refused_before_the_run(self):
        torch_or_skip()
        with tempfile.TemporaryDirectory() as d:
            regular = Path(d) / "file"
            regular.write_text("keep")
            self.refused(1, says="cannot write", output=regular / "out.json")
            self.refused(1, says="is a directory", output=Path(d))
            self.assertEqual(sorted(os.listdir(d)), ["file"])
            self.assertEqual(regular.read_text(), "keep")

    def test_a_missing_gpu_is_one_line(self):
        torch = torch_or_skip()
        if torch.cuda.is_available():
            self.skipTest("this machine has a GPU")
        r = run_program("--device", "cuda", "--size", "8")
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr.strip(), r"^error: --device cuda:0: [^\n]*$")


if __name__ == "__main__":
    unittest.main()
