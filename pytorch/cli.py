"""The command line of the PyTorch reference, as src/cli.rs: the flags with their bounds,
each refusal one `error:` line on stderr, and the exit codes: 0 when every row ran,
1 when the run failed (no file), 2 for a refused command line, 3 when the file was
written but some rows failed (each holds its error), 130 when interrupted."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Callable

from devices import parse_device, select_device
from dryrun import plan_lines
from environment import environment
from errors import Failure, first_line
from experiments import EXPERIMENTS
from precisions import DEFAULT_DTYPES, PRECISIONS, parse_dtypes
from results import command_line, envelope, write_json_atomic
from rows import failed_rows

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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog="pytorch/matmul.py",
        allow_abbrev=False,
        description="candle-lab's matmul and cpu_vs_gpu measurements with PyTorch, written as "
        "result schema 2.0 (same flags, defaults and timing model as the Rust programs).",
    )
    p.add_argument(
        "--experiment",
        choices=["matmul", "cpu_vs_gpu"],
        default="matmul",
        help="matmul: one row per --dtypes precision; cpu_vs_gpu: fp32 on the CPU "
        "and on the GPU, and the speedup (default: matmul)",
    )
    p.add_argument(
        "--device",
        type=parse_device,
        default="auto",
        metavar="DEVICE",
        help="auto (CUDA GPU 0 if torch has CUDA and a GPU answers, else the CPU), "
        "cpu, cuda, or cuda:N",
    )
    p.add_argument(
        "--size",
        type=bounded(1, MAX_SIZE),
        default=4096,
        help="side n of the n x n matrices (default: 4096)",
    )
    p.add_argument(
        "--iters",
        type=bounded(1),
        default=20,
        help="timed runs per row (the CPU comparison makes max(3, iters/4); default 20)",
    )
    p.add_argument(
        "--warmup",
        type=bounded(0),
        default=5,
        help="untimed runs before timing, per row (the CPU comparison makes one; default 5)",
    )
    p.add_argument(
        "--skip-host-memory-check",
        action="store_true",
        help="do not check host memory before allocating. For machines whose memory grows "
        "on demand, where what the kernel reports at start understates what a run can "
        "have; a size that does not fit then aborts the process",
    )
    p.add_argument(
        "--dtypes",
        type=parse_dtypes,
        default=None,
        help="matmul only: fp64, fp32, tf32, fp16, fp16-reduced, bf16 (default "
        "fp32,fp16,bf16). tf32 and fp16-reduced are cuBLAS modes and need CUDA; "
        "bf16-reduced is refused: PyTorch has no equivalent",
    )
    p.add_argument(
        "--accuracy-rows",
        type=bounded(1),
        default=None,
        help="matmul only: rows of C checked against f64 (default 16)",
    )
    p.add_argument(
        "--no-cpu",
        action="store_true",
        default=None,
        help="matmul only: on a GPU, skip the fp32 CPU comparison",
    )
    p.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON result to FILE (parent folders are created)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every flag and value as a run would, import torch, print the plan and "
        "exit: no device is opened (its kind comes from --device), nothing big is "
        "allocated, no file is written",
    )
    args = p.parse_args(argv)
    matmul_only = [
        f
        for f, v in [
            ("--dtypes", args.dtypes),
            ("--accuracy-rows", args.accuracy_rows),
            ("--no-cpu", args.no_cpu),
        ]
        if v is not None
    ]
    if args.experiment != "matmul" and matmul_only:
        p.error(f"{', '.join(matmul_only)}: for --experiment matmul only")
    args.dtypes = args.dtypes or [PRECISIONS[d] for d in DEFAULT_DTYPES]
    args.accuracy_rows = args.accuracy_rows or 16
    args.no_cpu = bool(args.no_cpu)
    return args


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


def run(args: argparse.Namespace) -> tuple[list[str], int]:
    """Runs the experiment and writes its file; returns the failed rows and the row count.
    A dry run prints its plan instead, and has no rows."""
    torch = import_torch()
    if args.dry_run:
        print("\n".join(plan_lines(torch, args)))
        return [], 0
    device, info = select_device(torch, args.device)
    body, rows = EXPERIMENTS[args.experiment](torch, args, device, info)
    if args.output:
        result = envelope(args.experiment, command_line(), environment(torch), info, body)
        write_json_atomic(args.output, result)
        print(f"wrote {args.output}", file=sys.stderr)
    return failed_rows(rows)


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


def main(argv: list[str] | None = None) -> int:
    """Exit codes as src/cli.rs: see the module's docstring."""
    args = parse_args(argv)
    return finish(lambda: run(args))
