"""Tests of the PyTorch reference (pytorch/matmul.py): its statistics against hand values,
real CPU runs at a small size whose files carry every field of result schema 2.0 with the
right types and validate against schema/result.schema.json, and its refusals. No timing
is asserted. Run: `just test-pytorch` (python -m unittest discover -s pytorch).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import matmul as m  # noqa: E402

SCHEMA = ROOT / "schema" / "result.schema.json"


def close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-12


class Statistics(unittest.TestCase):
    def test_median_of_odd_and_even_counts(self):
        self.assertEqual(m.summarize([3.0, 1.0, 2.0])["median"], 2.0)
        self.assertEqual(m.summarize([4.0, 1.0, 3.0, 2.0])["median"], 2.5)
        self.assertEqual(m.summarize([7.0])["median"], 7.0)

    def test_quantiles_match_numpy_linear(self):
        # numpy.percentile([1..10], [10, 25, 75, 90]) = 1.9, 3.25, 7.75, 9.1
        s = m.summarize([float(i) for i in range(1, 11)])
        for got, want in [(s["p10"], 1.9), (s["p25"], 3.25), (s["p75"], 7.75), (s["p90"], 9.1)]:
            self.assertTrue(close(got, want), f"{got} != {want}")
        self.assertEqual((s["min"], s["max"], s["n"]), (1.0, 10.0, 10))

    def test_stddev_is_the_sample_one(self):
        # numpy.std([2, 4, 4, 4, 5, 5, 7, 9], ddof=1) = 2.138089935299395
        x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
        self.assertTrue(close(m.stddev(x), 2.138089935299395))
        self.assertEqual(m.mean(x), 5.0)
        self.assertEqual(m.stddev([1.0]), 0.0)

    def test_every_field_by_hand(self):
        # [1, 2, 4, 8]: mean 3.75; squares of deviations 7.5625 + 3.0625 + 0.0625 +
        # 18.0625 = 28.75, / 3 -> stddev sqrt(9.58333...); ranks 0.3, 0.75, 1.5, 2.25, 2.7.
        s = m.summarize([8.0, 1.0, 4.0, 2.0])
        sd = math.sqrt(28.75 / 3)
        want = {
            "n": 4,
            "median": 3.0,
            "mean": 3.75,
            "min": 1.0,
            "max": 8.0,
            "p10": 1.3,
            "p25": 1.75,
            "p75": 5.0,
            "p90": 6.8,
            "stddev": sd,
            "cv": sd / 3.75,
            "iqr_over_median": (5.0 - 1.75) / 3.0,
            "noisy": True,
        }
        self.assertEqual(list(s), list(want), "the schema's field order")
        for k, v in want.items():
            self.assertTrue(close(s[k], v) if isinstance(v, float) else s[k] == v, f"{k}: {s[k]}")

    def test_spread_flags_noisy_results(self):
        self.assertFalse(m.summarize([10.0, 10.1, 9.9, 10.0, 10.05])["noisy"])
        noisy = m.summarize([10.0, 14.0, 8.0, 12.0, 9.0])
        self.assertTrue(noisy["noisy"])
        self.assertTrue(close(noisy["cv"], m.stddev([10.0, 14.0, 8.0, 12.0, 9.0]) / 10.6))

    def test_nothing_to_summarize(self):
        self.assertIsNone(m.summarize([]))
        self.assertIsNone(m.summarize([1.0, math.nan]))
        self.assertIsNone(m.summarize([1.0, math.inf]))

    def test_order_does_not_matter(self):
        self.assertEqual(
            m.summarize([5.0, 1.0, 4.0, 2.0, 3.0]), m.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
        )


class Formulas(unittest.TestCase):
    def test_flops_bytes_and_the_reference_lab(self):
        self.assertEqual(m.matmul_flops(4096), 2.0 * 4096**3)
        # The reference: 4096 at 7.44 ms is 18473.0 GFLOP/s; payload 192 MiB at fp32.
        self.assertLess(abs(m.gflops(4096, 7.44) - 18473.0), 0.1)
        self.assertEqual(m.payload_bytes(4096, 4) / m.MIB, 192.0)
        self.assertEqual(m.payload_bytes(4096, 2) / m.MIB, 96.0)

    def test_relative_error_is_scaled_by_the_reference_rms(self):
        self.assertEqual(m.relative_errors([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]), (0.0, 0.0))
        # rms([3, 4]) = sqrt(12.5); errors 0 and 1.
        mx, mn = m.relative_errors([3.0, 5.0], [3.0, 4.0])
        self.assertTrue(close(mx, 1 / math.sqrt(12.5)) and close(mn, 0.5 / math.sqrt(12.5)))

    def test_checked_rows_are_evenly_spaced(self):
        self.assertEqual(m.accuracy_rows(64, 16), list(range(0, 64, 4)))
        self.assertEqual(m.accuracy_rows(4, 16), [0, 1, 2, 3])
        self.assertEqual(m.accuracy_rows(10, 3), [0, 3, 6])

    def test_cpu_plan_follows_the_reference(self):
        self.assertEqual(m.cpu_plan(20), m.Plan(warmup=1, iters=5))
        self.assertEqual(m.cpu_plan(4).iters, 3)

    def test_non_finite_floats_become_strings(self):
        v = m.json_safe({"a": [1.5, math.inf, -math.inf, math.nan], "b": {"c": math.nan}})
        self.assertEqual(json.dumps(v), '{"a": [1.5, "inf", "-inf", "NaN"], "b": {"c": "NaN"}}')

    def test_dtype_names_and_aliases(self):
        names = [p.name for p in m.parse_dtypes("F32, bfloat16,fp16-reduced,f32,tf32,float64")]
        self.assertEqual(names, ["fp32", "bf16", "fp16-reduced", "tf32", "fp64"])

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
                self.assertEqual(m.DATASHEET_TFLOPS.get(name), want, name)
                count += 1
        self.assertEqual(count, len(m.DATASHEET_TFLOPS))
        self.assertEqual(m.datasheet_tflops("NVIDIA H200", m.PRECISIONS["bf16"]), 989.5)
        self.assertEqual(
            m.datasheet_tflops("NVIDIA GeForce RTX 4090", m.PRECISIONS["fp16-reduced"]), 330.3
        )
        self.assertIsNone(m.datasheet_tflops("NVIDIA GB10", m.PRECISIONS["fp32"]))


class Files(unittest.TestCase):
    def test_atomic_write_leaves_the_target_whole_or_untouched(self):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "a" / "out.json"
            m.write_json_atomic(path, {"x": 1})
            self.assertEqual(json.loads(path.read_text()), {"x": 1})
            with self.assertRaises(TypeError):  # not serializable: fails before writing
                m.write_json_atomic(path, {"x": object()})
            self.assertEqual(json.loads(path.read_text()), {"x": 1})
            self.assertEqual(os.listdir(path.parent), ["out.json"], "no temporary file left")

    def test_non_regular_targets_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            real = Path(d) / "real.json"
            real.write_text("keep")
            link = Path(d) / "link.json"
            link.symlink_to(real)
            for target in [Path(d), link, Path(d) / "real.json" / "below.json"]:
                with self.assertRaises(m.Failure, msg=str(target)):
                    m.write_json_atomic(target, {})
            self.assertEqual(real.read_text(), "keep")
            self.assertTrue(link.is_symlink())


def torch_or_skip():
    try:
        return m.import_torch()
    except m.Failure as e:
        if os.environ.get("CI"):  # CI makes the venv: there a missing torch is a failure
            raise
        raise unittest.SkipTest(str(e)) from e


class Modes(unittest.TestCase):
    def test_gemm_switches_are_set_for_one_row_then_restored(self):
        torch = torch_or_skip()
        cublas = torch.backends.cuda.matmul
        switches = m.gemm_switches(torch)
        self.assertIn("allow_tf32", switches)
        before = {k: getattr(cublas, k) for k in switches}
        # _get_cublas_allow_tf32 is Context::allowTF32CuBLAS, what every cuBLAS fp32 GEMM
        # asks: it raises when torch's two TF32 settings disagree, so this checks on the
        # CPU that a tf32 row on a GPU will not fail.
        with m.GemmMode(torch, m.PRECISIONS["tf32"]):
            self.assertTrue(torch._C._get_cublas_allow_tf32())
        with m.GemmMode(torch, m.PRECISIONS["fp32"]):
            self.assertFalse(torch._C._get_cublas_allow_tf32())
        with m.GemmMode(torch, m.PRECISIONS["fp16-reduced"]):
            if "allow_fp16_accumulation" in switches:
                self.assertTrue(cublas.allow_fp16_accumulation)
            self.assertFalse(torch._C._get_cublas_allow_tf32())
        self.assertEqual({k: getattr(cublas, k) for k in switches}, before)


def run_program(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HERE / "matmul.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


# Every field of SCHEMA.md with its JSON types ("null" where it may be null).
ENVELOPE = {
    "schema_version": str,
    "experiment": str,
    "created_utc": str,
    "command": str,
    "environment": dict,
    "device": dict,
}
ENVIRONMENT = {
    "framework": str,
    "framework_version": str,
    "suite_version": str,
    "git_commit": (str, None),
    "os": str,
    "arch": str,
    "cpu_model": str,
    "cpu_threads_available": int,
    "compute_threads": int,
    "build_features": list,
    "target_features": list,
    "profile": (str, None),
    "cuda_build_version": (str, None),
}
DEVICE = {
    "kind": str,
    "label": str,
    "ordinal": (int, None),
    "name": str,
    "chosen_because": str,
    "compute_capability": (str, None),
    "sm_count": (int, None),
    "total_memory_bytes": (int, None),
    "free_memory_bytes_at_start": (int, None),
    "driver_cuda_version": (str, None),
    "memory_pool": (bool, None),
}
MATMUL = {
    "size": int,
    "warmup": int,
    "iters": int,
    "gpu_iters": (int, None),
    "cpu_iters": (int, None),
    "device": str,
    "precisions": list,
    "cpu_fp32_ms": (float, None),
    "gpu_speedup_fp32": (float, None),
    "cpu_fp32": (dict, None),
    "flops_per_matmul": float,
}
CPU_VS_GPU = {
    "size": int,
    "precision": str,
    "cpu_threads": int,
    "cpu_warmup": int,
    "cpu_iters": int,
    "gpu_warmup": int,
    "gpu_iters": int,
    "cpu": dict,
    "gpu": (dict, None),
    "gpu_skipped": (str, None),
    "cpu_fp32_ms": (float, None),
    "gpu_fp32_ms": (float, None),
    "gpu_speedup_fp32": (float, None),
}
ROW = {
    "precision": str,
    "dtype": str,
    "element_bytes": int,
    "gemm_reduced_precision": bool,
    "memory_source": str,
    "status": str,
    "error": (str, None),
}
MEASURED = {
    "median_ms": float,
    "gflops": float,
    "peak_mib": (float, None),
    "peak_bytes": (int, None),
    "payload_mib": float,
    "payload_bytes": int,
    "gpu_median_ms": (float, None),
    "gpu_gflops": (float, None),
    "datasheet_tflops": (float, None),
    "pct_of_datasheet": (float, None),
    "wall_ms": dict,
    "gpu_ms": (dict, None),
    "samples_wall_ms": list,
    "samples_gpu_ms": list,
    "accuracy": dict,
}
SUMMARY = {
    "n": int,
    "median": float,
    "mean": float,
    "min": float,
    "max": float,
    "p10": float,
    "p25": float,
    "p75": float,
    "p90": float,
    "stddev": float,
    "cv": float,
    "iqr_over_median": float,
    "noisy": bool,
}
ACCURACY = {"rows_checked": int, "max_rel_err": float, "mean_rel_err": float}


class Runs(unittest.TestCase):
    """Real runs of the program on the CPU at n = 64, once for the class."""

    @classmethod
    def setUpClass(cls):
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        d = Path(cls.dir.name)
        cls.matmul = run_program(
            "--device",
            "cpu",
            "--size",
            "64",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--dtypes",
            "fp64,fp32,fp16,bf16",
            "--output",
            str(d / "m.json"),
        )
        cls.cpu_vs_gpu = run_program(
            "--experiment",
            "cpu_vs_gpu",
            "--device",
            "cpu",
            "--size",
            "64",
            "--iters",
            "12",
            "--warmup",
            "1",
            "--output",
            str(d / "c.json"),
        )
        cls.files = {}
        for name, run in [("m.json", cls.matmul), ("c.json", cls.cpu_vs_gpu)]:
            if run.returncode == 0:
                cls.files[name] = json.loads((d / name).read_text())

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def fields(self, obj: dict, spec: dict, where: str):
        self.assertIsInstance(obj, dict, where)
        self.assertEqual(list(obj)[: len(spec)], list(spec), f"{where}: fields and their order")
        for key, types in spec.items():
            types = types if isinstance(types, tuple) else (types,)
            value = obj[key]
            ok = any(
                value is None
                if t is None
                else isinstance(value, (int, float) if t is float else t)
                and not (t is int and isinstance(value, bool))
                for t in types
            )
            self.assertTrue(ok, f"{where}.{key} = {value!r} is not {types}")

    def row(self, r: dict, where: str):
        self.fields(r, ROW, where)
        self.assertEqual(r["status"], "ok", r["error"])
        self.fields({k: r[k] for k in MEASURED}, MEASURED, where)
        self.assertEqual(set(r), set(ROW) | set(MEASURED), f"{where}: no other fields")
        self.fields(r["wall_ms"], SUMMARY, f"{where}.wall_ms")
        self.fields(r["accuracy"], ACCURACY, f"{where}.accuracy")
        self.assertEqual(r["wall_ms"]["n"], len(r["samples_wall_ms"]))
        self.assertEqual(r["median_ms"], r["wall_ms"]["median"])
        self.assertEqual(r["payload_bytes"], 3 * 64 * 64 * r["element_bytes"])
        self.assertTrue(r["median_ms"] > 0 and r["gflops"] > 0)
        # On the CPU: no GPU clock, no peak, and the memory source says why.
        self.assertEqual((r["gpu_ms"], r["samples_gpu_ms"], r["peak_bytes"]), (None, [], None))
        self.assertIn("not measured", r["memory_source"])

    def envelope(self, f: dict, experiment: str):
        self.fields(f, ENVELOPE, "file")
        self.assertEqual(list(f), list(ENVELOPE) + [experiment], "the body under one key")
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.0", experiment))
        self.assertRegex(f["created_utc"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertIn("--size 64", f["command"])
        self.fields(f["environment"], ENVIRONMENT, "environment")
        self.assertEqual(f["environment"]["framework"], "pytorch")
        self.assertEqual(f["environment"]["profile"], None)
        self.fields(f["device"], DEVICE, "device")
        self.assertEqual((f["device"]["kind"], f["device"]["label"]), ("cpu", "cpu"))

    def test_matmul_file_has_every_schema_field(self):
        self.assertEqual(self.matmul.returncode, 0, self.matmul.stderr)
        f = self.files["m.json"]
        self.envelope(f, "matmul")
        body = f["matmul"]
        self.fields(body, MATMUL, "matmul")
        self.assertEqual(
            (body["size"], body["iters"], body["warmup"], body["device"]), (64, 3, 1, "cpu")
        )
        self.assertEqual((body["gpu_iters"], body["cpu_iters"], body["cpu_fp32"]), (None, 3, None))
        self.assertEqual(body["flops_per_matmul"], 2 * 64**3)
        rows = body["precisions"]
        self.assertEqual([r["precision"] for r in rows], ["fp64", "fp32", "fp16", "bf16"])
        self.assertEqual([r["dtype"] for r in rows], ["f64", "f32", "f16", "bf16"])
        for r in rows:
            self.row(r, r["precision"])
            self.assertEqual(len(r["samples_wall_ms"]), 3)
        self.assertEqual(body["cpu_fp32_ms"], rows[1]["median_ms"])
        # Each format's error sits near its own eps (as the Rust bench_rows test).
        err = [r["accuracy"]["max_rel_err"] for r in rows]
        self.assertLess(err[0], 1e-12)
        self.assertLess(err[1], 1e-5)
        self.assertTrue(1e-5 <= err[2] < 2e-2 and 1e-4 <= err[3] < 1e-1, err)
        self.assertEqual(rows[0]["accuracy"]["rows_checked"], 16)

    def test_cpu_vs_gpu_file_has_every_schema_field(self):
        self.assertEqual(self.cpu_vs_gpu.returncode, 0, self.cpu_vs_gpu.stderr)
        f = self.files["c.json"]
        self.envelope(f, "cpu_vs_gpu")
        body = f["cpu_vs_gpu"]
        self.fields(body, CPU_VS_GPU, "cpu_vs_gpu")
        self.row(body["cpu"], "cpu")
        self.assertEqual((body["cpu_warmup"], body["cpu_iters"], body["gpu_iters"]), (1, 3, 12))
        self.assertEqual(len(body["cpu"]["samples_wall_ms"]), 3)
        self.assertEqual(
            (body["gpu"], body["gpu_fp32_ms"], body["gpu_speedup_fp32"]), (None, None, None)
        )
        self.assertIn("no CUDA device in use", body["gpu_skipped"])
        self.assertEqual(body["cpu_fp32_ms"], body["cpu"]["median_ms"])

    def test_files_validate_against_the_committed_json_schema(self):
        try:
            import jsonschema
        except ImportError:
            if os.environ.get("CI"):
                raise
            self.skipTest("jsonschema is not installed in this Python (the venv has it)")
        if not SCHEMA.exists():
            # schema/result.schema.json is generated by the Rust side (issue 9.1). Until it
            # lands this is a skip, except in CI, where it must be there.
            if os.environ.get("CI"):
                self.fail(f"{SCHEMA} is missing")
            self.skipTest(f"{SCHEMA.relative_to(ROOT)} is not generated yet")
        schema = json.loads(SCHEMA.read_text())
        self.assertEqual(len(self.files), 2, "both runs wrote their files")
        for f in self.files.values():
            jsonschema.validate(f, schema, cls=jsonschema.validators.validator_for(schema))


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
