"""`pytorch/generate scaling`, the twin of Candle's `scaling`: its formulas are
src/model/cost.rs's (numbers the Rust functions give for SmolLM2's sizes), its point names
ScalingPoint::name's, its made-up ids src/bench/lm random_ids', its ladder pick Bounds::tg's
(the cases of src/bench/ladder's tests), its axes' refusals Axes::check's; the twin's model
gives each sequence of a batch the logits it gives alone and continues a cache at an offset
as a pass from scratch does (a small random model). On the real model (`just model`'s file;
skipped without it unless CI is set), at the flags of Candle's fixture
tests/fixtures/scaling-candle-cpu.json (Candle's dev `scaling --kernels candle`) and with
that file as --bounds: the file validates against schema/result.schema.json, has Candle's
points, bytes, FLOPs and memory bounds, both checks hold in fp32, and `compare` pairs every
point (Candle's dev `compare`, as test_program finds it). A dry run and the refusals run on
a stand-in. No time is asserted."""

from __future__ import annotations

import json
import subprocess
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from common.errors import Failure
from common.testkit import ROOT, run_in_process, schema_validator, torch_or_skip
from generate import cli
from generate.formulas import LlamaDims, flops_after, kv_bytes_per_token, kv_read_bytes, pp_flops
from generate.gguffile import Model
from generate.scaling import Axes, fitted_read, ladder_bound, point_name, prompts, random_ids
from generate.test_formulas import SMOLLM2
from generate.test_program import FakeTokenizer, compare_bin, errors, model_or_skip, run

CANDLE = ROOT / "tests" / "fixtures" / "scaling-candle-cpu.json"
# The flags Candle's fixture was made with (its `command`), less --kernels and the ladder's
# cap, which are Candle's alone.
FLAGS = [
    "--device",
    "cpu",
    "--dtypes",
    "fp32",
    "--depth",
    "0,8",
    "--pp-lengths",
    "4",
    "--batch",
    "1,2",
    "--tokens",
    "2",
    "--pp-tokens",
    "4",
    "--iters",
    "3",
    "--warmup",
    "0",
]
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


class Formulas(unittest.TestCase):
    """cost.rs's functions for SmolLM2 (src/model/config.rs tests::smollm2), as Rust
    printed them."""

    def test_flops_after_a_depth_are_rusts(self):
        d = SMOLLM2
        for (depth, tokens, heads), want in [
            ((0, 1, 1), 269028864.0),
            ((0, 64, 1), 13789937664.0),
            ((2048, 32, 32), 13173055488.0),
            ((512, 64, 1), 16054861824.0),
            ((64, 16, 16), 4383535104.0),
            ((0, 512, 1), 117850374144.0),
        ]:
            self.assertEqual(flops_after(d, depth, tokens, heads), want, (depth, tokens, heads))
        self.assertEqual(flops_after(d, 0, 64, 1), pp_flops(d, 64))

    def test_kv_cache_bytes_are_rusts(self):
        d = SMOLLM2
        self.assertEqual(kv_bytes_per_token(d, 4), 46080)
        self.assertEqual(kv_bytes_per_token(d, 2), 23040)
        self.assertEqual(kv_read_bytes(d, 1, 4), 46080)
        self.assertEqual(kv_read_bytes(d, 2049, 2), 47208960)
        self.assertEqual(kv_read_bytes(d, 100, 4), 4608000)


def pt(axis: str, test: str, depth: int, pp: int, batch: int, tokens: int) -> dict:
    return {
        "axis": axis,
        "test": test,
        "depth": depth,
        "pp_tokens": pp,
        "batch": batch,
        "tokens": tokens,
    }


