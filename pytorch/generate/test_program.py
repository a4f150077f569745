"""pytorch/generate run as a user runs it. Without the model: each bad input is one
`error:` line with its exit code and no file. On the real model (`just model`'s file;
without it these skip, unless CI is set, where CI fetches it): the twin's file validates
against schema/result.schema.json and has Candle's structure; its fp32 greedy tokens are
Candle's (tests/fixtures/generate-candle-cpu.json, a Candle run on the same file and
flags) and transformers' (tests/fixtures/generate-reference.json); `compare` pairs its pp
and tg rows with Candle's file per precision and gives each a verdict (Candle's dev
`compare`: env CANDLE_LAB_COMPARE_BIN, else target/debug/compare, which `just
test-pytorch` builds; a failure, not a skip, when neither is there); the transformers
peer's file validates too, its answer is the fixture's, and it pairs with Candle's. The
checks a run makes on the file's sizes (a prompt past the context, tf32 on the CPU) and
--dry-run's plan run in this process on a stand-in model (the real file's tokenizer alone
takes transformers ~10 s to build). No time is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from unittest import mock

from common.testkit import ROOT, run_in_process, run_program, schema_validator, torch_or_skip
from generate import cli
from generate.gguffile import Model, default_model_path
from generate.test_formulas import SMOLLM2

CANDLE = ROOT / "tests" / "fixtures" / "generate-candle-cpu.json"
REFERENCE = ROOT / "tests" / "fixtures" / "generate-reference.json"
# The flags Candle's fixture was made with (its `command`), at --warmup 0 here.
FLAGS = [
    "--device",
    "cpu",
    "--dtypes",
    "fp32",
    "--tokens",
    "8",
    "--pp-tokens",
    "16",
    "--iters",
    "3",
    "--warmup",
    "0",
]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    if env is None:
        return run_program(*args, program="generate")
    import sys

    return subprocess.run(
        [sys.executable, str(ROOT / "pytorch" / "generate"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, **env},
    )


def errors(r: subprocess.CompletedProcess) -> list[str]:
    return [line for line in r.stderr.splitlines() if line.startswith("error")]


def model_or_skip() -> str:
    path = default_model_path()
    if not os.path.isfile(path):
        if os.environ.get("CI"):
            raise AssertionError(f"no model at {path}: CI fetches it with `just model`")
        raise unittest.SkipTest(f"no model at {path} (`just model` fetches it)")
    return path


def compare_bin() -> Path:
    env = os.environ.get("CANDLE_LAB_COMPARE_BIN")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = Path(env) if env else target / "debug" / "compare"
    if not path.is_file():
        raise AssertionError(f"no {path}: `cargo build --bin compare` makes it")
    return path


class Refusals(unittest.TestCase):
    """Bad input: one `error:` line, its exit code, no file; none needs the model."""

    def refused(self, code: int, expect: str, *args: str, env=None):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "g.json"
            r = run(*args, "--output", str(out), env=env)
            self.assertEqual(r.returncode, code, r.stderr)
            self.assertEqual(len(errors(r)), 1, r.stderr)
            self.assertIn(expect, errors(r)[0])
            self.assertNotIn("Traceback", r.stderr)
            self.assertFalse(out.exists())

    def test_flags(self):
        torch_or_skip()
        self.refused(2, "0 is not in 1..=65536", "twin", "--tokens", "0")
        self.refused(
            2, "q8_0: the PyTorch peers run the float rows", "twin", "--dtypes", "fp32,q8_0"
        )
        self.refused(2, "unknown dtype 'fp8'", "hf", "--dtypes", "fp8")
        self.refused(2, "invalid choice: 'llama'", "llama")
        self.refused(2, "reference: needs --write FILE", "reference")
        self.refused(2, "unrecognized arguments: --shape", "twin", "--shape", "tiny")

    def test_files(self):
        torch_or_skip()
        with tempfile.TemporaryDirectory() as d:
            notes = Path(d) / "notes.gguf"
            notes.write_text("not a model\n")
            self.refused(
                1, "absent.gguf: no such file", "twin", "--model", str(Path(d) / "absent.gguf")
            )
            self.refused(
                1,
                'is not a GGUF file (it does not start with the bytes "GGUF")',
                "hf",
                "--model",
                str(notes),
            )
            self.refused(1, "no model at", "twin", env={"XDG_CACHE_HOME": d})
            self.refused(1, "is a folder, not a GGUF file", "twin", "--model", d)
            fifo = Path(d) / "fifo.gguf"
            os.mkfifo(fifo)
            self.refused(1, "is not a regular file", "twin", "--model", str(fifo))

    def test_no_output_is_the_model(self):
        torch_or_skip()
        with tempfile.TemporaryDirectory() as d:
            model = Path(d) / "m.gguf"
            model.write_bytes(b"GGUF-not-really")
            link = Path(d) / "link.json"
            link.symlink_to(model)
            for out in [model, link]:
                r = run("twin", "--model", str(model), "--output", str(out))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(len(errors(r)), 1, r.stderr)
                self.assertIn("it is the model", errors(r)[0])
                self.assertEqual(model.read_bytes(), b"GGUF-not-really")


class OnTheModel(unittest.TestCase):
    """The twin and transformers on the real file, at Candle's fixture's flags."""

    @classmethod
    def setUpClass(cls):
        model_or_skip()
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        d = Path(cls.dir.name)
        cls.twin_path, cls.hf_path = d / "twin.json", d / "hf.json"
        cls.twin = run("twin", *FLAGS, "--output", str(cls.twin_path))
        # transformers: one timed run per test is enough to show its file pairs.
        hf_flags = FLAGS[:-4] + ["--iters", "1", "--warmup", "0"]
        cls.hf = run("hf", *hf_flags, "--output", str(cls.hf_path))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def file(self, path: Path, ran) -> dict:
        self.assertEqual(ran.returncode, 0, ran.stderr)
        return json.loads(path.read_text())

    def test_the_twins_file_validates_and_has_candles_structure(self):
        f = self.file(self.twin_path, self.twin)
        schema_validator(self)(f)
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.3", "generate"))
        self.assertEqual(f["environment"]["framework"], "pytorch")
        g, c = f["generate"], json.loads(CANDLE.read_text())["generate"]
        for k in ["pp_tokens", "tg_tokens", "iters", "prompt"]:
            self.assertEqual(g[k], c[k], k)
        for k in [
            "file",
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "head_dim",
            "mlp",
            "vocab",
            "context",
            "tied_embeddings",
            "params",
            "stored",
        ]:
            self.assertEqual(g["model"][k], c["model"][k], k)
        (row,) = g["rows"]
        m = row["measured"]
        self.assertEqual((row["precision"], row["path"], row["status"]), ("fp32", "float", "ok"))
        self.assertEqual(
            [p["class"] for p in m["parts"]],
            ["matmuls", "attention", "norms", "rotary", "elementwise", "sampling"],
        )
        # The same model in fp32 reads what Candle's fp32 row reads.
        (cm,) = [r["measured"] for r in c["rows"]]
        for k in ["weight_bytes", "weight_bytes_per_token", "pp_flops"]:
            self.assertEqual(m[k], cm[k], k)
        self.assertIsNone(m["peak_bytes"])  # the CPU: PyTorch keeps no peak
        self.assertEqual(m["vs_fp32"]["tg"], 1.0)
        self.assertAlmostEqual(
            m["tg_bound_tokens_per_s"], g["copy_gb_per_s"] * 1e9 / m["weight_bytes_per_token"]
        )

    def test_the_twins_fp32_tokens_are_candles_and_transformers(self):
        f = self.file(self.twin_path, self.twin)
        (twin,) = f["generate"]["rows"]
        (candle,) = json.loads(CANDLE.read_text())["generate"]["rows"]
        ref = json.loads(REFERENCE.read_text())["greedy"]
        got = twin["measured"]["answer"]["token_ids"]
        self.assertEqual(got, candle["measured"]["answer"]["token_ids"])
        self.assertEqual(got, ref["ids"][: len(got)])
        self.assertEqual(len(got), 8)

    def test_compare_pairs_the_peers_pp_and_tg_rows_with_candles(self):
        self.file(self.twin_path, self.twin)
        self.file(self.hf_path, self.hf)
        r = subprocess.run(
            [str(compare_bin()), str(CANDLE), str(self.twin_path), str(self.hf_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        tables = r.stdout.split("=== A = ")[1:]
        self.assertEqual(len(tables), 2, r.stdout)
        for table, verdict in zip(tables, [True, False]):
            for test, size in [("pp", 16), ("tg", 8)]:
                line = next(
                    (
                        x
                        for x in table.splitlines()
                        if f"generate {test} SmolLM2-135M-Instruct.Q4_1.gguf" in x
                    ),
                    None,
                )
                self.assertIsNotNone(line, table)
                cells = [c.strip() for c in line.strip("│ ").split("┆")]
                self.assertEqual(cells[1:3], [str(size), "fp32"], line)
                # The twin's three samples a side give a verdict; transformers' one, a ratio.
                if verdict:
                    self.assertTrue(cells[-1].split()[0] in ("FAST", "SLOW", "SAME"), line)
                else:
                    self.assertTrue(cells[-1].startswith("ratio only"), line)
        self.assertIn("pytorch", tables[0])
        self.assertIn("transformers 5.17.0", tables[1])

    def test_the_transformers_file_validates(self):
        f = self.file(self.hf_path, self.hf)
        schema_validator(self)(f)
        self.assertEqual(f["environment"]["framework"], "transformers")
        (row,) = f["generate"]["rows"]
        m = row["measured"]
        # Its op classes are not timed: no parts, and a note says why.
        self.assertEqual((m["parts"], m["parts_sum_ms"]), ([], None))
        self.assertTrue(any("not timed for transformers" in n for n in f["generate"]["notes"]))

    def test_the_transformers_answer_is_the_fixtures(self):
        f = self.file(self.hf_path, self.hf)
        ref = json.loads(REFERENCE.read_text())["greedy"]
        self.assertEqual(f["generate"]["rows"][0]["measured"]["answer"]["token_ids"], ref["ids"])


class FakeTokenizer:
    """transformers' tokenizer as hf.chat_ids and the run call it: a prompt of `n` ids."""

    def __init__(self, n: int):
        self.n = n

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        return "<|im_start|>user\n" + messages[0]["content"] + "<|im_end|>\n"

    def __call__(self, text, add_special_tokens):
        return {"input_ids": list(range(1, self.n + 1))}


