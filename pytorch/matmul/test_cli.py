"""Tests of cli.py through the program: bad input is one `error:` line, the documented exit
code, no traceback and no file; and --dry-run (dryrun.py), which checks what a run checks,
prints the plan, and opens no device and writes nothing."""

from __future__ import annotations

import os
import tempfile
import unittest
from pathlib import Path

from common.testkit import run_in_process, run_program, torch_or_skip


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


# gpu-run.sh's PyTorch step at 8192 (its dtypes without bf16-reduced, which PyTorch refuses).
GPU_STEP = ["--device", "cuda", "--size", "8192", "--iters", "20", "--warmup", "5"]
GPU_STEP += ["--dtypes", "fp64,fp32,tf32,fp16,fp16-reduced,bf16", "--no-cpu"]
GPU_STEP += ["--skip-host-memory-check"]


class DryRun(unittest.TestCase):
    def setUp(self):
        torch_or_skip()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.d = Path(self.dir.name)

    def test_the_gpu_steps_arguments_print_the_plan_and_touch_nothing(self):
        out = self.d / "new" / "x.json"
        r = run_program(*GPU_STEP, "--output", str(out), "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "dry run: pytorch matmul")
        self.assertRegex(lines[1], r"^torch: \d+\.\d+")
        want = [
            "device: cuda:0 (asked for with --device cuda:0; not opened in a dry run)",
            # fp64's matrices beside fp32's: 1536 + 768 MiB, in the pass that times them in turn.
            "size: 8192 (up to 2304.0 MiB of matrices at once on the device)",
            "iters: 20, warmup: 5",
            "precisions: fp64, fp32, tf32, fp16, fp16-reduced, bf16",
            "accuracy rows: 16",
            (
                "beside fp32: fp64, tf32, fp16, fp16-reduced, bf16, each in turn with fp32 "
                "(warmup 1, iters 20)"
            ),
            "cpu comparison: no (--no-cpu)",
            "host memory check: skipped (--skip-host-memory-check)",
            f"would write: {out}",
        ]
        self.assertEqual(lines[2:], want)
        self.assertEqual(os.listdir(self.d), [], "no file and no folder made")

    def test_a_refused_flag_exits_2_with_the_runs_line(self):
        for dtypes in ["fp32,bf16-reduced", "fp32,f12"]:
            args = [*GPU_STEP, "--dtypes", dtypes, "--output", str(self.d / "x.json")]
            dry, real = run_program(*args, "--dry-run"), run_program(*args)
            self.assertEqual((dry.returncode, dry.stdout), (2, ""), dry.stderr)
            self.assertEqual(dry.stderr, real.stderr, "the same one line as a real run")
            self.assertEqual(len(dry.stderr.splitlines()), 1, dry.stderr)
            self.assertIn(dtypes.split(",")[1], dry.stderr)
        self.assertEqual(os.listdir(self.d), [])

    def test_what_a_run_refuses_before_measuring_a_dry_run_refuses_alike(self):
        regular = self.d / "file"
        regular.write_text("keep")
        cases = [
            (["--dtypes", "fp32,tf32"], "--dtypes tf32: a cuBLAS GEMM mode"),
            (["--output", str(self.d)], "is a directory"),
            (["--output", str(regular / "out.json")], "cannot write"),
            (["--output", str(regular / "sub" / "out.json")], "cannot write"),
        ]
        for args, says in cases:
            args = ["--device", "cpu", "--size", "8", "--iters", "1", "--warmup", "0", *args]
            # In this process: torch is imported once for all of them.
            dry, real = run_in_process(*args, "--dry-run"), run_in_process(*args)
            self.assertEqual((dry[0], real[0]), (1, 1), args)
            self.assertEqual(dry[1], "")
            line = dry[2].strip()
            self.assertEqual(line, real[2].strip().splitlines()[-1], args)
            self.assertIn(says, line)
        self.assertEqual(sorted(os.listdir(self.d)), ["file"])
        self.assertEqual(regular.read_text(), "keep")

    def test_cpu_vs_gpu_and_auto(self):
        code, stdout, stderr = run_in_process("--experiment", "cpu_vs_gpu", "--dry-run")
        self.assertEqual(code, 0, stderr)
        lines = stdout.splitlines()
        self.assertEqual(lines[0], "dry run: pytorch cpu_vs_gpu")
        self.assertIn("precisions: fp32", lines)
        self.assertIn("cpu comparison: yes (the experiment: warmup 1, iters 5)", lines)
        self.assertIn("host memory check: on (made when the run starts)", lines)
        self.assertEqual(lines[-1], "would write: nothing (no --output)")
        self.assertFalse([line for line in lines if line.startswith("beside fp32")])
        # Without fp32 among the precisions, no pass and only the widest row's matrices.
        code, stdout, stderr = run_in_process(
            "--device", "cpu", "--size", "1024", "--dtypes", "fp16,bf16", "--dry-run"
        )
        self.assertEqual(code, 0, stderr)
        self.assertIn("beside fp32: no (fp32 is not among the precisions)", stdout.splitlines())
        # 6 MiB of bf16 (or fp16) and their 12 MiB of f32 copies on the CPU.
        self.assertIn("size: 1024 (up to 18.0 MiB of matrices at once on the device)", stdout)
        code, stdout, stderr = run_in_process("--device", "cpu", "--dtypes", "fp32", "--dry-run")
        self.assertIn("beside fp32: no (fp32 is the only precision)", stdout.splitlines())
        # auto on a CUDA build: the device is the run's to find, so tf32 waits for it.
        code, stdout, stderr = run_in_process("--dtypes", "tf32", "--dry-run")
        self.assertEqual(code, 0, stderr)
        self.assertIn("device: auto (GPU 0 if one answers when the run starts", stdout)


if __name__ == "__main__":
    unittest.main()
