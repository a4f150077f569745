"""common.runner's sequence on a toy twin (no measurement): the order of its steps, what a
dry run leaves out, the checks made before any work, the result's envelope and where it
goes, and the exit code of each end. The twins' own tests run it through the real ones."""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

from common import runner
from common.testkit import run_in_process, torch_or_skip


class Toy(runner.Experiment):
    """A twin whose run measures nothing: it records which of its steps ran."""

    PROG = "toy"
    KIND = "toy"
    SCHEMA_VERSION = "9.9"

    def __init__(self):
        self.calls = []

    def add_flags(self, p):
        p.add_argument("--input", type=Path)
        p.add_argument("--fail", action="store_true")

    def inputs(self, args):
        return [("the toy's input", args.input)]

    def before_torch(self, args):
        self.calls.append("before_torch")

    def open(self, torch, args):
        self.calls.append("open")
        return "opened"

    def plan_lines(self, dry):
        self.calls.append("plan")
        return [f"dry run: toy on {dry.device_line}, {dry.state}"]

    def config(self, session):
        self.calls.append("config")
        return {"on_gpu": session.on_gpu}

    def fits(self, session, cfg, check_host):
        self.calls.append("fits" if check_host else "fits, host skipped")

    def run(self, session, cfg):
        self.calls.append("run")
        failed = ["b"] if session.args.fail else []
        body = {"cfg": cfg, "state": session.state}
        return runner.Report(
            body, failed, 2, show=lambda screen, env: print("the table", file=screen)
        )


class Sequence(unittest.TestCase):
    def setUp(self):
        torch_or_skip()
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.dir = Path(d.name)

    def run_toy(self, *args: str):
        toy = Toy()
        code, out, err = run_in_process(
            "--device", "cpu", *args, entry=lambda argv: runner.main(toy, argv)
        )
        return toy.calls, code, out, err

    def test_a_run_checks_then_runs_then_writes_its_envelope(self):
        out = self.dir / "sub" / "r.json"
        calls, code, stdout, err = self.run_toy("--output", str(out))
        self.assertEqual(code, 0, err)
        self.assertEqual(calls, ["before_torch", "open", "config", "fits", "run"])
        f = json.loads(out.read_text())
        self.assertEqual((f["schema_version"], f["experiment"]), ("9.9", "toy"))
        self.assertEqual(f["toy"], {"cfg": {"on_gpu": False}, "state": "opened"})
        self.assertEqual(f["device"]["kind"], "cpu")
        self.assertIn("framework_version", f["environment"])
        self.assertEqual(stdout, "the table\n")
        self.assertIn(f"wrote {out}", err)

    def test_a_dry_run_plans_and_opens_no_device(self):
        out = self.dir / "sub" / "r.json"
        calls, code, stdout, err = self.run_toy("--dry-run", "--output", str(out))
        self.assertEqual((code, calls), (0, ["before_torch", "open", "plan"]), err)
        self.assertEqual(stdout, "dry run: toy on cpu (asked for with --device cpu), opened\n")
        self.assertFalse(out.parent.exists())

    def test_standard_output_takes_the_json_and_stderr_the_tables(self):
        calls, code, stdout, err = self.run_toy("--output", "-", "--skip-host-memory-check")
        self.assertEqual(code, 0, err)
        self.assertIn("fits, host skipped", calls)
        self.assertEqual(json.loads(stdout)["experiment"], "toy")
        self.assertIn("the table", err)

    def test_failed_rows_keep_the_file_and_exit_3(self):
        out = self.dir / "r.json"
        _, code, _, err = self.run_toy("--fail", "--output", str(out))
        self.assertEqual(code, 3, err)
        self.assertTrue(out.exists())
        self.assertEqual(
            err.splitlines()[-1],
            "error: 1 of 2 rows failed (b); the other rows and the report were kept",
        )

    def test_refusals_come_before_the_work(self):
        given = self.dir / "in.json"
        given.write_text("{}")
        # An output that is an input: refused before torch loads (no step of the twin's).
        calls, code, _, err = self.run_toy("--input", str(given), "--output", str(given))
        self.assertEqual((code, calls), (1, []), err)
        self.assertIn("it is the toy's input", err)
        self.assertEqual(given.read_text(), "{}")
        # An output that cannot be written: refused before the run.
        calls, code, _, err = self.run_toy("--output", str(self.dir))
        self.assertEqual((code, calls[-1]), (1, "fits"), err)
        self.assertEqual(err.splitlines()[-1], f"error: cannot write {self.dir}: it is a directory")
        # A flag refused: exit 2, one line, nothing run.
        calls, code, _, err = self.run_toy("--output")
        self.assertEqual((code, calls, len(err.splitlines())), (2, [], 1), err)


if __name__ == "__main__":
    unittest.main()