class Names(unittest.TestCase):
    def test_points_are_named_as_scaling_point_name(self):
        for p, want in [
            (pt("depth", "tg", 2048, 0, 1, 32), "tg32 @ d2048"),
            (pt("depth", "tg", 0, 0, 1, 32), "tg32 @ d0"),
            (pt("depth", "pp", 0, 64, 1, 64), "pp64 @ d0"),
            (pt("prompt", "pp", 0, 512, 1, 512), "pp512"),
            (pt("batch", "tg", 64, 0, 8, 128), "tg16 @ d64 x b8"),
            (pt("batch", "tg", 64, 0, 1, 16), "tg16 @ d64 x b1"),
        ]:
            self.assertEqual(point_name(p), want)

    def test_made_up_prompts_are_rusts(self):
        # As src/bench/lm random_ids gave them (u64 arithmetic, wrapping at 2^64).
        self.assertEqual(random_ids(4, 49152, 43), [8929, 4564, 200, 44987])
        self.assertEqual(random_ids(2, 1000, (1 << 64) - 1), [92, 0])
        seqs = prompts(4, 49152, 42, 3)
        self.assertEqual(seqs[0], random_ids(4, 49152, 43))
        self.assertEqual(seqs[2], random_ids(4, 49152, 42 + 1 + 2 * 7919))


MIB = 1 << 20


def read(threads: int, mib: int, gb_per_s: float, chunked=False, level="L3") -> dict:
    return {
        "kernel": "read",
        "threads": threads,
        "footprint_bytes": mib * MIB,
        "level": level,
        "gb_per_s": gb_per_s,
        "chunked": chunked,
    }


def ladder(points: list[dict], threads=2, llc_mib=128) -> dict:
    # Memory's footprint: 4 x 128 MiB = 512 MiB, as src/bench/ladder's tests.
    return {
        "caches": [{"name": "L3", "bytes": llc_mib * MIB, "shared_by": 2}],
        "pool_threads": threads,
        "points": points,
    }


class LadderPick(unittest.TestCase):
    """Bounds::tg's pick (Ladder::bound, envelope) on ladders made here."""

    def pick(self, points, nbytes, **kw):
        return ladder_bound(ladder(points, **kw), nbytes)

    def test_the_read_at_the_footprint_on_one_or_the_pools_threads(self):
        at = [read(1, 80, 10.0), read(2, 80, 12.0), read(2, 80, 11.0, chunked=True)]
        b = self.pick(at + [read(2, 8, 99.0), read(4, 1024, 99.0)], 80 * MIB)
        self.assertEqual((b["gb_per_s"], b["threads"], b["chunked"]), (12.0, 2, False))
        fields = {"kernel", "threads", "footprint_bytes", "level", "gb_per_s", "chunked"}
        self.assertEqual(set(b), fields)
        # One thread in the pool: the one-thread read only.
        b = self.pick(at, 80 * MIB, threads=1)
        self.assertEqual((b["gb_per_s"], b["threads"]), (10.0, 1))

    def test_a_bound_is_never_under_a_larger_footprints_reading(self):
        at = [read(1, 80, 10.0), read(2, 80, 12.0)]
        copy = dict(read(2, 1024, 99.0), kernel="copy")
        b = self.pick(at + [read(2, 1024, 14.0, level="DRAM"), copy], 80 * MIB)
        self.assertEqual((b["gb_per_s"], b["level"], b["threads"]), (14.0, "DRAM", 2))
        b = self.pick(at + [read(2, 1024, 11.0)], 80 * MIB)
        self.assertEqual((b["gb_per_s"], b["footprint_bytes"]), (12.0, 80 * MIB))

    def test_past_the_caches_any_footprint_of_memorys_or_more_bounds(self):
        earlier = [read(2, 512, 80.0), read(2, 256, 99.0)]
        b = self.pick([read(2, 1024, 40.0), *earlier], 1024 * MIB)
        self.assertEqual((b["gb_per_s"], b["footprint_bytes"]), (80.0, 512 * MIB))
        b = self.pick([read(2, 300, 40.0), *earlier], 300 * MIB)
        self.assertEqual((b["gb_per_s"], b["footprint_bytes"]), (80.0, 512 * MIB))
        b = self.pick([read(2, 300, 40.0), earlier[1]], 300 * MIB)
        self.assertEqual(b["gb_per_s"], 40.0, "256 MiB is smaller and under memory's")

    def test_the_cap_holds_every_footprint(self):
        # --ladder-max-mib 16: Candle read every footprint at the cap, memory's too.
        capped = [read(1, 16, 5.0), read(2, 16, 6.0), read(2, 16, 7.0, chunked=True)]
        b = self.pick(capped, 538 * MIB, llc_mib=480)
        self.assertEqual((b["gb_per_s"], b["chunked"]), (7.0, True))
        self.assertEqual(b["footprint_bytes"], 16 * MIB)

    def test_a_footprint_is_fitted_as_the_read_kernels_arrays(self):
        self.assertEqual(fitted_read(1000), 1024)  # 256 floats at least
        self.assertEqual(fitted_read(538_177_541), 538_177_536)  # whole float4s
        # Ties go to the later point, as Rust's max_by.
        b = self.pick([read(1, 80, 12.0, level="a"), read(2, 80, 12.0, level="b")], 80 * MIB)
        self.assertEqual(b["level"], "b")


