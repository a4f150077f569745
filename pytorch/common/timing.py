"""The clock, as src/clock/mod.rs: how many runs to make (a Plan, and the reference lab's CPU
plan beside a GPU run), and the one place that synchronizes, records CUDA events and
reads the host timer; `timed`, the samples as the schema's Timed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from common.errors import Failure
from common.stats import summarize


@dataclass(frozen=True)
class Plan:
    warmup: int
    iters: int


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
        for _ in range(plan.warmup):
            self.sync()
            out = work()
            self.sync()
            del out
        events = self.events()
        wall_ms, gpu_ms = [], []
        for _ in range(plan.iters):
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
        return wall_ms, gpu_ms


def timed(clock: Clock, plan: Plan, work) -> dict:
    """The schema's Timed from `plan`'s samples of `work` on `clock`. The GPU's state and
    the machine's availability are not read by the twins: null."""
    wall, gpu = clock.time(plan, work)
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
