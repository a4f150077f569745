"""Tests of timing.py: the reference lab's CPU plan, the clock's order of operations on a
fake torch.cuda that logs every call (the CPU twin of a GPU check): a synchronize before
the first warm-up, and the two CUDA events made once, outside every timed window; and K
calls a sample (src/bench/ladder's rule, its test's values): K from the fastest single
call, K calls in every sample, the clock's cost taken off the median before dividing by K,
and the clock's cost itself on the real CPU clock; and works timed in turn (A B A B, as
src/clock/interleave.rs's test), each keeping its own samples."""

from __future__ import annotations

import types
import unittest
from unittest import mock

from common import timing


class Plans(unittest.TestCase):
    def test_cpu_plan_follows_the_reference(self):
        self.assertEqual(timing.cpu_plan(20), timing.Plan(warmup=1, iters=5))
        self.assertEqual(timing.cpu_plan(4).iters, 3)


def fake_torch(log: list[str]):
    """torch.cuda's synchronize and Event, each call appended to `log`."""

    class Event:
        made = 0

        def __init__(self, enable_timing=False):
            Event.made += 1
            self.id = Event.made
            log.append(f"new event {self.id}")

        def record(self):
            log.append(f"record {self.id}")

        def elapsed_time(self, end):
            return 1.0

    cuda = types.SimpleNamespace(synchronize=lambda device: log.append("sync"), Event=Event)
    return types.SimpleNamespace(cuda=cuda)


class Clock(unittest.TestCase):
    def run_clock(self, warmup: int, iters: int) -> list[str]:
        log: list[str] = []
        clock = timing.Clock(fake_torch(log), types.SimpleNamespace(type="cuda"))

        def perf_counter():
            log.append("clock")
            return float(len(log))

        def work():
            log.append("work")
            return object()

        with mock.patch.object(timing.time, "perf_counter", perf_counter):
            wall, gpu = clock.time(timing.Plan(warmup=warmup, iters=iters), work)
        self.assertEqual((len(wall), len(gpu)), (iters, iters))
        return log

    def test_the_first_warm_up_waits_for_queued_work(self):
        log = self.run_clock(warmup=2, iters=1)
        self.assertEqual(log[:4], ["sync", "work", "sync", "sync"])

    def test_events_are_made_once_and_recorded_before_the_first_sample(self):
        log = self.run_clock(warmup=1, iters=4)
        made = [e for e in log if e.startswith("new event")]
        self.assertEqual(made, ["new event 1", "new event 2"], "two events for every sample")
        first_clock = log.index("clock")
        for e in ["new event 1", "new event 2", "record 1", "record 2"]:
            self.assertLess(log.index(e), first_clock, f"{e}: before the first sample")
        # Inside each timed window (clock ... clock): the work, the end event, a sync.
        clocks = [i for i, e in enumerate(log) if e == "clock"]
        for t0, t1 in zip(clocks[::2], clocks[1::2]):
            self.assertEqual(log[t0 + 1 : t1], ["work", "record 2", "sync"])
            self.assertEqual(log[t0 - 2 : t0], ["sync", "record 1"])