class MeasuredRead(unittest.TestCase):
    def test_without_bounds_one_read_past_the_caches_bounds_every_point(self):
        torch = torch_or_skip()
        from common.timing import Clock
        from generate.scaling import measured_read

        # A 1 MiB last cache: the read is 256 MiB, the least memory's footprint is.
        with mock.patch("block.run.largest_cache", return_value=1 << 20):
            cpu = torch.device("cpu")
            bound, note = measured_read(torch, Clock(torch, cpu), cpu)
        self.assertEqual((bound["kernel"], bound["level"]), ("read", "DRAM"))
        self.assertEqual((bound["footprint_bytes"], bound["chunked"]), (256 * MIB, False))
        self.assertGreater(bound["gb_per_s"], 0.0)
        self.assertIn("no --bounds, so one read measured here", note)


class AxesChecks(unittest.TestCase):
    def test_axes_refuse_what_the_model_cannot_hold(self):
        for axes, tg, pp, want in [
            (
                Axes([4090], [8], [1]),
                8,
                4,
                "--depth 4090: with --tokens 8 and --pp-tokens 4, 4098 positions, past the "
                "model's context of 4096",
            ),
            (Axes([0], [0], [1]), 8, 4, "--pp-lengths 0: a prompt of 1 to 4096 tokens"),
            (Axes([0], [8], [1, 0]), 8, 4, "--batch 0: a batch is one sequence or more"),
            (
                Axes([0], [8], [1]),
                4000,
                100,
                "--pp-tokens 100 and --tokens 4000: a batch's sequences pass the model's "
                "context of 4096",
            ),
        ]:
            with self.assertRaises(Failure) as e:
                axes.check(tg, pp, 4096)
            self.assertIn(want, str(e.exception))
        a = Axes([0, 512], [64, 2048], [1, 4])
        a.check(32, 64, 4096)
        self.assertEqual(a.positions(32, 64), 2049)


def tiny_dims() -> LlamaDims:
    return LlamaDims(
        layers=2,
        hidden=64,
        heads=4,
        kv_heads=2,
        head_dim=16,
        mlp=96,
        vocab=101,
        context=64,
        rope_theta=10000.0,
        rms_eps=1e-5,
        tied=True,
    )


