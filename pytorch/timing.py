"""The clock, as src/timing.rs: how many runs to make (a Plan, and the reference lab's CPU
plan beside a GPU run), and the one place that synchronizes, records CUDA events and
reads the host timer."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    warmup: int
    iters: int


def cpu_plan(gpu_iters: int) -> Plan:
    """The reference lab's CPU plan beside a GPU run: 1 warm-up, max(3, iters / 4) runs."""
    return Plan(warmup=1, iters=max(3, gpu_iters // 4))


class Clock:
    """src/timing.rs's model. Per sample: synchronize; record a start event (CUDA); start
    the host clock; run; record an end event; synchronize; stop the host clock. Warm-up
    runs first, untimed. The output is dropped after the clock stops."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time(self, plan: Plan, work) -> tuple[list[float], list[float]]:
        for _ in range(plan.warmup):
            out = work()
            self.sync()
            del out
        wall_ms, gpu_ms = [], []
        for _ in range(plan.iters):
            self.sync()
            if self.cuda:
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
            t0 = time.perf_counter()
            out = work()
            if self.cuda:
                end.record()
            self.sync()
            wall_ms.append((time.perf_counter() - t0) * 1e3)
            del out
            if self.cuda:
                gpu_ms.append(start.elapsed_time(end))
        return wall_ms, gpu_ms
