"""The twins' exit codes (common.outcome) against the Rust programs' (src/outcome.rs),
read from the Rust source: a code changed on one side fails here until the other follows.
And finish(), the one place that turns a run's end into its code and its line."""

from __future__ import annotations

import os
import re
import signal
import unittest

from common import outcome
from common.errors import Failure
from common.testkit import ROOT, run_in_process

OUTCOME_RS = ROOT / "src" / "outcome.rs"


def rust_exit_codes(text: str) -> dict[str, int]:
    """outcome.rs's `pub const EXIT_NAME: u8 = N;`, by name (CHECK_FAILED, compare's code
    for a check asked for, is no EXIT_: the twins check nothing)."""
    return {name: int(n) for name, n in re.findall(r"pub const (EXIT_\w+): u8 = (\d+);", text)}


def rust_signal_base(text: str) -> int | None:
    """N of outcome.rs's `fn signal_exit_code(signal: i32) -> i32 { N + signal }`."""
    found = re.search(r"fn signal_exit_code\(\w+: i32\) -> i32 \{\s*(\d+) \+ \w+\s*\}", text)
    return int(found.group(1)) if found else None


class AgainstOutcomeRs(unittest.TestCase):
    def setUp(self):
        if not OUTCOME_RS.exists():  # a bundle of the twins alone; never in CI
            if os.environ.get("CI"):
                self.fail(f"{OUTCOME_RS} is missing")
            self.skipTest(f"no {OUTCOME_RS}")
        self.text = OUTCOME_RS.read_text()

    def test_the_exit_codes_are_outcome_rs_s(self):
        rust = rust_exit_codes(self.text)
        self.assertGreaterEqual(len(rust), 3, f"outcome.rs's constants not found: {rust}")
        self.assertEqual(outcome.EXIT_CODES, rust)

    def test_an_interrupted_run_is_128_plus_the_signal(self):
        self.assertEqual(rust_signal_base(self.text), 128)
        self.assertEqual(outcome.EXIT_INTERRUPTED, rust_signal_base(self.text) + signal.SIGINT)


class Reading(unittest.TestCase):
    """The readers above see a drift: a changed value, a name more, a changed base."""

    def test_a_changed_code_is_read_as_changed(self):
        text = "pub const EXIT_ERROR: u8 = 1;\npub const EXIT_USAGE: u8 = 64;\n"
        self.assertEqual(rust_exit_codes(text), {"EXIT_ERROR": 1, "EXIT_USAGE": 64})
        self.assertNotEqual(rust_exit_codes(text), outcome.EXIT_CODES)
        self.assertEqual(rust_exit_codes("pub const CHECK_FAILED: u8 = 1;"), {})

    def test_the_signal_base_is_read(self):
        text = "pub fn signal_exit_code(signal: i32) -> i32 {\n    100 + signal\n}"
        self.assertEqual(rust_signal_base(text), 100)
        self.assertIsNone(rust_signal_base("fn other() {}"))


class Finish(unittest.TestCase):
    """Each end of a run: its code, and at most one `error:` line on stderr."""

    def ends(self, run):
        return run_in_process(entry=lambda _argv: outcome.finish(run))

    def test_each_end_has_its_code_and_line(self):
        def raises(e):
            def run():
                raise e

            return run

        for run, code, line in [
            (lambda: ([], 4), 0, None),
            (
                lambda: (["fp16"], 3),
                outcome.EXIT_ROWS_FAILED,
                "error: 1 of 3 rows failed (fp16); the other rows and the report were kept",
            ),
            (raises(Failure("disk full")), outcome.EXIT_ERROR, "error: disk full"),
            (raises(KeyboardInterrupt()), 130, "error: interrupted"),
            (raises(ValueError("bad\nmore")), outcome.EXIT_ERROR, "error: ValueError: bad"),
        ]:
            got, out, err = self.ends(run)
            self.assertEqual((got, out), (code, ""), err)
            self.assertEqual(err.splitlines(), [line] if line else [])


if __name__ == "__main__":
    unittest.main()
