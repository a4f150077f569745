"""The command line of pytorch/kernels, as experiments/kernels.rs: the same flags and
defaults, each refusal one `error:` line on stderr, cli.py's exit codes (0 every variant
ran, 1 the run failed and wrote no file, 2 a refused command line, 3 the file was
written but some variants failed, 130 interrupted), the run itself (device, memory
check, output check, rows, file, table) and --dry-run's plan.

The twin's own flags pair its column with Candle's: --threads (Candle's pool's count by
default, applied with torch.set_num_threads before any work), --omp-wait-policy (active by
default, as Candle's pool spins; put in OMP_WAIT_POLICY after the flags are parsed and
before torch is imported, then checked against what OpenMP's idle threads do) and --bounds
FILE (Candle's kernels file of this machine: each row's ceiling is its row's ladder bound;
the flags left out take its run's values)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from common.cli import Parser, add_device_and_counts, bounded, finish, import_torch, plan_of
from common.precisions import parse_dtypes
from common.timing import Plan

# experiments/kernels.rs's defaults: 30 timed and 5 warm-up runs on a GPU, 10 and 2 on
# the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=5, iters=30), Plan(warmup=2, iters=10)
# The schema version written: the Rust side's (src/schema/mod.rs SCHEMA_VERSION; a test
# holds the two equal).
KERNELS_SCHEMA_VERSION = "2.4"


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
    from common.threads import WAIT_POLICIES
    from kernels.ops import OPS
    from kernels.run import CASES

    p = Parser(
        prog="pytorch/kernels",
        allow_abbrev=False,
        description="candle-lab's kernels experiment with PyTorch: PyTorch's op and the "
        "composed form per op, shape and precision, against Candle's bandwidth ladder "
        "(--bounds) or a copy of the same bytes.",
    )
    add_device_and_counts(p, GPU_PLAN, CPU_PLAN, "variant")
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
    p.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON result to FILE, or to standard output for -",
    )
    p.add_argument(
        "--skip-host-memory-check",
        action="store_true",
        help="do not check host memory before allocating",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check every flag as a run would, import torch, print the plan and "
        "exit: no device is opened, no file is written",
    )
    return p.parse_args(argv)


@dataclass(frozen=True)
class Config:
    plan: Plan
    precisions: list
    ops: list[str]
    cases: list


def config(args, on_gpu: bool | None, given: dict | None) -> Config:
    """The run's settings for the device kind (None, as in a dry run with --device auto:
    the CPU's defaults stand in); a flag left out takes `given`'s value (--bounds' run's:
    the ops and cases of it this twin has) where it has one, else the device's default."""
    from common.errors import Failure
    from kernels.ops import OPS
    from kernels.run import CASES, cases, default_large_mib

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
        cases=cases(bool(on_gpu), pick("cases", list(CASES)), pick("seq", None), large),
    )


def needs(cfg: Config) -> int:
    """bench::kernels::needs: ten tensor-sized f32 buffers of the largest op, per case."""
    from kernels.run import planned_rows

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
    from common import threads
    from common.errors import Failure
    from kernels import bounds

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
    from common import cpuidentity
    from common.environment import cpu_model
    from kernels import bounds
    from kernels.run import planned_rows

    if pair.file is None:
        return None
    if info is not None:
        bounds.check_machine(pair.bounds, pair.file, info, cpu_model(), cpuidentity.detect())
    return bounds.ceilings(pair.bounds, pair.file, planned_rows(cfg))


def given_by(pair: Pairing) -> dict | None:
    from kernels.bounds import run_of

    return run_of(pair.file) if pair.file else None