class Interleaved(unittest.TestCase):
    def test_works_take_turns_and_each_keeps_its_own_samples(self):
        clock = timing.Clock(None, types.SimpleNamespace(type="cpu"))
        order, now = [], [0.0]

        def step(seconds: float, name: str):  # each work moves the fake timer its own way
            now[0] += seconds
            order.append(name)
            return object()

        works = [lambda: step(2.0**-9, "a"), lambda: step(3 * 2.0**-9, "b")]
        with mock.patch.object(timing.time, "perf_counter", lambda: now[0]):
            a, b = timing.timed_interleaved(clock, timing.Plan(warmup=1, iters=3), works)
        self.assertEqual("".join(order), "abababab", "a warm-up round, then 3 rounds in turn")
        for t, ms in [(a, 1e3 * 2.0**-9), (b, 3e3 * 2.0**-9)]:
            self.assertEqual(t["samples_wall_ms"], [ms] * 3)
            self.assertEqual((t["median_ms"], t["wall_ms"]["n"]), (ms, 3))
            self.assertEqual(
                (t["samples_gpu_ms"], t["gpu_ms"], t["gpu_median_ms"]), ([], None, None)
            )
            self.assertEqual((timing.samples_ms(t), timing.time_source(t)), ([ms] * 3, "median_ms"))

    def test_on_cuda_the_works_share_two_events_and_each_sample_is_the_clocks(self):
        log: list[str] = []
        clock = timing.Clock(fake_torch(log), types.SimpleNamespace(type="cuda"))
        works = [lambda: log.append("a"), lambda: log.append("b")]
        with mock.patch.object(timing.time, "perf_counter", lambda: log.append("clock") or 0.0):
            out = clock.time_interleaved(timing.Plan(warmup=1, iters=2), works)
        self.assertEqual(log[:6], ["sync", "a", "sync", "sync", "b", "sync"], "warm-up in turn")
        made = [e for e in log if e.startswith("new event")]
        self.assertEqual(made, ["new event 1", "new event 2"])
        clocks = [i for i, e in enumerate(log) if e == "clock"]
        windows = [log[t0 + 1 : t1] for t0, t1 in zip(clocks[::2], clocks[1::2])]
        self.assertEqual(windows, [[w, "record 2", "sync"] for w in "abab"])
        self.assertEqual([(len(w), len(g)) for w, g in out], [(2, 2), (2, 2)])


class Calls(unittest.TestCase):
    def test_a_sample_is_long_enough_to_dwarf_the_clock(self):
        # src/bench/ladder/mod.rs a_sample_is_long_enough_to_dwarf_the_clock.
        self.assertEqual(timing.calls_per_sample(0.0001, 0.25), 2500)
        self.assertEqual(timing.calls_per_sample(1.0, 0.25), 1)
        self.assertEqual(timing.calls_per_sample(0.0, 0.25), 1)
        self.assertEqual(timing.calls_per_sample(1e-12, 0.25), 1_000_000)

    def test_the_clock_cost_comes_off_before_dividing(self):
        self.assertAlmostEqual(timing.per_call_ms(1.0, 0.2, 4), 0.2, places=15)
        # A clock cost above the sample: a thousandth of the raw time per call, not 0.
        self.assertAlmostEqual(timing.per_call_ms(1.0, 5.0, 4), 0.25e-3, places=15)

    def test_every_sample_is_k_calls(self):
        calls, now = [], [0.0]

        def perf_counter():  # each reading 2^-16 s after the last (exact in binary)
            now[0] += 2.0**-16
            return now[0]

        class FakeClock:
            def sync(self):
                pass

            def time(self, plan, work):
                for _ in range(plan.warmup + plan.iters):
                    work()
                return [1.0, 2.0, 3.0][: plan.iters], []

        with mock.patch.object(timing.time, "perf_counter", perf_counter):
            t, k, ms = timing.time_calls(
                FakeClock(), timing.Plan(1, 3), lambda: calls.append(1), clock_ms=0.5
            )
        self.assertEqual(k, 17)  # a single call reads 0.0153 ms: ceil(0.25 / 0.0153) calls
        self.assertEqual(len(calls), 3 + k * (1 + 3))
        self.assertEqual(t["median_ms"], 2.0)
        self.assertAlmostEqual(ms, (2.0 - 0.5) / k, places=15)

    def test_the_clock_cost_on_the_cpu_is_small_and_positive(self):
        cost = timing.clock_cost_ms(timing.Clock(None, types.SimpleNamespace(type="cpu")))
        self.assertGreater(cost, 0.0)
        self.assertLess(cost, timing.SAMPLE_MS, "a sample must dwarf the clock")


if __name__ == "__main__":
    unittest.main()
