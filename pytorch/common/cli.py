"""The pieces of a PyTorch twin's command line, as src/cli.rs's: the parser whose refusals
are one `error:` line and exit 2 (common.outcome's EXIT_USAGE), bounded whole numbers,
--iters and --warmup with a device's default plan, and importing torch with one clear
error. The flags every twin shares (--device, --output, --skip-host-memory-check,
--dry-run) are declared once, in common.runner."""

from __future__ import annotations

import argparse
import sys
import warnings

from common.errors import Failure, first_line
from common.outcome import EXIT_USAGE

MAX_SIZE = 1_000_000  # as src/cli.rs: keeps 3 n^2 x 8 far from overflow elsewhere


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as src/outcome.rs usage()
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def bounded(lo: int, hi: int | None = None):
    """An argparse type: a whole number in lo..=hi (no upper bound when hi is None)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid value '{text}': not a whole number"
            ) from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{v} is not in {lo}..={hi if hi else ''}")
        return v

    return parse


def add_counts(p: argparse.ArgumentParser, gpu, cpu, per: str) -> None:
    """--iters and --warmup, as src/cli.rs's RunCounts: a count left out takes the device's
    default plan (`gpu` or `cpu`, common.timing.Plan), through plan_of()."""
    p.add_argument(
        "--iters",
        type=bounded(1, 100_000),
        default=None,
        help=f"timed runs per {per} (default: {gpu.iters} on a GPU, {cpu.iters} on the CPU)",
    )
    p.add_argument(
        "--warmup",
        type=bounded(0, 10_000),
        default=None,
        help=f"untimed runs before timing, per {per} (default: {gpu.warmup} on a GPU, "
        f"{cpu.warmup} on the CPU)",
    )


def plan_of(args: argparse.Namespace, default):
    """The run's plan: --iters and --warmup where given, else `default`'s."""
    from common.timing import Plan

    return Plan(
        warmup=default.warmup if args.warmup is None else args.warmup,
        iters=default.iters if args.iters is None else args.iters,
    )


def import_torch():
    # torch warns at import when numpy is missing; nothing here uses numpy. And torch >= 2.9
    # calls allow_tf32 deprecated: see precisions.GemmMode for why it is still the one to use.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    warnings.filterwarnings("ignore", message=".*new API settings to control TF32")
    try:
        import torch
    except Exception as e:
        raise Failure(
            f"cannot import torch ({first_line(e)}); run through `just pytorch`, "
            "which makes a Python environment with it"
        ) from e
    return torch