def plan_lines(torch, args, pair: Pairing) -> list[str]:
    from common.dryrun import device_plan
    from common.results import check_would_write

    on_gpu, device_line = device_plan(torch, args.device)
    cfg = config(args, on_gpu, given_by(pair))
    from common.environment import cpu_model

    # The machine is checked where the device is known without opening it: the CPU.
    checked_ceilings(pair, cfg, {"kind": "cpu", "name": cpu_model()} if on_gpu is False else None)
    if args.output is not None and str(args.output) != "-":
        check_would_write(args.output)
    against = f"Candle's ladder from {pair.bounds}" if pair.bounds else "a pytorch copy"
    return [
        f"dry run: kernels on {device_line}; nothing computed",
        f"ops: {', '.join(cfg.ops)}",
        f"cases: {', '.join(f'{c.name} ({c.source})' for c in cfg.cases)}",
        f"dtypes: {', '.join(p.name for p in cfg.precisions)}",
        f"runs per variant: {cfg.plan.warmup} warm-up, {cfg.plan.iters} timed",
        f"threads: {pair.threads} (torch.set_num_threads), "
        f"OMP_WAIT_POLICY={pair.policy.upper()}",
        f"bounds: {against}",
        f"memory: {needs(cfg) / (1 << 20):.1f} MiB at most",
        f"would write: {args.output if args.output is not None else 'nothing (no --output)'}",
    ]


def experiment(torch, args, pair: Pairing) -> tuple[list[str], int]:
    from common.devices import select_device
    from common.environment import environment
    from common.memory import check_need
    from common.results import check_writable, command_line, envelope, json_text, write_json_atomic
    from common.timing import Clock, clock_cost_ms
    from kernels.run import run_kernels
    from kernels.table import show, title

    device, info = select_device(torch, args.device)
    cfg = config(args, device.type == "cuda", given_by(pair))
    ceilings = checked_ceilings(pair, cfg, info)
    check_need(
        torch, device, "the kernels' largest case", 0, needs(cfg), not args.skip_host_memory_check
    )
    to_stdout = args.output is not None and str(args.output) == "-"
    if args.output is not None and not to_stdout:
        check_writable(args.output)
    against = f"Candle's ladder from {pair.bounds}" if pair.bounds else "a pytorch copy"
    print(
        f"kernels: {len(cfg.ops)} ops x {len(cfg.cases)} cases x {len(cfg.precisions)} "
        f"precisions, warmup {cfg.plan.warmup}, iters {cfg.plan.iters}, on {info['label']}, "
        f"{pair.threads} threads, OMP_WAIT_POLICY={pair.policy.upper()}, against {against}",
        file=sys.stderr,
    )
    clock = Clock(torch, device)
    clock_ms = clock_cost_ms(clock)
    body, failed, total = run_kernels(torch, clock, device, cfg, ceilings, clock_ms)
    if args.output is not None:
        # OpenMP's wait policy, as set and checked: not in the schema's environment yet.
        env = environment(torch) | {"omp_wait_policy": pair.policy}
        result = envelope("kernels", command_line(), env, info, body, KERNELS_SCHEMA_VERSION)
        if to_stdout:
            sys.stdout.write(json_text(result))
            sys.stdout.flush()
        else:
            write_json_atomic(args.output, result)
            print(f"wrote {args.output}", file=sys.stderr)
    screen = sys.stderr if to_stdout else sys.stdout
    heading = title(
        info["label"], torch.__version__, pair.threads, pair.policy, pair.bounds, clock_ms
    )
    show(body, heading, file=screen)
    return failed, total


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see the module's docstring."""
    args = parse_args(argv)

    def run() -> tuple[list[str], int]:
        from common.results import refuse_overwriting_inputs
        from common.threads import set_wait_policy

        refuse_overwriting_inputs([args.output], [("--bounds", args.bounds)])
        replaced = set_wait_policy(args.omp_wait_policy)  # before torch loads OpenMP
        if replaced:
            print(
                f"note: OMP_WAIT_POLICY={replaced} in the environment replaced by "
                f"--omp-wait-policy {args.omp_wait_policy}",
                file=sys.stderr,
            )
        torch = import_torch()
        pair = pairing(torch, args)
        if args.dry_run:
            print("\n".join(plan_lines(torch, args, pair)))
            return [], 0
        return experiment(torch, args, pair)

    return finish(run)
