"""The command line of pytorch/block, as experiments/block.rs: the twin's own flags with
their bounds, its checked config, and the Experiment common.runner runs (which declares
the shared flags and decides the exit codes: 0 every row ran, 1 the run failed and wrote
no file, 2 a refused command line, 3 the file was written but some rows failed, 130
interrupted). The block's shape is the weights file's (`--weights`, what Candle's `block
--save-weights` wrote); --batch --seq --hidden --heads --kv-heads --mlp and --seed are
accepted where they agree with it, and refused where they do not."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from block import dryrun, experiment
from block.weights import read_shape
from common import runner
from common.cli import Parser, add_counts, bounded, plan_of
from common.precisions import check_dtypes, parse_dtypes
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


# The block's body is schema 2.3's (src/schema/mod.rs SCHEMA_VERSION; 2.3 added kv_heads,
# time_source, cache_bytes and each row's copy_bytes and copy_ceiling_gb_per_s).
BLOCK_SCHEMA_VERSION = "2.3"


def add_flags(p: argparse.ArgumentParser) -> None:
    """The block's own flags, beside the runner's shared ones."""
    p.add_argument(
        "--weights",
        type=Path,
        required=True,
        metavar="FILE",
        help="the weights and inputs (f32 safetensors) Candle's `block "
        "--save-weights FILE` wrote; the block's shape is read from it",
    )
    add_counts(p, GPU_PLAN, CPU_PLAN, "row")
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
        "--save-output",
        type=Path,
        metavar="FILE",
        help="also write each row's checked outputs (f32 safetensors: "
        "y_prefill_<precision>, the first --accuracy-seq tokens, and "
        "y_decode_<precision>) to FILE",
    )


def check_args(p: Parser, args: argparse.Namespace) -> None:
    """--save-output's target, then the shape (settle_shape)."""
    if args.save_output is not None and str(args.save_output) == "-":
        p.error("--save-output -: the outputs are binary (safetensors); give a file")
    settle_shape(p, args)


def settle_shape(p: Parser, args: argparse.Namespace) -> None:
    """args.shape from the weights file's header, the shape flags and --seed checked
    against it (a mismatch is a refused command line, exit 2), the seed settled, and
    accuracy_seq capped at seq. A file that cannot be read is the run's failure (exit 1:
    read_shape's Failure, which the runner ends the run with); in a dry run a file not
    there yet is not one (a rehearsal plans the run before Candle writes it): the plan
    then says so, shape unknown."""
    args.shape, meta = None, {}
    if not (args.dry_run and not args.weights.exists()):
        args.shape, meta = read_shape(args.weights)
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


class Block(runner.Experiment):
    """The block twin, as experiments/block.rs's Experiment."""

    PROG = "pytorch/block"
    ABOUT = (
        "candle-lab's block experiment with PyTorch: one decoder block per precision, "
        "prefill and decode, on the weights Candle's `block --save-weights` wrote."
    )
    KIND = "block"
    SCHEMA_VERSION = BLOCK_SCHEMA_VERSION
    DRY_RUN_READS = " and the weights file's header"

    # The twin's own flags and checks, module functions (tested on their own).
    add_flags = staticmethod(add_flags)
    check_args = staticmethod(check_args)

    def inputs(self, args):
        return [("the weights file", args.weights)]

    def side_files(self, args):
        return [args.save_output]

    def plan_lines(self, dry):
        return dryrun.plan_lines(dry, config)

    def config(self, session):
        cfg = config(session.args, session.on_gpu)
        check_dtypes(session.torch, cfg.precisions, session.on_gpu)
        return cfg

    def fits(self, session, cfg, check_host):
        experiment.fits(session, check_host)

    def run(self, session, cfg):
        return experiment.run(session, cfg)


TWIN = Block()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return runner.parse_args(TWIN, argv)


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    return runner.main(TWIN, argv)
