"""The cross-check: Candle's block and PyTorch's on the same weights compute the same
function. Candle's `block` binary (env CANDLE_LAB_BLOCK_BIN, else debug/block under
CARGO_TARGET_DIR or target/; a failure, not a skip, when neither exists: run `cargo build
--bin block`) runs on the CPU
at a tiny shape in fp32 and writes the weights (--save-weights W); pytorch/block runs
on W. The reference both sides are held against is the block in f64, computed here by
PyTorch from W (blockmodel.reference_outputs, checked against a plain-Python block in
test_blockmodel.py):

- PyTorch's fp32 outputs (--save-output) are within 1e-5 of it (|y - y64| / rms(y64)),
  and both files report fp32 errors under 1e-5 against their own f64 runs;
- Candle's fp32 outputs are within 1e-5 of it too. For this Candle's `block` needs
  `--save-output FILE`: a safetensors file of F32 tensors `y_prefill_<precision>`
  (batch, accuracy_seq, hidden: the first --accuracy-seq prefill tokens of the row's
  output, the call its accuracy is measured on) and `y_decode_<precision>` (batch, 1,
  hidden), one pair per precision row that ran, as pytorch/block --save-output writes.
  Until the Rust program has that flag, that test fails saying so."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from block.model import DECODE, PREFILL, reference_outputs
from block.weights import load, read_header, read_shape
from common.stats import relative_errors
from common.testkit import ROOT, run_block, torch_or_skip

TOL = 1e-5
# Grouped-query attention (2 key/value heads for 4 query heads): the shape every current
# model has, and the one where Candle's and PyTorch's head grouping could disagree.
SHAPE = ["--hidden", "64", "--heads", "4", "--kv-heads", "2", "--mlp", "96", "--seq", "12"]
RUN = ["--device", "cpu", "--dtypes", "fp32", "--phases", "prefill,decode"]
RUN += ["--iters", "2", "--warmup", "1"]


def candle_block() -> Path | None:
    env = os.environ.get("CANDLE_LAB_BLOCK_BIN")
    # Where cargo built it, as the kernels and generate twins' tests look.
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = Path(env) if env else target / "debug" / "block"
    return path if path.is_file() else None


def read_outputs(torch, path: Path) -> dict:
    header, start = read_header(path)
    data = path.read_bytes()
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            lo, hi = t["data_offsets"]
            flat = torch.frombuffer(bytearray(data[start + lo : start + hi]), dtype=torch.float32)
            out[name] = flat.reshape(t["shape"])
    return out


class CrossCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.torch = torch = torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.d = Path(cls.dir.name)
        cls.binary = candle_block()
        if cls.binary is None:
            return
        candle = [str(cls.binary), *RUN, *SHAPE, "--output", str(d / "candle.json")]
        candle += ["--save-weights", str(d / "w.safetensors")]
        # With --save-output first; where the binary does not have it yet, without (so
        # the checks that do not need Candle's outputs still run).
        cls.candle = subprocess.run(
            [*candle, "--save-output", str(d / "candle_y.safetensors")],
            capture_output=True,
            text=True,
            timeout=600,
        )
        cls.no_save_output = None
        if cls.candle.returncode == 2 and "--save-output" in cls.candle.stderr:
            cls.no_save_output = cls.candle.stderr.strip().splitlines()[-1]
            cls.candle = subprocess.run(candle, capture_output=True, text=True, timeout=600)
        if cls.candle.returncode != 0:
            return
        cls.pytorch = run_block(
            *RUN,
            "--weights",
            str(d / "w.safetensors"),
            "--output",
            str(d / "pytorch.json"),
            "--save-output",
            str(d / "pytorch_y.safetensors"),
        )
        shape, _ = read_shape(d / "w.safetensors")
        host = load(torch, d / "w.safetensors")
        cls.reference = reference_outputs(torch, host, shape, 12)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        if self.binary is None:
            self.fail(
                "no Candle block binary: run `cargo build --bin block` (or set "
                "CANDLE_LAB_BLOCK_BIN to one)"
            )
        self.assertEqual(self.candle.returncode, 0, self.candle.stderr)
        self.assertEqual(self.pytorch.returncode, 0, self.pytorch.stderr)

    def against_f64(self, outputs: dict, who: str):
        for phase in (PREFILL, DECODE):
            got = outputs[f"y_{phase}_fp32"]
            want = self.reference[phase]
            self.assertEqual(list(got.shape), list(want.shape), f"{who} {phase}")
            err, _ = relative_errors(got.double().flatten().tolist(), want.flatten().tolist())
            self.assertLess(err, TOL, f"{who}'s fp32 {phase} against PyTorch's f64 block")

    def test_pytorch_s_fp32_block_is_the_f64_block_and_both_files_agree(self):
        self.against_f64(read_outputs(self.torch, self.d / "pytorch_y.safetensors"), "PyTorch")
        files = [json.loads((self.d / n).read_text()) for n in ("candle.json", "pytorch.json")]
        candle, pytorch = (f["block"] for f in files)
        self.assertEqual(candle["shape"], pytorch["shape"])
        self.assertEqual((candle["shape"]["heads"], candle["shape"]["kv_heads"]), (4, 2))
        self.assertEqual(candle["time_source"], pytorch["time_source"])
        self.assertEqual(candle["params"], pytorch["params"])
        for c, p in zip(candle["phases"], pytorch["phases"], strict=True):
            for key in ("phase", "tokens", "context", "flops"):
                self.assertEqual(c[key], p[key], key)
            for side in (c, p):
                m = side["rows"][0]["measured"]
                self.assertLess(m["accuracy"]["max_rel_err"], TOL, side["phase"])
            cm, pm = c["rows"][0]["measured"], p["rows"][0]["measured"]
            self.assertEqual(cm["bytes_min"], pm["bytes_min"])
            self.assertEqual(cm["accuracy"]["tokens_checked"], pm["accuracy"]["tokens_checked"])

    def test_both_files_record_the_same_cpu(self):
        # compare names a CPU row by its identity: with one side's missing or different, it
        # would call one machine two and say the ratios compare machines.
        files = [json.loads((self.d / n).read_text()) for n in ("candle.json", "pytorch.json")]
        candle, pytorch = (f["environment"]["cpu"] for f in files)
        self.assertIsNotNone(pytorch)
        self.assertEqual(candle, pytorch)

    def test_candle_s_fp32_block_is_pytorch_s_f64_block(self):
        if self.no_save_output is not None:
            self.fail(
                "Candle's block has no --save-output yet, so its outputs cannot be compared "
                f"(it said: {self.no_save_output}); the Rust side of the cross-check must land "
                "first (this module's docstring has the contract)"
            )
        candle = read_outputs(self.torch, self.d / "candle_y.safetensors")
        self.against_f64(candle, "Candle")
        pytorch = read_outputs(self.torch, self.d / "pytorch_y.safetensors")
        for name in ("y_prefill_fp32", "y_decode_fp32"):
            err, _ = relative_errors(
                candle[name].double().flatten().tolist(),
                pytorch[name].double().flatten().tolist(),
            )
            self.assertLess(err, 2 * TOL, f"{name}: Candle against PyTorch")


if __name__ == "__main__":
    unittest.main()
