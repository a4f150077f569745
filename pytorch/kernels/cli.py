"""The command line of pytorch/kernels, as experiments/kernels.rs: the twin's own flags
with the same defaults, and the Experiment common.runner runs (which declares the shared
flags and decides the exit codes: 0 every variant ran, 1 the run failed and wrote no file,
2 a refused command line, 3 the file was written but some variants failed, 130
interrupted). The plan is kernels.setup's, the dry run's plan kernels.dryrun's, the run
kernels.experiment's.

The twin's own flags pair its column with Candle's: --threads (Candle's pool's count by
default, applied with torch.set_num_threads before any work), --omp-wait-policy (active by
default, as Candle's pool spins; put in OMP_WAIT_POLICY after the flags are parsed and
before torch is imported, then checked against what OpenMP's idle threads do) and --bounds
FILE (Candle's kernels file of this machine: each row's ceiling is its row's ladder bound;
the flags left out take its run's values)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import runner
from common.cli import add_counts, bounded
from common.threads import WAIT_POLICIES, set_wait_policy
from kernels import dryrun, experiment
from kernels.ops import OPS
from kernels.run import CASES
from kernels.setup import CPU_PLAN, GPU_PLAN, kernel_dtypes, pairing

# The schema version written: the Rust side's (src/schema/mod.rs SCHEMA_VERSION; a test
# holds the two equal).
KERNELS_SCHEMA_VERSION = "2.14"


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


def add_flags(p: argparse.ArgumentParser) -> None:
    """The kernels' own flags, beside the runner's shared ones."""
    add_counts(p, GPU_PLAN, CPU_PLAN, "variant")
    p.add_argument(
        "--dtypes",
        type=kernel_dtypes,
        default=None,
        help="fp32, fp16, bf16 (default all three, or --bounds' run's)",
    )
    p.add_argument(
        "--ops",
        type=names_of(OPS, "op"),
        default=None,
        help=f"comma-separated: {', '.join(OPS)} (default all, or --bounds' run's)",
    )
    p.add_argument(
        "--cases",
        type=names_of(CASES, "case"),
        default=None,
        help=f"comma-separated: {', '.join(CASES)} (default all, or --bounds' run's)",
    )
    p.add_argument(
        "--seq",
        type=bounded(1, 1 << 20),
        default=None,
        help="tokens of the prefill cases, the KV cache's in decode (default: "
        "--bounds' run's, else 2048 on a GPU, 128 on the CPU)",
    )
    p.add_argument(
        "--large-mib",
        type=bounded(1, 1 << 20),
        default=None,
        help="one f32 tensor of the large case, in MiB (default: --bounds' run's, "
        "else 1024 on a GPU, on the CPU twice the last-level cache within 16..=128)",
    )
    add_pairing_flags(p)


def add_pairing_flags(p: argparse.ArgumentParser) -> None:
    """What pairs the twin's column with Candle's: threads, OpenMP's policy, the bounds."""
    p.add_argument(
        "--threads",
        type=bounded(1, 4096),
        default=None,
        help="torch's intra-op threads, set before any work (default: --bounds' "
        "run's Candle pool, else this machine's as Candle counts it: "
        "RAYON_NUM_THREADS, else the physical cores)",
    )
    p.add_argument(
        "--omp-wait-policy",
        type=str.lower,
        choices=WAIT_POLICIES,
        default="active",
        help="OpenMP's OMP_WAIT_POLICY for torch's threads, set before torch loads: "
        "active (default: idle threads spin, as Candle's pool does) or passive "
        "(they sleep)",
    )
    p.add_argument(
        "--bounds",
        type=Path,
        metavar="FILE",
        help="Candle's `kernels --output FILE` of this machine: each row is held "
        "against its row's ladder bound (without it: PyTorch's own copy, not the "
        "ladder)",
    )
    p.add_argument(
        "--ladder-max-mib",
        type=bounded(1, 1 << 20),
        default=None,
        metavar="MIB",
        help="Candle's flag, accepted so that one command line serves both programs: "
        "the ladder is Candle's, and with --bounds its file's points are the bounds",
    )


class Kernels(runner.Experiment):
    """The kernels twin, as experiments/kernels.rs's Experiment."""

    PROG = "pytorch/kernels"
    ABOUT = (
        "candle-lab's kernels experiment with PyTorch: PyTorch's op and the composed form "
        "per op, shape and precision, against Candle's bandwidth ladder (--bounds) or a "
        "copy of the same bytes."
    )
    KIND = "kernels"
    SCHEMA_VERSION = KERNELS_SCHEMA_VERSION

    def add_flags(self, p):
        add_flags(p)

    def inputs(self, args):
        return [("--bounds", args.bounds)]

    def before_torch(self, args):
        replaced = set_wait_policy(args.omp_wait_policy)  # before torch loads OpenMP
        if replaced:
            print(
                f"note: OMP_WAIT_POLICY={replaced} in the environment replaced by "
                f"--omp-wait-policy {args.omp_wait_policy}",
                file=sys.stderr,
            )

    def open(self, torch, args):
        return pairing(torch, args)

    def plan_lines(self, dry):
        return dryrun.plan_lines(dry)

    def config(self, session):
        return experiment.checked(session)  # (the plan, each row's bound)

    def fits(self, session, planned, check_host):
        experiment.fits(session, planned[0], check_host)

    def run(self, session, planned):
        return experiment.run(session, *planned)


TWIN = Kernels()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return runner.parse_args(TWIN, argv)


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    return runner.main(TWIN, argv)
