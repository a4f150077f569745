"""The command line of the PyTorch reference, as src/cli.rs: the twin's own flags with
their bounds, and the Experiment common.runner runs (which declares the shared flags and
decides the exit codes: 0 when every row ran, 1 when the run failed (no file), 2 for a
refused command line, 3 when the file was written but some rows failed (each holds its
error), 130 when interrupted). Its --output is always a file (`-` too): unlike the other
twins', it never was standard output, and scripts rely on its flags as they are."""

from __future__ import annotations

import argparse

from common import runner
from common.cli import MAX_SIZE, Parser, bounded
from common.precisions import DEFAULT_DTYPES, PRECISIONS, check_dtypes, parse_dtypes
from matmul import dryrun, experiments


def add_flags(p: argparse.ArgumentParser) -> None:
    """matmul's own flags, beside the runner's shared ones."""
    p.add_argument(
        "--experiment",
        choices=["matmul", "cpu_vs_gpu"],
        default="matmul",
        help="matmul: one row per --dtypes precision; cpu_vs_gpu: fp32 on the CPU "
        "and on the GPU, and the speedup (default: matmul)",
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


def check_args(p: Parser, args: argparse.Namespace) -> None:
    """Refuses matmul's flags for cpu_vs_gpu, then settles their defaults."""
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


class Matmul(runner.Experiment):
    """The matmul and cpu_vs_gpu twin, as experiments/matmul.rs's and cpu_vs_gpu.rs's."""

    PROG = "pytorch/matmul"
    ABOUT = (
        "candle-lab's matmul and cpu_vs_gpu measurements with PyTorch, written as result "
        "schema 2.6 (same flags, defaults and timing model as the Rust programs)."
    )
    # 2.6: a row's `vs_fp32_side_by_side` (matmul.beside); every older field as 2.0 has it.
    SCHEMA_VERSION = "2.6"
    STDOUT = False
    DRY_RUN_READS = " and value"

    # The twin's own flags and checks, module functions (tested on their own).
    add_flags = staticmethod(add_flags)
    check_args = staticmethod(check_args)

    def kind(self, args):
        return args.experiment

    def plan_lines(self, dry):
        return dryrun.plan_lines(dry)

    def config(self, session):
        # The flags are the plan; the precisions checked on the device that opened.
        if session.args.experiment == "matmul":
            check_dtypes(session.torch, session.args.dtypes, session.on_gpu)

    def fits(self, session, cfg, check_host):
        experiments.fits(session, check_host)

    def run(self, session, cfg):
        return experiments.run(session)


TWIN = Matmul()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return runner.parse_args(TWIN, argv)


def main(argv: list[str] | None = None) -> int:
    """Exit codes as src/cli.rs: see the module's docstring."""
    return runner.main(TWIN, argv)
