"""Tests of the program, pytorch/matmul, end to end: real CPU runs at n = 64 whose
files carry every field of result schema 2.0 with the right types, and 2.6's
`vs_fp32_side_by_side` on every row but fp32's, and validate against
schema/result.schema.json. No timing is asserted. Run: `just test-pytorch`
(python -m unittest discover -s pytorch -p 'test_*.py').
"""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

from common.testkit import run_program, schema_validator, torch_or_skip


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
    "cpu": (dict, None),
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
# 2.6: each row but fp32's timed in turn with fp32 (src/schema/matmul.rs SideBySide), its
# two sides each the schema's Timed (src/schema/timed.rs).
SIDE_BY_SIDE = {
    "speedup": float,
    "interval": (dict, None),
    "time_source": str,
    "row": dict,
    "fp32": dict,
}
TIMED = {
    "median_ms": float,
    "gpu_median_ms": (float, None),
    "wall_ms": dict,
    "gpu_ms": (dict, None),
    "samples_wall_ms": list,
    "samples_gpu_ms": list,
    "gpu_before": (dict, None),
    "gpu_after": (dict, None),
    "availability": (dict, None),
}
BESIDE = "vs_fp32_side_by_side"


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
        others = set(r) - {BESIDE}
        self.assertEqual(others, set(ROW) | set(MEASURED), f"{where}: no other fields")
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
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.6", experiment))
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

    def test_each_row_but_fp32s_is_timed_beside_fp32(self):
        self.assertEqual(self.matmul.returncode, 0, self.matmul.stderr)
        for r in self.files["m.json"]["matmul"]["precisions"]:
            name = r["precision"]
            if name == "fp32":
                self.assertNotIn(BESIDE, r, "fp32's own row has no ratio to itself")
                continue
            keys = list(r)
            self.assertEqual(keys.index(BESIDE), keys.index("pct_of_datasheet") + 1, name)
            s = r[BESIDE]
            self.fields(s, SIDE_BY_SIDE, f"{name}.{BESIDE}")
            self.assertEqual(list(s), list(SIDE_BY_SIDE), "the Rust names, nothing else")
            self.assertEqual(s["time_source"], "median_ms", "the wall clock on the CPU")
            for side in ["row", "fp32"]:
                t = s[side]
                self.fields(t, TIMED, f"{name}.{side}")
                self.assertEqual(list(t), list(TIMED))
                # --iters 3: as many rounds as the rows' own plan (and MIN_SAMPLES).
                self.assertEqual((len(t["samples_wall_ms"]), t["samples_gpu_ms"]), (3, []))
                self.assertEqual(t["wall_ms"]["n"], 3)
            want = s["fp32"]["median_ms"] / s["row"]["median_ms"]
            self.assertAlmostEqual(s["speedup"], want, delta=1e-12 * want)
            i = s["interval"]
            self.assertTrue(i is None or 0 < i["lo"] <= i["hi"], i)
        # The table shows the pass's ratio with its interval, and says what it is.
        out = self.matmul.stdout
        self.assertRegex(out, r"\nfp16 .* \d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\] ")
        self.assertIn("x fp32: the row and fp32 timed in turn (A B A B, 3 rounds", out)
        self.assertIn("fp16 beside fp32: warmup 1, iters 3, in turn", self.matmul.stderr)

    def test_cpu_vs_gpu_file_has_every_schema_field(self):
        self.assertEqual(self.cpu_vs_gpu.returncode, 0, self.cpu_vs_gpu.stderr)
        f = self.files["c.json"]
        self.envelope(f, "cpu_vs_gpu")
        body = f["cpu_vs_gpu"]
        self.fields(body, CPU_VS_GPU, "cpu_vs_gpu")
        self.row(body["cpu"], "cpu")
        self.assertNotIn(BESIDE, body["cpu"], "fp32 alone: no pass")
        self.assertEqual((body["cpu_warmup"], body["cpu_iters"], body["gpu_iters"]), (1, 3, 12))
        self.assertEqual(len(body["cpu"]["samples_wall_ms"]), 3)
        self.assertEqual(
            (body["gpu"], body["gpu_fp32_ms"], body["gpu_speedup_fp32"]), (None, None, None)
        )
        self.assertIn("no CUDA device in use", body["gpu_skipped"])
        self.assertEqual(body["cpu_fp32_ms"], body["cpu"]["median_ms"])

    def test_files_validate_against_the_committed_json_schema(self):
        validate = schema_validator(self)
        self.assertEqual(len(self.files), 2, "both runs wrote their files")
        for f in self.files.values():
            validate(f)

if __name__ == "__main__":
    unittest.main()
