"""The command line of pytorch/kernels, as experiments/kernels.rs: the same flags and
defaults, each refusal one `error:` line on stderr, cli.py's exit codes (0 every variant
ran, 1 the run failed and wrote no file, 2 a refused command line, 3 the file was
written but some variants failed, 130 interrupted), the run itself (device, memory
check, output check, rows, file, table) and --dry-run's plan."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from common.cli import Parser, add_device_and_counts, bounded, finish, import_torch, plan_of
from common.precisions import parse_dtypes
from common.timing import Plan

# experiments/kernels.rs's defaults: 30 timed and 5 warm-up runs on a GPU, 10 and 2 on
# the CPU; the large case's tensor 1024 MiB on a GPU, 16 on the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=5, iters=30), Plan(warmup=2, iters=10)
GPU_LARGE_MIB, CPU_LARGE_MIB = 1024, 16
# The schema version the body was added in (src/schema/mod.rs SCHEMA_VERSION).
KERNELS_SCHEMA_VERSION = "2.3"


def names_of(allowed: list[str], what: str):
    """An argparse type: comma-separated names out of `allowed`, in order, each once."""

    def parse(text: str) -> list[str]:
        out = []
        for raw in text.split(","):
            name = raw.strip()
            if name not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} '{raw}': expected one of {', '.join(allowed)}"
                )
            if name not in out:
                out.append(name)
        return out

    return parse


def kernel_dtypes(text: str):
    precisions = parse_dtypes(text)
    other = next((p for p in precisions if p.name not in ("fp32", "fp16", "bf16")), None)
    if other is not None:
        raise argparse.ArgumentTypeError(f"'{other.name}': the kernels run fp32, fp16 and bf16")
    return precisions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from kernels.run import CASES, OPS

    p = Parser(
        prog="pytorch/kernels",
        allow_abbrev=False,
        description="candle-lab's kernels experiment with PyTorch: PyTorch's op and the "
        "composed form per op, shape and precision, against a copy of the same bytes.",
    )
    add_device_and_counts(p, GPU_PLAN, CPU_PLAN, "variant")
    p.add_argument("--dtypes", type=kernel_dtypes, default=kernel_dtypes("fp32,fp16,bf16"),
                   help="fp32, fp16, bf16 (default all three)")
    p.add_argument("--ops", type=names_of(OPS, "op"), default=list(OPS),
                   help=f"comma-separated: {', '.join(OPS)} (default all)")
    p.add_argument("--cases", type=names_of(CASES, "case"), default=list(CASES),
                   help=f"comma-separated: {', '.join(CASES)} (default all)")
    p.add_argument("--seq", type=bounded(1, 1 << 20), default=None,
                   help="tokens of the prefill cases, the KV cache's in decode (default: "
                   "2048 on a GPU, 128 on the CPU)")
    p.add_argument("--large-mib", type=bounded(1, 1 << 20), default=None,
                   help="one f32 tensor of the large case, in MiB (default: 1024 on a GPU, "
                   "16 on the CPU)")
    p.add_argument("--output", type=Path, metavar="FILE",
                   help="write the JSON result to FILE, or to standard output for -")
    p.add_argument("--skip-host-memory-check", action="store_true",
                   help="do not check host memory before allocating")
    p.add_argument("--dry-run", action="store_true",
                   help="check every flag as a run would, import torch, print the plan and "
                   "exit: no device is opened, no file is written")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Config:
    plan: Plan
    precisions: list
    ops: list[str]
    cases: list


def config(args, on_gpu: bool | None) -> Config:
    """The run's settings for the device kind (None, as in a dry run with --device auto:
    the CPU's defaults stand in)."""
    from kernels.run import cases

    default = GPU_PLAN if on_gpu else CPU_PLAN
    large = args.large_mib or (GPU_LARGE_MIB if on_gpu else CPU_LARGE_MIB)
    return Config(
        plan=plan_of(args, default),
        precisions=args.dtypes,
        ops=args.ops,
        cases=cases(bool(on_gpu), args.cases, args.seq, large),
    )


def needs(cfg: Config) -> int:
    """bench::kernels::needs: ten tensor-sized f32 buffers of the largest op, per case."""
    from kernels.run import shape

    most = 0
    for c in cfg.cases:
        for op in cfg.ops:
            n = 1
            for d in shape(op, c):
                n *= d
            most = max(most, n)
    return most * 4 * 10


def plan_lines(torch, args) -> list[str]:
    from common.dryrun import device_plan
    from common.results import check_would_write

    on_gpu, device_line = device_plan(torch, args.device)
    cfg = config(args, on_gpu)
    if args.output is not None and str(args.output) != "-":
        check_would_write(args.output)
    return [
        f"dry run: kernels on {device_line}; nothing computed",
        f"ops: {', '.join(cfg.ops)}",
        f"cases: {', '.join(f'{c.name} ({c.source})' for c in cfg.cases)}",
        f"dtypes: {', '.join(p.name for p in cfg.precisions)}",
        f"runs per variant: {cfg.plan.warmup} warm-up, {cfg.plan.iters} timed",
        f"memory: {needs(cfg) / (1 << 20):.1f} MiB at most",
        f"would write: {args.output if args.output is not None else 'nothing (no --output)'}",
    ]


def experiment(torch, args) -> tuple[list[str], int]:
    from common.devices import select_device
    from common.environment import environment
    from kernels.run import run_kernels, table_lines
    from common.memory import check_need
    from common.results import check_writable, command_line, envelope, json_text, write_json_atomic
    from common.timing import Clock

    device, info = select_device(torch, args.device)
    cfg = config(args, device.type == "cuda")
    check_need(torch, device, "the kernels' largest case", 0, needs(cfg),
               not args.skip_host_memory_check)
    to_stdout = args.output is not None and str(args.output) == "-"
    if args.output is not None and not to_stdout:
        check_writable(args.output)
    print(
        f"kernels: {len(cfg.ops)} ops x {len(cfg.cases)} cases x {len(cfg.precisions)} "
        f"precisions, warmup {cfg.plan.warmup}, iters {cfg.plan.iters}, on {info['label']}",
        file=sys.stderr,
    )
    body, failed, total = run_kernels(torch, Clock(torch, device), device, cfg)
    if args.output is not None:
        result = envelope("kernels", command_line(), environment(torch), info, body,
                          KERNELS_SCHEMA_VERSION)
        if to_stdout:
            sys.stdout.write(json_text(result))
            sys.stdout.flush()
        else:
            write_json_atomic(args.output, result)
            print(f"wrote {args.output}", file=sys.stderr)
    screen = sys.stderr if to_stdout else sys.stdout
    print("\n".join(table_lines(body)), file=screen)
    return failed, total


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    args = parse_args(argv)

    def run() -> tuple[list[str], int]:
        torch = import_torch()
        if args.dry_run:
            print("\n".join(plan_lines(torch, args)))
            return [], 0
        return experiment(torch, args)

    return finish(run)
