"""Tests of pytorch/kernels, the PyTorch twin of `kernels`, end to end on the CPU at
tiny sizes: the file validates against schema/result.schema.json, has the structure of
Candle's (every op, case and precision, PyTorch's op and the composed form, the ceiling)
and the Rust side's schema version; its rates are its own bytes over its own times per
call, each time per call its K-call samples' median less the recorded clock cost over K;
its outputs are right against f64; the cases and bytes are Candle's (so `compare` pairs
them). The pairing: the thread count (Candle's pool's by default, --threads) and OpenMP's
wait policy applied and recorded; --bounds taken from a Candle kernels file (one made here
from the twin's own output with bounds put in, and one from Candle's dev `kernels`: env
CANDLE_LAB_KERNELS_BIN, else target/debug/kernels, which `just test-pytorch` builds; a
failure, not a skip, when neither is there), each row's ceiling that file's, and `compare`
reads both; a file of another machine, footprint or run refused in one line. --dry-run;
refusals with their exit codes. No timing is asserted."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from common.testkit import PYTORCH, ROOT, run_program, schema_validator, torch_or_skip
from common.threads import candle_pool_threads
from common.timing import Plan, per_call_ms, rate_ms
from kernels.ops import normwise, shape, traffic
from kernels.run import OWN_CEILING, cases, default_large_mib, dram_rows_for, large_mib_for
from kernels.run import large_plan, size

TINY = ["--device", "cpu", "--iters", "2", "--warmup", "1", "--seq", "8", "--large-mib", "1"]
# A small run for the pairing's files: two ops of each pattern, both kinds of case.
SMALL = [*TINY, "--ops", "rms_norm,add", "--cases", "block-decode,large", "--dtypes", "fp32,bf16"]


def run(*args: str, env=None) -> subprocess.CompletedProcess:
    return run_program(*args, program="kernels", env=env)


def errors(ran) -> list[str]:
    return [line for line in ran.stderr.splitlines() if line.startswith("error")]


def rust_schema_version(test: unittest.TestCase) -> str:
    source = ROOT / "src" / "schema" / "mod.rs"
    if not source.exists():  # a bundle of the twins alone
        test.skipTest(f"no {source}")
    text = source.read_text()
    return re.search(r'pub const SCHEMA_VERSION: &str = "([^"]+)"', text).group(1)


def target_bin(name: str) -> Path:
    env = os.environ.get(f"CANDLE_LAB_{name.upper()}_BIN")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = Path(env) if env else target / "debug" / name
    if not path.is_file():
        raise AssertionError(f"no {path}: `cargo build --bin {name}` makes it")
    return path


def as_candles(file: dict, threads: int) -> dict:
    """The twin's file dressed as Candle's kernels file of the same run: Candle's framework,
    its pool's threads, the suite's kernel in PyTorch's op's place, and on each row's
    ceiling a ladder bound (its own rate, at the row's footprint)."""
    f = copy.deepcopy(file)
    f["environment"] |= {"framework": "candle", "framework_version": "0.11.1"}
    f["environment"].pop("omp_wait_policy")
    f["kernels"]["cpu_threads"] = threads
    for r in f["kernels"]["rows"]:
        kernel = "triad" if r["op"] in ("swiglu", "add") else "copy"
        c = r["ceiling"]
        c["call"] = f"the ladder's {kernel} on 1 thread(s) (made by the test)"
        c["bound"] = {
            "kernel": kernel,
            "threads": 1,
            "footprint_bytes": r["bytes_moved"],
            "level": "L1d",
            "gb_per_s": c["gb_per_s"],
        }
        for v in r["variants"]:
            v["implementation"] = "lab" if v["implementation"] == "pytorch" else "composed"
    return f


def check_times(test: unittest.TestCase, body: dict, plan: Plan) -> None:
    """Each variant: K >= 1, plan's samples (the large case's at most 3), time_ms the K-call
    median less the clock's cost over K, rates its bytes over that time."""
    c = body["clock_overhead_ms"]
    test.assertGreater(c, 0.0)
    # On glibc (every machine this suite runs on) malloc keeps what is freed, as Candle's.
    test.assertIs(body["freed_memory_kept"], True)
    for r in body["rows"]:
        iters = large_plan(plan).iters if r["case"] in ("large", "dram") else plan.iters
        for v in r["variants"]:
            m = v["measured"]
            test.assertEqual(v["status"], "ok", v)
            k = m["calls_per_sample"]
            test.assertGreaterEqual(k, 1)
            test.assertEqual(len(m["samples_wall_ms"]), iters)
            test.assertAlmostEqual(m["time_ms"], per_call_ms(rate_ms(m), c, k), delta=1e-12)
            test.assertLessEqual(m["time_ms"] * k, m["median_ms"])
            rate = r["bytes_moved"] / (m["time_ms"] * 1e-3) / 1e9
            test.assertAlmostEqual(m["gb_per_s"], rate, delta=1e-9 * rate)
            pct = 100 * m["gb_per_s"] / r["ceiling"]["gb_per_s"]
            test.assertAlmostEqual(m["pct_of_ceiling"], pct, delta=1e-9 * pct)


class Runs(unittest.TestCase):
    """A run without --bounds: its own ceiling, labelled as not the ladder."""

    @classmethod
    def setUpClass(cls):
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = Path(cls.dir.name) / "k.json"
        cls.ran = run(*TINY, "--cases", "block-decode,large", "--output", str(cls.path))
        cls.file = json.loads(cls.path.read_text()) if cls.ran.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)

    def test_the_file_validates_against_the_schema(self):
        schema_validator(self)(self.file)
        f = self.file
        self.assertEqual(
            (f["schema_version"], f["experiment"]), (rust_schema_version(self), "kernels")
        )
        self.assertEqual(f["environment"]["framework"], "pytorch")

    def test_every_row_has_its_variants_rates_and_times_per_call(self):
        k = self.file["kernels"]
        self.assertEqual([c["name"] for c in k["cases"]], ["block-decode", "large"])
        rows = k["rows"]
        self.assertEqual(len(rows), 6 * 2 * 3)
        for r in rows:
            self.assertEqual(r["bytes_moved"], r["bytes_read"] + r["bytes_written"])
            c = r["ceiling"]
            self.assertEqual(c["bytes_copied"], r["bytes_moved"] // 2)
            self.assertTrue(c["call"].startswith(OWN_CEILING), c["call"])
            self.assertNotIn("bound", c)
            self.assertAlmostEqual(
                c["gb_per_s"],
                2 * c["bytes_copied"] / c["time_ms"] / 1e6,
                delta=1e-9 * c["gb_per_s"],
            )
            want = ["pytorch"] if r["op"] in ("copy", "add") else ["pytorch", "composed"]
            self.assertEqual([v["implementation"] for v in r["variants"]], want)
            for v in r["variants"]:
                bound = 1e-5 if r["precision"] == "fp32" else 2e-2
                self.assertLess(v["measured"]["accuracy"]["max_rel_err"], bound, r["op"])
        check_times(self, k, Plan(warmup=1, iters=2))

    def test_the_threads_and_wait_policy_are_candles_and_stated(self):
        f, threads = self.file, candle_pool_threads()
        self.assertEqual(f["kernels"]["cpu_threads"], threads)
        self.assertEqual(f["environment"]["compute_threads"], threads)
        self.assertEqual(f["environment"]["omp_wait_policy"], "active")
        title = self.ran.stdout.splitlines()[0]
        self.assertIn(f"{threads} threads (torch.set_num_threads)", title)
        self.assertIn("OMP_WAIT_POLICY=ACTIVE", title)
        self.assertIn("a pytorch copy, not the ladder", title)

    def test_cases_and_bytes_are_candles(self):
        # bench::kernels::tests::cases_take_the_block_and_smollm2_sizes, the CPU's defaults.
        got = [
            (c.name, c.tokens, c.hidden, c.heads, c.mlp, c.context)
            for c in cases(False, ["block-prefill", "smollm2-decode", "large", "dram"], None, 32, 7)
        ]
        self.assertEqual(
            got,
            [
                ("block-prefill", 128, 512, 8, 1376, 128),
                ("smollm2-decode", 1, 576, 9, 1536, 129),
                ("large", 2048, 4096, 1, 4096, 4096),
                ("dram", 7, 4096, 1, 4096, 4096),
            ],
        )
        c = cases(False, ["smollm2-decode"], None, 16, 1)[0]
        self.assertEqual(shape("softmax", c), [9, 1, 129])
        self.assertEqual(traffic("rms_norm_mul", 100, 10, 2), (220, 200))
        self.assertEqual(traffic("add", 100, 10, 4), (800, 400))
        self.assertAlmostEqual(normwise([1.0, 0.0, 2.1], [1.0, 0.1, 2.0])[0], 0.05, places=12)
        # bench::kernels::default_large_mib: twice the last-level cache, within 16..=128.
        self.assertEqual(
            [large_mib_for(llc) for llc in (None, 4 << 20, 300 << 20, 1 << 30)], [64, 16, 128, 128]
        )
        self.assertEqual(default_large_mib(True), 1024)
        # bench::kernels::dram_case: a tensor of half of max(4 x the last cache, 256 MiB).
        self.assertEqual([dram_rows_for(c) for c in (None, 480 << 20)], [8192, 61440])
        self.assertEqual(size(2 << 20), "2 MiB")
        self.assertEqual(size(3 << 29), "1.5 GiB")


class Pairing(unittest.TestCase):
    """The thread count and the wait policy, each applied and recorded."""

    def file(self, *args, env=None) -> tuple[dict, str]:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "k.json"
            ran = run(
                *SMALL,
                "--ops",
                "add",
                "--cases",
                "block-decode",
                *args,
                "--output",
                str(out),
                env=env,
            )
            self.assertEqual(ran.returncode, 0, ran.stderr)
            return json.loads(out.read_text()), ran.stdout.splitlines()[0]

    def setUp(self):
        torch_or_skip()

    def test_torch_is_imported_only_after_the_flags_are_parsed(self):
        # OMP_WAIT_POLICY must be in the environment before torch loads OpenMP.
        script = (
            f"import sys; sys.path.insert(0, {str(PYTORCH)!r}); from kernels import cli; "
            "cli.parse_args(['--device', 'cpu', '--bounds', 'x.json']); "
            "print('torch' in sys.modules)"
        )
        ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        self.assertEqual((ran.returncode, ran.stdout.strip()), (0, "False"), ran.stderr)

    def test_the_default_follows_candles_rule(self):
        f, title = self.file(env={"RAYON_NUM_THREADS": "1"})
        self.assertEqual((f["kernels"]["cpu_threads"], f["environment"]["compute_threads"]), (1, 1))
        self.assertIn("1 threads", title)

    def test_threads_and_a_passive_policy_asked_for(self):
        f, title = self.file("--threads", "2", "--omp-wait-policy", "passive")
        self.assertEqual(f["kernels"]["cpu_threads"], 2)
        self.assertEqual(f["environment"]["omp_wait_policy"], "passive")
        self.assertIn("2 threads (torch.set_num_threads), OMP_WAIT_POLICY=PASSIVE", title)


class Bounds(unittest.TestCase):
    """--bounds from a Candle kernels file: a twin run made to look like Candle's (so this
    needs no Rust), then the twin held against it, and every refusal."""

    @classmethod
    def setUpClass(cls):
        torch_or_skip()
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.d = Path(cls.dir.name)
        ran = run(*SMALL, "--threads", "1", "--output", str(d / "own.json"))
        assert ran.returncode == 0, ran.stderr
        cls.candle = as_candles(json.loads((d / "own.json").read_text()), threads=1)
        cls.bounds = cls.write("candle.json", cls.candle)
        # Only what the pairing needs: the other flags come from the file's run.
        cls.ran = run(
            "--device",
            "cpu",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--bounds",
            str(cls.bounds),
            "--output",
            str(d / "pt.json"),
        )
        cls.file = json.loads((d / "pt.json").read_text()) if cls.ran.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    @classmethod
    def write(cls, name: str, value) -> Path:
        path = cls.d / name
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return path

    def test_each_ceiling_is_the_files_and_the_rates_are_against_it(self):
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)
        schema_validator(self)(self.candle)
        schema_validator(self)(self.file)
        theirs, ours = self.candle["kernels"], self.file["kernels"]
        self.assertEqual(ours["cases"], theirs["cases"], "the file's --seq and --large-mib")
        self.assertEqual(ours["cpu_threads"], 1, "the file's pool")
        self.assertEqual(len(ours["rows"]), len(theirs["rows"]))
        for mine, candle in zip(ours["rows"], theirs["rows"]):
            self.assertEqual(
                [mine[k] for k in ("op", "case", "precision", "bytes_moved")],
                [candle[k] for k in ("op", "case", "precision", "bytes_moved")],
            )
            c = dict(mine["ceiling"])
            self.assertEqual(
                c.pop("call"), f"Candle's bound (--bounds): {candle['ceiling']['call']}"
            )
            self.assertEqual(c, {k: v for k, v in candle["ceiling"].items() if k != "call"})
        check_times(self, ours, Plan(warmup=1, iters=2))
        self.assertIn(f"% of Candle's ladder from {self.bounds}", self.ran.stdout.splitlines()[0])

    def test_compare_reads_both_files(self):
        self.assertEqual(self.ran.returncode, 0, self.ran.stderr)
        r = subprocess.run(
            [str(target_bin("compare")), str(self.bounds), str(self.d / "pt.json")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kernels rms_norm block-decode", r.stdout)
        self.assertNotIn("only in", r.stdout.lower())

    def refused(self, expect: str, *args: str, bounds=None, code=1):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "k.json"
            ran = run(*TINY, "--bounds", str(bounds or self.bounds), *args, "--output", str(out))
            self.assertEqual(ran.returncode, code, ran.stderr)
            self.assertEqual(len(errors(ran)), 1, ran.stderr)
            self.assertIn(expect, errors(ran)[0])
            self.assertNotIn("Traceback", ran.stderr)
            self.assertFalse(out.exists())

    def edited(self, name: str, edit) -> Path:
        f = copy.deepcopy(self.candle)
        edit(f)
        return self.write(name, f)

    def test_a_row_the_file_lacks(self):
        self.refused(
            "has no row for 8 of 12 (rms_norm block-decode fp16,",
            "--dtypes",
            "fp16,bf16",
            "--ops",
            "rms_norm,add,copy",
        )

    def test_another_footprint(self):
        self.refused(
            "another footprint for 2 rows (rms_norm large fp32: [64, 4096] moving",
            "--large-mib",
            "2",
            "--ops",
            "rms_norm",
        )

    def test_another_machine(self):
        cpu = self.edited("cpu.json", lambda f: f["environment"].update(cpu_model="Other CPU"))
        self.refused("measured on 'Other CPU', this CPU is", bounds=cpu)
        gpu = self.edited("gpu.json", lambda f: f["device"].update(kind="cuda", name="H200"))
        self.refused("measured on cuda (H200), this run is on cpu", bounds=gpu)

    def test_a_file_that_is_not_candles_ladder(self):
        own = self.d / "own.json"
        self.refused("written by 'pytorch', not Candle", bounds=own)
        old = self.edited("old.json", lambda f: f["kernels"]["rows"][0]["ceiling"].pop("bound"))
        self.refused("1 of 8 rows without a ladder bound (rms_norm block-decode fp32)", bounds=old)
        zero = self.edited(
            "zero.json", lambda f: f["kernels"]["rows"][1]["ceiling"].update(gb_per_s=0)
        )
        self.refused("1 ceiling without a positive GB/s (rms_norm block-decode bf16)", bounds=zero)
        other = self.edited("other.json", lambda f: f.update(experiment="memory"))
        self.refused("a 'memory' result, not a kernels one", bounds=other)
        self.refused("not JSON", bounds=self.write("bad.json", "{"))
        self.refused("cannot read it", bounds=self.d / "missing.json")

    def test_more_threads_than_the_pool_the_bounds_had(self):
        self.refused("--threads 2: --bounds", "--threads", "2")

    def test_no_output_over_the_bounds(self):
        ran = run(*TINY, "--bounds", str(self.bounds), "--output", str(self.bounds))
        self.assertEqual(ran.returncode, 1, ran.stderr)
        self.assertIn("it is --bounds", errors(ran)[0])
        self.assertEqual(json.loads(self.bounds.read_text()), self.candle)

    def test_dry_run_checks_the_file_and_states_the_pairing(self):
        ran = run("--dry-run", "--device", "cpu", "--bounds", str(self.bounds))
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertIn(f"bounds: Candle's ladder from {self.bounds}", ran.stdout)
        self.assertIn("threads: 1 (torch.set_num_threads), OMP_WAIT_POLICY=ACTIVE", ran.stdout)
        self.assertIn("ops: rms_norm, add", ran.stdout)
        ran = run("--dry-run", "--device", "cpu", "--bounds", str(self.bounds), "--large-mib", "2")
        self.assertEqual(ran.returncode, 1, ran.stderr)
        self.assertIn("another footprint", errors(ran)[0])


class WithCandle(unittest.TestCase):
    """Candle's own kernels file (its dev build, tiny, its dram case under a 1 MiB ladder) as
    --bounds, then `compare`: the twin's rows and variants are Candle's, the dram case's
    composed form left out by both (bench::kernels::implementations_at)."""

    def test_the_twin_takes_candles_bounds_and_compare_pairs_the_files(self):
        torch_or_skip()
        with tempfile.TemporaryDirectory() as d:
            candle, twin = Path(d) / "candle.json", Path(d) / "pt.json"
            cases = ["--cases", "block-decode,dram"]
            flags = [*TINY, "--ops", "rms_norm,add", *cases, "--dtypes", "fp32"]
            made = subprocess.run(
                [
                    str(target_bin("kernels")),
                    *flags,
                    "--ladder-max-mib",
                    "1",
                    "--output",
                    str(candle),
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            self.assertEqual(made.returncode, 0, made.stderr)
            ran = run(*flags, "--bounds", str(candle), "--output", str(twin))
            self.assertEqual(ran.returncode, 0, ran.stderr)
            theirs, ours = (json.loads(p.read_text()) for p in (candle, twin))
            schema_validator(self)(ours)
            self.assertEqual(ours["kernels"]["cpu_threads"], theirs["kernels"]["cpu_threads"])
            def key(r: dict) -> tuple:
                return (r["op"], r["case"], r["precision"])

            self.assertEqual(
                [key(r) for r in ours["kernels"]["rows"]],
                [key(r) for r in theirs["kernels"]["rows"]],
            )
            self.assertIn("dram", {r["case"] for r in ours["kernels"]["rows"]})
            for mine, row in zip(ours["kernels"]["rows"], theirs["kernels"]["rows"]):
                # Candle's kernel's column is PyTorch's op's; Candle's own op has no twin.
                want = [
                    {"lab": "pytorch"}.get(v["implementation"], v["implementation"])
                    for v in row["variants"]
                    if v["implementation"] != "candle"
                ]
                got = [v["implementation"] for v in mine["variants"]]
                self.assertEqual(got, want, key(row))
                self.assertEqual(mine["ceiling"]["bound"], row["ceiling"]["bound"])
                self.assertEqual(
                    mine["ceiling"]["samples_wall_ms"], row["ceiling"]["samples_wall_ms"]
                )
            r = subprocess.run(
                [str(target_bin("compare")), str(candle), str(twin)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("kernels add block-decode", r.stdout)


class Refusals(unittest.TestCase):
    def setUp(self):
        torch_or_skip()

    def refused(self, args, expect, code=2):
        ran = run(*args)
        self.assertEqual(ran.returncode, code, ran.stderr)
        self.assertEqual(len(errors(ran)), 1, ran.stderr)
        self.assertIn(expect, errors(ran)[0])

    def test_bad_flags_are_one_line_and_exit_2(self):
        self.refused(["--dtypes", "tf32"], "the kernels run fp32, fp16 and bf16")
        self.refused(["--cases", "huge"], "unknown case 'huge'")
        self.refused(["--ops", "matmul"], "unknown op 'matmul'")
        self.refused(["--large-mib", "0"], "--large-mib")
        self.refused(["--threads", "0"], "--threads")
        self.refused(["--omp-wait-policy", "spin"], "invalid choice: 'spin'")

    def test_dry_run_plans_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "sub" / "k.json"
            ran = run("--dry-run", "--device", "cpu", "--output", str(out))
            self.assertEqual(ran.returncode, 0, ran.stderr)
            self.assertIn("dry run: kernels", ran.stdout)
            self.assertIn("block-prefill", ran.stdout)
            self.assertIn("bounds: a pytorch copy", ran.stdout)
            self.assertFalse(out.parent.exists())


if __name__ == "__main__":
    unittest.main()
