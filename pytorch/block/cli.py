"""The command line of pytorch/block, as experiments/block.rs: the flags with their
bounds, each refusal one `error:` line on stderr, and cli.py's exit codes (0 every row
ran, 1 the run failed and wrote no file, 2 a refused command line, 3 the file was
written but some rows failed, 130 interrupted). The block's shape is the weights file's
(`--weights`, what Candle's `block --save-weights` wrote); --batch --seq --hidden --heads
--kv-heads --mlp and --seed are accepted where they agree with it, and refused where they
do not."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from block.dryrun import plan_lines
from block.weights import read_shape
from common.cli import Parser, add_device_and_counts, bounded, finish, import_torch, plan_of
from common.errors import Failure
from common.results import refuse_overwriting_inputs
from common.precisions import parse_dtypes
from common.timing import Plan

BLOCK_DTYPES = ["fp32", "tf32", "fp16", "bf16"]
DEFAULT_DTYPES = "fp32,fp16,bf16"
# experiments/block.rs's defaults: 20 timed and 3 warm-up runs on a GPU, 10 and 2 on the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=3, iters=20), Plan(warmup=2, iters=10)
SEED = 42  # block.rs's default --seed
# The shape flags and their bounds, as block.rs's.
SHAPE_FLAGS = {
    "batch": 4096,
    "seq": 1 << 20,
    "hidden": 1 << 16,
    "heads": 4096,
    "kv_heads": 4096,
    "mlp": 1 << 18,
}


def block_dtypes(text: str):
    """`--dtypes` as precisions.parse_dtypes reads it, then only what the block runs."""
    precisions = parse_dtypes(text)
    other = next((p for p in precisions if p.name not in BLOCK_DTYPES), None)
    if other is not None:
        raise argparse.ArgumentTypeError(
            f"{other.name}: the block runs fp32, tf32 (on a GPU), fp16 and bf16"
        )
    return precisions


def phases(text: str) -> list[str]:
    out = []
    for raw in text.split(","):
        name = raw.strip()
        if name not in ("prefill", "decode"):
            raise argparse.ArgumentTypeError(f"unknown phase '{raw}': expected prefill or decode")
        if name not in out:
            out.append(name)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog="pytorch/block",
        allow_abbrev=False,
        description="candle-lab's block experiment with PyTorch: one decoder block per "
        "precision, prefill and decode, on the weights Candle's `block --save-weights` wrote.",
    )
    p.add_argument(
        "--weights",
        type=Path,
        required=True,
        metavar="FILE",
        help="the weights and inputs (f32 safetensors) Candle's `block "
        "--save-weights FILE` wrote; the block's shape is read from it",
    )
    add_device_and_counts(p, GPU_PLAN, CPU_PLAN, "row")
    p.add_argument(
        "--dtypes",
        type=block_dtypes,
        default=block_dtypes(DEFAULT_DTYPES),
        help="fp32, tf32 (CUDA: allow_tf32), fp16, bf16 (default fp32,fp16,bf16)",
    )
    p.add_argument(
        "--phases",
        type=phases,
        default=["prefill", "decode"],
        help="comma-separated: prefill, decode (default both)",
    )
    p.add_argument(
        "--accuracy-seq",
        type=bounded(1, 4096),
        default=16,
        help="prefill tokens whose output is checked against the f64 run (default 16)",
    )
    for flag, hi in SHAPE_FLAGS.items():
        p.add_argument(
            f"--{flag.replace('_', '-')}",
            type=bounded(1, hi),
            default=None,
            help=f"accepted when it is the weights file's {flag} (the file sets it)",
        )
    p.add_argument(
        "--seed",
        type=bounded(0, (1 << 64) - 1),
        default=None,
        help="the seed Candle made the file with, recorded in the result (default "
        "42; refused where the file records another)",
    )
    p.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON result to FILE, or to standard output for - (the "
        "tables then go to stderr)",
    )
    p.add_argument(
        "--save-output",
        type=Path,
        metavar="FILE",
        help="also write each row's checked outputs (f32 safetensors: "
        "y_prefill_<precision>, the first --accuracy-seq tokens, and "
        "y_decode_<precision>) to FILE",
    )
    p.add_argument(
        "--skip-host-memory-check",
        action="store_true",
        help="do not check host memory before allocating (for machines whose "
        "memory grows on demand)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every flag and the weights file's header as a run would, import "
        "torch, print the plan and exit: no device is opened, no file is written",
    )
    args = p.parse_args(argv)
    if args.save_output is not None and str(args.save_output) == "-":
        p.error("--save-output -: the outputs are binary (safetensors); give a file")
    settle_shape(p, args)
    return args


def settle_shape(p: Parser, args: argparse.Namespace) -> None:
    """args.shape from the weights file's header, the shape flags and --seed checked
    against it (a mismatch is a refused command line, exit 2), the seed settled, and
    accuracy_seq capped at seq. A file that cannot be read is the run's failure (exit 1),
    kept in args.failure; in a dry run a file not there yet is not one (a rehearsal plans
    the run before Candle writes it): the plan then says so, shape unknown."""
    args.failure, args.shape, meta = None, None, {}
    if args.dry_run and not args.weights.exists():
        pass
    else:
        try:
            args.shape, meta = read_shape(args.weights)
        except Failure as e:
            args.failure = e
            return
    for flag in SHAPE_FLAGS:
        given, has = getattr(args, flag), getattr(args.shape, flag, None)
        if given is not None and has is not None and given != has:
            p.error(
                f"--{flag.replace('_', '-')} {given}: the weights file {args.weights} has "
                f"{flag} {has} (the block's shape comes from the file)"
            )
    recorded = meta.get("seed")
    if recorded is not None and args.seed is not None and str(args.seed) != str(recorded):
        p.error(f"--seed {args.seed}: the weights file {args.weights} records seed {recorded}")
    args.seed_source = "the file's" if recorded is not None else "--seed's; the file records none"
    if args.seed is None:
        args.seed = int(recorded) if recorded is not None else SEED
    if args.shape is not None:
        args.accuracy_seq = min(args.accuracy_seq, args.shape.seq)


@dataclass(frozen=True)
class Config:
    """What blockrun.run_block needs from the flags."""

    accuracy_seq: int
    plan: Plan
    precisions: list
    phases: list[str]
    seed: int
    sizes_note: str


def config(args, on_gpu: bool | None) -> Config:
    """The run's settings once the device is known (`on_gpu` None: not known yet, as in a
    dry run with --device auto; then the CPU's defaults stand in)."""
    default = GPU_PLAN if on_gpu else CPU_PLAN
    s = args.shape
    sizes = "(not read yet)"
    if s is not None:
        sizes = (
            f"batch {s.batch}, seq {s.seq}, hidden {s.hidden}, {s.heads} heads "
            f"({s.kv_heads} key/value), MLP {s.mlp}"
        )
    note = (
        f"sizes from the weights file {args.weights} (Candle's block --save-weights): {sizes}; "
        f"seed {args.seed} ({args.seed_source})"
    )
    return Config(
        accuracy_seq=args.accuracy_seq,
        plan=plan_of(args, default),
        precisions=args.dtypes,
        phases=args.phases,
        seed=args.seed,
        sizes_note=note,
    )


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    args = parse_args(argv)

    def run() -> tuple[list[str], int]:
        if args.failure is not None:
            raise args.failure
        refuse_overwriting_inputs(
            [args.output, args.save_output], [("the weights file", args.weights)]
        )
        torch = import_torch()
        if args.dry_run:
            print("\n".join(plan_lines(torch, args, config)))
            return [], 0
        # The run's modules (and theirs) once the flags are known good.
        from block.experiment import experiment_block

        return experiment_block(torch, args, config)

    return finish(run)
