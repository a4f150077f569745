"""The peers of `generate`: the pure parts everywhere (llama.cpp's permute undone, the
side-by-side table, refusals), and on the real model file: transformers still gives the
fixture tests/fixtures/generate-reference.json (its tokenizer's ids and decoding, chat
template included, and its fp32 greedy answer), and the PyTorch twin's fp32 greedy tokens
equal that answer. The Rust side holds Candle's tokenizer and fp32 answer to the same fixture
(tests/generate_model.rs). Without the file the model tests skip, unless CI is set: CI fetches
it (`just model`), and there a missing file is a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

from generate.gguffile import default_model_path, reverse_permute

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "generate-reference.json"


def model_or_skip() -> str:
    path = default_model_path()
    if not os.path.isfile(path):
        if os.environ.get("CI"):
            raise AssertionError(f"no model at {path}: CI fetches it with `just model`")
        raise unittest.SkipTest(f"no model at {path} (`just model` fetches it)")
    return path


def fixture() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


class PureParts(unittest.TestCase):
    def test_reverse_permute_undoes_llama_cpps_permute(self):
        import numpy as np

        heads, d, cols = 3, 4, 2
        w = np.arange(heads * d * cols, dtype=np.float32).reshape(heads * d, cols)
        # convert_hf_to_gguf.py's LlamaModel.permute
        permuted = w.reshape(heads, 2, d // 2, cols).swapaxes(1, 2).reshape(w.shape)
        self.assertFalse((permuted == w).all())
        self.assertTrue((reverse_permute(permuted, heads) == w).all())

    def test_side_by_side_puts_the_peers_beside_candle(self):
        import tempfile

        from .__main__ import side_by_side

        candle = {"generate": {"rows": [
            {"precision": "fp32", "measured": {"pp_tokens_per_s": 20.0, "tg_tokens_per_s": 10.0,
                                               "tg_bound_tokens_per_s": 30.0, "tg_pct_of_bound": 33.3}},
            {"precision": "q4_1 (stored)", "measured": None},
        ]}}
        twin = {"framework": "pytorch-twin", "rows": [
            {"precision": "fp32", "pp_tokens_per_s": 7.0, "tg_tokens_per_s": 2.0}]}
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, obj in [("c", candle), ("t", twin)]:
                p = os.path.join(d, name + ".json")
                Path(p).write_text(json.dumps(obj))
                paths.append(p)
            table = side_by_side(paths)
        self.assertIn("| fp32 | 20.0 | 10.0 | 30 | 33% | 7.0 | 2.0 |", table)
        self.assertEqual(len(table.splitlines()), 3)

    def test_a_missing_model_is_one_error_line(self):
        r = subprocess.run(
            [sys.executable, "-m", "generate", "twin", "--model", "/nonexistent.gguf"],
            capture_output=True, text=True, cwd=ROOT / "pytorch", timeout=120,
        )
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.strip(), "error: no model at /nonexistent.gguf")


class OnTheModel(unittest.TestCase):
    """transformers, the twin and the fixture on the real file."""

    @classmethod
    def setUpClass(cls):
        cls.path = model_or_skip()
        cls.want = fixture()

    def test_transformers_still_gives_the_fixture(self):
        import torch
        import transformers

        from generate import hf, reference

        self.assertEqual(self.want["transformers"], transformers.__version__)
        got = reference.make(self.path, torch)
        self.assertEqual(got["chat"], self.want["chat"])
        self.assertEqual(got["plain"], self.want["plain"])
        self.assertEqual(got["greedy"], self.want["greedy"])
        # Decoding gives the text back, special tokens included.
        for c in got["chat"]:
            self.assertEqual(c["decoded"], c["formatted"])
        self.assertTrue(hf)

    def test_the_twins_fp32_answer_is_transformers(self):
        import torch

        from generate import gguffile, twin

        dims, weights = gguffile.read(self.path)
        self.assertEqual((dims.layers, dims.hidden, dims.heads, dims.kv_heads), (30, 576, 9, 3))
        m = twin.Twin(torch, dims, weights, torch.float32, torch.device("cpu"))
        g = self.want["greedy"]
        prompt = self.want["chat"][0]["ids"]
        self.assertEqual(self.want["chat"][0]["user"], g["user"])
        self.assertEqual(twin.greedy(m, prompt, g["tokens"], []), g["ids"])


if __name__ == "__main__":
    unittest.main()