def tiny_weights(d: LlamaDims, seed=0) -> dict:
    import numpy as np

    g = np.random.default_rng(seed)
    h, kv = d.hidden, d.kv_width

    def w(*shape):
        return (g.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    out = {"token_embd.weight": w(d.vocab, h), "output_norm.weight": 1 + w(h) * 0.1}
    for i in range(d.layers):
        for n, shape in [
            ("attn_norm", (h,)),
            ("attn_q", (h, h)),
            ("attn_k", (kv, h)),
            ("attn_v", (kv, h)),
            ("attn_output", (h, h)),
            ("ffn_norm", (h,)),
            ("ffn_gate", (d.mlp, h)),
            ("ffn_up", (d.mlp, h)),
            ("ffn_down", (h, d.mlp)),
        ]:
            out[f"blk.{i}.{n}.weight"] = w(*shape)
    return out


class TwinBatch(unittest.TestCase):
    """The twin's model on a small random Llama in f64: a batch's rows are each sequence
    alone, and a cache continued at an offset is a pass from scratch."""

    def setUp(self):
        self.torch = torch_or_skip()
        from generate.twin import Twin

        d = tiny_dims()
        self.m = Twin(self.torch, d, tiny_weights(d), self.torch.float64, "cpu", 40, batch=3)

    def test_each_sequence_of_a_batch_gets_what_it_gets_alone(self):
        from generate.scaling import decode

        seqs = [random_ids(6, 101, s) for s in (1, 2, 3)]
        together = self.m.forward_batch(seqs, 0)
        steps = decode(self.m, [[int(t)] for t in together.argmax(-1)], 6, 5)
        for i, seq in enumerate(seqs):
            alone = self.m.forward(seq, 0)
            # The norms run in f32 (as Candle's): a batch's rows agree to f32's rounding.
            self.assertTrue(self.torch.allclose(alone, together[i], atol=1e-5))
            self.assertEqual(decode(self.m, [[int(alone.argmax())]], 6, 5)[0], steps[i])

    def test_a_cache_at_an_offset_continues_a_pass_from_scratch(self):
        ids = random_ids(12, 101, 9)
        scratch = self.m.forward(ids, 0)
        self.m.forward(ids[:7], 0)
        cached = self.m.forward(ids[7:], 7)
        self.assertTrue(self.torch.allclose(cached, scratch, atol=1e-5))
        self.m.forward(ids[:11], 0)
        self.assertTrue(self.torch.allclose(self.m.forward(ids[11:], 11), scratch, atol=1e-5))


class OnTheModel(unittest.TestCase):
    """The twin's scaling on the real file at Candle's fixture's flags, its ladder as
    --bounds; then `compare`."""

    @classmethod
    def setUpClass(cls):
        model_or_skip()
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = Path(cls.dir.name) / "scaling.json"
        cls.ran = run("scaling", *FLAGS, "--bounds", str(CANDLE), "--output", str(cls.path))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def file(self) -> dict:
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)
        return json.loads(self.path.read_text())

    def test_the_file_validates_and_has_candles_points(self):
        f = self.file()
        schema_validator(self)(f)
        self.assertEqual((f["schema_version"], f["experiment"]), ("2.10", "scaling"))
        self.assertEqual(f["environment"]["framework"], "pytorch")
        s, c = f["scaling"], json.loads(CANDLE.read_text())["scaling"]
        for k in ["depths", "pp_tokens", "batches", "tg_tokens", "batch_prompt_tokens", "iters"]:
            self.assertEqual(s[k], c[k], k)
        self.assertEqual(s["kv_cache"], c["kv_cache"])
        self.assertEqual(s["ladder"], c["ladder"])
        self.assertEqual(s["model"]["file"], c["model"]["file"])
        ((row,), (crow,)) = s["rows"], c["rows"]
        self.assertEqual((row["precision"], row["status"]), ("fp32", "ok"))
        m, cm = row["measured"], crow["measured"]
        for k in ["weight_bytes", "weight_bytes_per_token", "kv_precision", "kv_bytes_per_token"]:
            self.assertEqual(m[k], cm[k], k)
        names = [point_name(p) for p in m["points"]]
        self.assertEqual(names, [point_name(p) for p in cm["points"]])
        same = ["axis", "test", "depth", "pp_tokens", "batch", "tokens", "tokens_per_step"]
        # The same steps read the same bytes, do the same FLOPs and pick the same read of
        # Candle's ladder (every point at its 16 MiB cap).
        same += ["bytes_per_step", "flops_per_token", "memory"]
        for p, cp in zip(m["points"], cm["points"]):
            for k in same:
                self.assertEqual(p[k], cp[k], (point_name(p), k))
            self.assertIsNone(p["peak_bytes"])  # the CPU: PyTorch keeps no peak
        self.assertIs(m["batch_matches_alone"], True)
        self.assertIs(m["depth_matches_scratch"], True)
        self.assertIsNotNone(m["ridge"])
        self.assertTrue(any(n.startswith("memory: Candle's ladder from") for n in s["notes"]))

    def test_compare_pairs_every_point_with_candles(self):
        f = self.file()
        r = subprocess.run(
            [str(compare_bin()), str(CANDLE), str(self.path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [point_name(p) for p in f["scaling"]["rows"][0]["measured"]["points"]]
        self.assertEqual(len(names), 7)
        for name in names:
            lines = r.stdout.splitlines()
            line = next((x for x in lines if f"scaling {name} {MODEL} " in x), None)
            self.assertIsNotNone(line, f"{name}:\n{r.stdout}")
            cells = [c.strip() for c in line.strip("│ ").split("┆")]
            self.assertEqual(cells[2], "fp32", line)
            self.assertTrue(cells[-1].split()[0] in ("FAST", "SLOW", "SAME"), line)


class OnAStandIn(unittest.TestCase):
    """What a run checks before any work, and the dry run, on a stand-in for SmolLM2."""

    def run_on_stand_in(self, *args: str):
        torch_or_skip()
        info = {"name": "stand-in"}
        model = Model("stand-in.gguf", None, SMOLLM2, info, 1, [2])
        with mock.patch("generate.gguffile.open_model", return_value=model), mock.patch(
            "generate.hf.load_tokenizer", return_value=FakeTokenizer(40)
        ):
            return run_in_process("scaling", "--model", "stand-in.gguf", *args, entry=cli.main)

    def test_a_dry_run_plans_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "s.json"
            args = ["--device", "cpu", "--depth", "0,8", "--batch", "1,2", "--dry-run"]
            code, plan, err = self.run_on_stand_in(*args, "--output", str(out))
            self.assertEqual(code, 0, err)
            for want in [
                "dry run: pytorch generate scaling",
                "depths: [0, 8], pp lengths: [64, 512, 2048], batches: [1, 2]",
                "tg_tokens: 32, pp_tokens: 64, iters: 3, warmup: 1",
                "memory bound: one read measured here (no --bounds)",
            ]:
                self.assertIn(want, plan)
            self.assertFalse(out.exists())

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "s.json"
            other = Path(d) / "other.json"
            other.write_text('{"experiment": "generate"}')
            for args, want in [
                (
                    ["--depth", "4090"],
                    "error: --depth 4090: with --tokens 32 and --pp-tokens 64, 4154 positions, "
                    "past the model's context of 4096",
                ),
                (["--batch", "0"], "error: --batch 0: a batch is one sequence or more"),
                (["--bounds", str(other)], "not a scaling result"),
            ]:
                code, _, err = self.run_on_stand_in("--device", "cpu", *args, "--output", str(out))
                self.assertEqual(code, 1, err)
                lines = [x for x in err.splitlines() if x.startswith("error")]
                self.assertEqual(len(lines), 1, err)
                self.assertIn(want, lines[0])
                self.assertFalse(out.exists())

    def test_scalings_flags_are_scalings_alone(self):
        torch_or_skip()
        r = run("twin", "--depth", "0,8")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--depth: scaling's flag; twin takes none", errors(r)[0])
        r = run("scaling", "--prompt", "Hello")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--prompt: scaling fills its caches with the default prompt", errors(r)[0])


if __name__ == "__main__":
    unittest.main()
