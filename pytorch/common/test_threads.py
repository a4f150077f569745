"""Tests of threads.py: Candle's pool's thread count read as candle-core 0.11.1 reads it (each
source in its order, on hand-made inputs), the spin shares that name a wait policy, and, in
child processes with torch, that OMP_WAIT_POLICY set before torch is imported takes while
one set after it changes nothing, and that apply() refuses such a run instead of recording
the policy it asked for."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from common import threads
from common.testkit import PYTORCH, torch_or_skip

# Two packages of 4 cores, 2 threads each: 16 logical CPUs, 8 physical cores.
CPUINFO = "\n\n".join(
    f"processor\t: {i}\nphysical id\t: {i // 8}\nsiblings\t: 8\ncpu cores\t: 4" for i in range(16)
)


def sysfs(capacities: list[int]) -> tempfile.TemporaryDirectory:
    d = tempfile.TemporaryDirectory()
    for i, c in enumerate(capacities):
        cpu = Path(d.name) / f"cpu{i}"
        cpu.mkdir()
        (cpu / "cpu_capacity").write_text(f"{c}\n")
    (Path(d.name) / "cpufreq").mkdir()  # not a CPU: skipped
    return d


class PoolThreads(unittest.TestCase):
    def count(self, env: dict, capacities=(1024, 1024)) -> int:
        with sysfs(list(capacities)) as root:
            return threads.candle_pool_threads(env, CPUINFO, Path(root))

    def test_rayon_num_threads_first(self):
        self.assertEqual(self.count({"RAYON_NUM_THREADS": "3", "CANDLE_CPU_MASK": "0-5"}), 3)

    def test_a_rayon_value_that_is_not_a_count_is_ignored(self):
        for bad in ["0", "-2", "two", ""]:
            self.assertEqual(self.count({"RAYON_NUM_THREADS": bad}), 8, bad)

    def test_then_the_cpu_mask(self):
        self.assertEqual(self.count({"CANDLE_CPU_MASK": "0-2,5,5"}), 4)
        self.assertEqual(self.count({"CANDLE_CPU_MASK": "3-1"}), 8, "malformed: ignored")

    def test_then_the_big_cores_of_a_hybrid_cpu(self):
        self.assertEqual(self.count({}, capacities=(1024, 1024, 400, 400, 400)), 2)
        self.assertEqual(self.count({}, capacities=(1024, 990)), 8, "within 10%: alike")

    def test_then_the_physical_cores_not_the_logical_cpus(self):
        self.assertEqual(self.count({}), 8)
        self.assertEqual(threads.physical_cores("processor : 0\n"), None)

    def test_cpu_lists(self):
        self.assertEqual(threads.cpu_list_count("0-3, 8,10-11"), 7)
        self.assertIsNone(threads.cpu_list_count(""))
        self.assertIsNone(threads.cpu_list_count("a-b"))


class WaitPolicy(unittest.TestCase):
    def test_a_spin_share_names_a_policy_only_when_clear(self):
        self.assertEqual(threads.observed_policy(0.5), "active")
        self.assertEqual(threads.observed_policy(0.03), "passive")
        self.assertIsNone(threads.observed_policy(0.15))

    def probe(self, at_import: str, later: str) -> list[str]:
        """A child process: OMP_WAIT_POLICY=at_import when torch is imported, then `later`
        set, and apply() asked for `later` on 2 threads: what it says."""
        torch_or_skip()
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(PYTORCH)!r})
            from common import threads
            from common.cli import import_torch
            from common.errors import Failure
            threads.set_wait_policy({at_import!r})
            torch = import_torch()
            threads.set_wait_policy({later!r})
            try:
                print("applied:", threads.apply(torch, 2, {later!r}))
            except Failure as e:
                print("refused:", e)
            """)
        ran = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
        )
        self.assertEqual(ran.returncode, 0, ran.stderr)
        return ran.stdout.strip()

    def test_set_before_torch_loads_it_takes(self):
        said = self.probe("active", "active")
        self.assertTrue(said.startswith("applied: 2 threads"), said)
        self.assertIn("OMP_WAIT_POLICY=ACTIVE", said)

    def test_set_after_torch_loads_it_changes_nothing_and_is_refused(self):
        said = self.probe("active", "passive")
        if "not confirmed" in said:
            self.skipTest(f"too busy a machine to tell spinning from sleeping: {said}")
        self.assertTrue(said.startswith("refused:"), said)
        self.assertIn("behave as ACTIVE, not the OMP_WAIT_POLICY=PASSIVE asked for", said)


if __name__ == "__main__":
    unittest.main()
