"""The clock, as src/clock/mod.rs: how many runs to make (a Plan, and the reference lab's CPU
plan beside a GPU run), and the one place that synchronizes, records CUDA events and
reads the host timer; `timed`, the samples as the schema's Timed; `timed_interleaved`,
works compared with each other timed in turn (A B A B, as src/clock/interleave.rs), so
that what drifts while they run falls on both alike; and for work of a few hundred
nanoseconds, src/bench/ladder's way: K calls a sample (`time_calls`), the clock's own cost
(`clock_cost_ms`) subtracted, a time per call."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from common.errors import Failure
from common.stats import quantile_sorted, summarize


@dataclass(frozen=True)
class Plan:
    warmup: int
    iters: int


# src/clock/overhead.rs OVERHEAD_PLAN: empty runs are cheap, so many.
OVERHEAD_PLAN = Plan(warmup=10, iters=200)
# src/bench/ladder/mod.rs SAMPLE_MS: a sample lasts at least this long, thousands of times
# the clock's own cost, so what is subtracted is a correction, not the measurement.
SAMPLE_MS = 0.25
MAX_CALLS_PER_SAMPLE = 1_000_000


def cpu_plan(gpu_iters: int) -> Plan:
    """The reference lab's CPU plan beside a GPU run: 1 warm-up, max(3, iters / 4) runs."""
    return Plan(warmup=1, iters=max(3, gpu_iters // 4))


class Clock:
    """src/clock/mod.rs's model. Warm-up runs first, untimed, each between two
    synchronizations (the first also drains what was queued before, such as the inputs'
    copies). Then per sample: synchronize; record the start event (CUDA); start the host
    clock; run; record the end event; synchronize; stop the host clock. So the wall time
    covers launching the work, running it and the synchronization that waits for it; the
    event time covers the stream from start to end event. The output is dropped after the
    clock stops. The two events are made once, before the samples, and reused by each."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def events(self):
        """The start and end events, or None on the CPU. torch makes a CUDA event at its
        first record(), not when the Event object is built, so both are recorded once
        here, off the clock: no sample pays for making one."""
        if not self.cuda:
            return None
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        self.sync()
        return start, end

    def time(self, plan: Plan, work) -> tuple[list[float], list[float]]:
        """`plan`'s samples of `work`: the wall times and the CUDA-event times (empty on
        the CPU), in ms."""
        for _ in range(plan.warmup):
            self.warm(work)
        events = self.events()
        wall_ms, gpu_ms = [], []
        for _ in range(plan.iters):
            self.sample(work, events, wall_ms, gpu_ms)
        return wall_ms, gpu_ms

    def time_interleaved(self, plan: Plan, works: list) -> list[tuple[list[float], list[float]]]:
        """`works` timed in turn (src/clock/interleave.rs time_interleaved): plan.warmup
        rounds untimed, then plan.iters rounds, each timing every work once, in order, each
        sample this clock's usual one (the same two events for all). Returns each work's
        (wall, CUDA-event) samples, in the order given."""
        for _ in range(plan.warmup):
            for work in works:
                self.warm(work)
        events = self.events()
        out = [([], []) for _ in works]
        for _ in range(plan.iters):
            for work, (wall_ms, gpu_ms) in zip(works, out):
                self.sample(work, events, wall_ms, gpu_ms)
        return out

    def warm(self, work) -> None:
        """One untimed run between two synchronizations."""
        self.sync()
        out = work()
        self.sync()
        del out

    def sample(self, work, events, wall_ms: list[float], gpu_ms: list[float]) -> None:
        """One timed run, its wall time appended to `wall_ms` and (with `events`) its
        event time to `gpu_ms`."""
        self.sync()
        if events:
            events[0].record()
        t0 = time.perf_counter()
        out = work()
        if events:
            events[1].record()
        self.sync()
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        del out
        if events:
            gpu_ms.append(events[0].elapsed_time(events[1]))


def timed(clock: Clock, plan: Plan, work) -> dict:
    """The schema's Timed from `plan`'s samples of `work` on `clock`. The GPU's state and
    the machine's availability are not read by the twins: null."""
    return as_timed(*clock.time(plan, work))


def timed_interleaved(clock: Clock, plan: Plan, works: list) -> list[dict]:
    """One Timed per work of `works`, timed in turn on `clock` (Clock.time_interleaved)."""
    return [as_timed(wall, gpu) for wall, gpu in clock.time_interleaved(plan, works)]


def as_timed(wall: list[float], gpu: list[float]) -> dict:
    """The schema's Timed of one work's samples (`timed`'s and `timed_interleaved`'s)."""
    wall_ms, gpu_ms = summarize(wall), summarize(gpu)
    if wall_ms is None:
        raise Failure("no finite timed samples")
    return {
        "median_ms": wall_ms["median"],
        "gpu_median_ms": gpu_ms["median"] if gpu_ms else None,
        "wall_ms": wall_ms,
        "gpu_ms": gpu_ms,
        "samples_wall_ms": wall,
        "samples_gpu_ms": gpu,
        "gpu_before": None,
        "gpu_after": None,
        "availability": None,
    }


def rate_ms(t: dict) -> float:
    """The time rates divide by (Timed::rate_ms): CUDA events on a GPU, else the wall."""
    return t["gpu_median_ms"] if t["gpu_median_ms"] is not None else t["median_ms"]


def time_source(t: dict) -> str:
    """The schema's TimeSource of rate_ms(t): "gpu_median_ms" or "median_ms"."""
    return "gpu_median_ms" if t["gpu_median_ms"] is not None else "median_ms"


def samples_ms(t: dict) -> list[float]:
    """The samples rate_ms(t) is the median of (Timed::samples_ms): CUDA events' on a
    GPU, else the wall clock's."""
    return t["samples_gpu_ms"] or t["samples_wall_ms"]


def clock_cost_ms(clock: Clock) -> float:
    """The clock's own cost per sample, as src/clock/overhead.rs measures it: an empty work
    item through Clock.time under OVERHEAD_PLAN, the median (of the CUDA events on a GPU,
    the time rates divide by there; else of the wall clock). The clock covers what it
    covers for real work: the host timer, the end event and the synchronization."""
    wall, gpu = clock.time(OVERHEAD_PLAN, lambda: None)
    samples = sorted(gpu or wall)
    return quantile_sorted(samples, 0.5)


def calls_per_sample(one_call_ms: float, sample_ms: float = SAMPLE_MS) -> int:
    """src/bench/ladder calls_per_sample: enough calls that a sample lasts `sample_ms`,
    between 1 and a million."""
    if not one_call_ms > 0.0:
        return 1
    return min(max(math.ceil(sample_ms / one_call_ms), 1), MAX_CALLS_PER_SAMPLE)


def per_call_ms(sample_median_ms: float, clock_ms: float, k: int) -> float:
    """(the median sample - the clock's cost) / K, never below a thousandth of the raw
    median / K: a clock cost measured larger than a sample must not make a rate infinite
    (src/bench/ladder time_calls)."""
    return max((sample_median_ms - clock_ms) / k, sample_median_ms / k * 1e-3)


def time_calls(clock: Clock, plan: Plan, call, clock_ms: float) -> tuple[dict, int, float]:
    """src/bench/ladder time_calls: K chosen from the fastest of three single calls (each
    synchronized; the first wakes the thread pool), then `plan`'s samples of K calls each,
    each output dropped as its call returns (as Candle's); returns the schema's Timed of
    those samples, K, and the time per call (per_call_ms). The clock covers K calls, the
    Python loop around them and the synchronization after them."""
    one = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        call()
        clock.sync()
        one = min(one, (time.perf_counter() - t0) * 1e3)
    k = calls_per_sample(one)

    def work():
        for _ in range(k):
            call()

    t = timed(clock, plan, work)
    return t, k, per_call_ms(rate_ms(t), clock_ms, k)
