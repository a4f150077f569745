"""The command line of the PyTorch reference, as src/cli.rs: the flags with their bounds,
each refusal one `error:` line on stderr, and the exit codes: 0 when every row ran,
1 when the run failed (no file), 2 for a refused command line, 3 when the file was
written but some rows failed (each holds its error), 130 when interrupted."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.cli import MAX_SIZE, Parser, bounded, finish, import_torch
from common.devices import parse_device, select_device
from common.environment import environment
from common.precisions import DEFAULT_DTYPES, PRECISIONS, parse_dtypes
from common.results import command_line, envelope, write_json_atomic
from common.rows import failed_rows
from matmul.dryrun import plan_lines
from matmul.experiments import EXPERIMENTS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog="pytorch/matmul",
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


def main(argv: list[str] | None = None) -> int:
    """Exit codes as src/cli.rs: see the module's docstring."""
    args = parse_args(argv)
    return finish(lambda: run(args))
