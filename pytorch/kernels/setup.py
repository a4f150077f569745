"""The plan a kernels run follows, as experiments/kernels.rs's config(): the device's
default counts, the precisions, ops and cases the flags (or --bounds' run, for the flags
left out) ask for, the bytes the largest case needs, and the pairing with Candle's column
(torch's threads, OpenMP's wait policy, the bounds file read and each row's bound from
it). Its own module so that the command line (kernels.cli), the dry run and the run import
it and not each other."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from common import cpuidentity, threads
from common.cli import plan_of
from common.environment import cpu_model
from common.errors import Failure
from common.precisions import parse_dtypes
from common.timing import Plan
from kernels import bounds
from kernels.ops import OPS
from kernels.run import CASES, cases, default_large_mib, dram_rows_for, planned_rows

# experiments/kernels.rs's defaults: 30 timed and 5 warm-up runs on a GPU, 10 and 2 on
# the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=5, iters=30), Plan(warmup=2, iters=10)


def kernel_dtypes(text: str):
    """`--dtypes` as precisions.parse_dtypes reads it, then only what the kernels run."""
    precisions = parse_dtypes(text)
    other = next((p for p in precisions if p.name not in ("fp32", "fp16", "bf16")), None)
    if other is not None:
        raise argparse.ArgumentTypeError(f"'{other.name}': the kernels run fp32, fp16 and bf16")
    return precisions


@dataclass(frozen=True)
class Config:
    """The checked plan of a run: its counts, precisions, ops and cases."""

    plan: Plan
    precisions: list
    ops: list[str]
    cases: list


def config(args, on_gpu: bool | None, given: dict | None, cache: int | None) -> Config:
    """The run's settings for the device kind (None, as in a dry run with --device auto:
    the CPU's defaults stand in); a flag left out takes `given`'s value (--bounds' run's:
    the ops and cases of it this twin has) where it has one, else the device's default.
    `cache`: the device's largest cache in bytes, which sizes the dram case without a file."""
    given = given or {}
    known = {"ops": OPS, "cases": CASES}

    def pick(name: str, default):
        flag = getattr(args, name)
        if flag is not None:
            return flag
        value = given.get(name)
        if name in known and value is not None:
            value = [v for v in value if v in known[name]]
        return value or default

    try:
        dtypes = args.dtypes or (kernel_dtypes(",".join(given["dtypes"])) if given else None)
    except argparse.ArgumentTypeError as e:
        raise Failure(f"--bounds: its rows' precisions: {e}") from e
    large = pick("large_mib", None) or default_large_mib(bool(on_gpu))
    return Config(
        plan=plan_of(args, GPU_PLAN if on_gpu else CPU_PLAN),
        precisions=dtypes or kernel_dtypes("fp32,fp16,bf16"),
        ops=pick("ops", list(OPS)),
        cases=cases(
            bool(on_gpu),
            pick("cases", list(CASES)),
            pick("seq", None),
            large,
            given.get("dram_rows") or dram_rows_for(cache),
        ),
    )


def needs(cfg: Config) -> int:
    """bench::kernels::needs: ten tensor-sized f32 buffers of the largest op, per case."""
    return max((r["elements"] for r in planned_rows(cfg)), default=0) * 4 * 10


@dataclass(frozen=True)
class Pairing:
    """What the column runs under: torch's threads, OpenMP's wait policy, the bounds file
    (read and checked) or None."""

    threads: int
    policy: str
    bounds: Path | None
    file: dict | None


def pairing(torch, args) -> Pairing:
    """Reads --bounds, settles the thread count (the file's Candle pool, or this machine's
    as Candle counts it, unless --threads says otherwise; never more than the pool the
    bounds were measured on) and applies both settings before any work."""
    file = bounds.read(args.bounds) if args.bounds is not None else None
    pool = bounds.pool_threads(file) if file else None
    n = args.threads or pool or threads.candle_pool_threads()
    if pool and n > pool:
        raise Failure(
            f"--threads {n}: --bounds {args.bounds} was measured on Candle's pool of {pool} "
            "threads, a bound more threads could beat; ask for at most that"
        )
    print(f"pytorch: {threads.apply(torch, n, args.omp_wait_policy)}", file=sys.stderr)
    return Pairing(n, args.omp_wait_policy, args.bounds, file)


def checked_ceilings(pair: Pairing, cfg: Config, info: dict | None) -> dict | None:
    """Each row's ceiling from the bounds file, the machine and rows checked (the machine
    only where `info`, the device, is known); None without --bounds."""
    if pair.file is None:
        return None
    if info is not None:
        bounds.check_machine(pair.bounds, pair.file, info, cpu_model(), cpuidentity.detect())
    return bounds.ceilings(pair.bounds, pair.file, planned_rows(cfg))


def given_by(pair: Pairing) -> dict | None:
    """What --bounds' run asked for (its flags' values), for the flags left out."""
    return bounds.run_of(pair.file) if pair.file else None