class Checks(unittest.TestCase):
    """What a run checks on the model's sizes before any work, and --dry-run's plan, on a
    stand-in for SmolLM2 (its sizes; a context of 64) and a 40-token prompt."""

    def run_on_stand_in(self, *args: str):
        torch_or_skip()
        d = SMOLLM2.__class__(**{**SMOLLM2.__dict__, "context": 64})
        info = {"name": "stand-in"}
        model = Model("stand-in.gguf", None, d, info, 1, [2])
        with mock.patch("generate.gguffile.open_model", return_value=model), mock.patch(
            "generate.hf.load_tokenizer", return_value=FakeTokenizer(40)
        ):
            return run_in_process("twin", "--model", "stand-in.gguf", *args, entry=cli.main)

    def test_refusals_on_the_models_sizes(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "g.json"
            for args, expect in [
                (
                    ["--tokens", "32"],
                    "error: the prompt is 40 tokens and --tokens 32: 72 positions, "
                    "longer than the model's context of 64",
                ),
                (
                    ["--tokens", "8", "--pp-tokens", "65"],
                    "error: --pp-tokens 65: longer than the " "model's context of 64",
                ),
                (
                    ["--tokens", "8", "--dtypes", "fp32,tf32"],
                    "error: --dtypes tf32: a cuBLAS GEMM "
                    "mode, it needs a CUDA device (on the CPU it would be a plain f32 row)",
                ),
            ]:
                code, _, err = self.run_on_stand_in("--device", "cpu", *args, "--output", str(out))
                self.assertEqual(code, 1, err)
                self.assertEqual([x for x in err.splitlines() if x.startswith("error")], [expect])
                self.assertFalse(out.exists())

    def test_a_dry_run_plans_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "sub" / "g.json"
            code, plan, err = self.run_on_stand_in(
                "--device", "cpu", "--tokens", "8", "--dry-run", "--output", str(out)
            )
            self.assertEqual(code, 0, err)
            for want in [
                "dry run: pytorch generate twin",
                "precisions: fp32, fp16, bf16",
                "pp_tokens: 64, tg_tokens: 8, iters: 3, warmup: 1",
                "prompt: 40 tokens",
                "context 64",
                f"would write: {out}",
            ]:
                self.assertIn(want, plan)
            self.assertFalse(out.parent.exists())


if __name__ == "__main__":
    unittest.main()
