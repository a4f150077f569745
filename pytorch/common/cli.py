"""What every PyTorch twin's command line shares, as src/cli.rs and src/outcome.rs: the
bounds of the shared flags, one-line refusals (exit 2), importing torch with one clear
error, and finish(), the one place that decides exit codes (0, 1, 3, 130)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Callable

from common.errors import Failure, first_line

MAX_SIZE = 1_000_000  # as src/cli.rs: keeps 3 n^2 x 8 far from overflow elsewhere


# src/cli.rs's exit codes.
EXIT_ERROR = 1


EXIT_USAGE = 2


EXIT_ROWS_FAILED = 3


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as src/cli.rs parse()
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


def add_device_and_counts(p: argparse.ArgumentParser, gpu, cpu, per: str) -> None:
    """--device, --iters and --warmup, as src/cli.rs's RunCounts: a count left out takes
    the device's default plan (`gpu` or `cpu`, common.timing.Plan), through plan_of()."""
    from common.devices import parse_device

    p.add_argument(
        "--device",
        type=parse_device,
        default="auto",
        metavar="DEVICE",
        help="auto (CUDA GPU 0 if one answers, else the CPU), cpu, cuda, or cuda:N",
    )
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


def finish(run: Callable[[], tuple[list[str], int]]) -> int:
    """Runs a program's work and decides its exit code, in one place for matmul.py and
    block.py (as src/outcome.rs): every end is one `error:` line on stderr, never a traceback.
    `run` returns the failed rows' names and the row count."""
    try:
        failed, total = run()
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # no traceback for users: one line, as the Rust programs
        print(f"error: {type(e).__name__}: {first_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    if failed:
        print(
            f"error: {len(failed)} of {total} rows failed ({', '.join(failed)}); "
            "the other rows and the report were kept",
            file=sys.stderr,
        )
        return EXIT_ROWS_FAILED
    return 0
