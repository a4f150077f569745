"""The one runner of the PyTorch twins, as src/experiment/mod.rs main() is the Rust
programs'. A twin is what Experiment says it is: its own flags, the files it reads and
writes besides its result, what it settles before torch loads and opens once torch is
there, its dry run's plan, its config checked on the device, what must fit, and its run.
main() does the same sequence for every twin, so that no twin repeats it: parse the flags
(the shared ones, --device --output --skip-host-memory-check --dry-run, declared here
once), refuse an output that is one of the run's inputs, import torch, open what the twin
reads; on --dry-run print the plan (no device opened, nothing written) and stop; else
select the device, check the config and whether it fits, check that every output can be
written, run, wrap the body in the envelope, write it atomically (or to standard output
for `-`), show the tables, and end with the exit code the outcome calls for
(common.outcome, src/outcome.rs's twin)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from common.cli import Parser, import_torch
from common.devices import parse_device, select_device
from common.dryrun import device_plan
from common.environment import environment
from common.outcome import finish
from common.results import SCHEMA_VERSION, check_would_write, check_writable, command_line
from common.results import envelope, json_text, refuse_overwriting_inputs
from common.results import write_bytes_atomic, write_json_atomic

# What Experiment.open returns when the twin's work was not a measurement and is done
# there (generate's `reference`, which writes the tests' fixture): no plan, no device.
DONE = object()


@dataclass(frozen=True)
class DryRun:
    """What a dry run's plan is made from: the device's kind comes from --device, not from
    opening it (`on_gpu` None: not known before the run starts, as with auto)."""

    torch: object
    args: argparse.Namespace
    state: object  # what Experiment.open returned
    on_gpu: bool | None
    device_line: str  # which device the run would use, and why


@dataclass(frozen=True)
class Session:
    """What a run is given, as the Rust runner's Session: the device and what the runner
    knows of it (the result's `device` object)."""

    torch: object
    args: argparse.Namespace
    state: object  # what Experiment.open returned
    device: object
    info: dict

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"


@dataclass
class Report:
    """What a run measured: the body, the rows that failed of how many (the exit code's),
    how to show it, and what the runner writes with it."""

    body: dict
    failed: list[str]
    total: int
    # The tables, on the screen the runner picks, given the result's environment.
    show: Callable[[TextIO, dict], None]
    # Fields the result's environment has beside common.environment's.
    environment: dict = field(default_factory=dict)
    # Files written beside the result (block's --save-output): path -> bytes.
    side: dict = field(default_factory=dict)


class Experiment:
    """What one twin is; main() runs it. A twin overrides what it has: the defaults are a
    twin that reads no file and writes nothing but its result."""

    PROG = ""  # the usage line's program, "pytorch/NAME"
    ABOUT = ""  # what the program does, for --help
    KIND = ""  # the body's name: the envelope's `experiment` (unless kind() says another)
    SCHEMA_VERSION = SCHEMA_VERSION  # the schema version the body is written to
    # Whether `--output -` is standard output. matmul's twin predates that: there `-` is
    # a file, as it has always been, since scripts call it with exact flags.
    STDOUT = True
    DRY_RUN_READS = ""  # what --dry-run reads beside the flags, for --help

    def add_flags(self, p: argparse.ArgumentParser) -> None:
        """The twin's own flags, beside the shared ones."""

    def check_args(self, p: Parser, args: argparse.Namespace) -> None:
        """The flags checked together once parsed, and what they settle: p.error refuses
        the command line (exit 2), a Failure is the run's (exit 1, a file unreadable)."""

    def kind(self, args) -> str:
        return self.KIND

    def schema_version(self, args) -> str:
        """The schema version of the body kind(args) names."""
        return self.SCHEMA_VERSION

    def inputs(self, args) -> list[tuple[str, Path | None]]:
        """The files the run reads, each with what it is to the run: no output may be one."""
        return []

    def side_files(self, args) -> list[Path | None]:
        """Files the run writes besides its result: checked with it before any work."""
        return []

    def before_torch(self, args) -> None:
        """What must be settled before torch loads (the environment it reads at import)."""

    def open(self, torch, args):
        """What the run reads before a device opens (the dry run's too): its state, or DONE."""
        return None

    def plan_lines(self, dry: DryRun) -> list[str]:
        """The plan --dry-run prints, after the checks a run makes before measuring."""
        raise NotImplementedError

    def config(self, session: Session):
        """The checked plan the run follows on the device that opened."""
        raise NotImplementedError

    def fits(self, session: Session, cfg, check_host: bool) -> None:
        """Refuses what cannot fit before anything big is allocated (`check_host` is
        False under --skip-host-memory-check)."""

    def run(self, session: Session, cfg) -> Report:
        """Measures; a row that fails is kept in the body with its error."""
        raise NotImplementedError


def main(twin: Experiment, argv: list[str] | None = None) -> int:
    """The program of `twin`: the whole sequence (module docs), and its exit code. The
    flags are parsed inside finish(), so a Failure found while they are checked (an
    unreadable file) is one line and exit 1; argparse's refusals exit 2 through it."""
    return finish(lambda: _run(twin, parse_args(twin, argv)))


def parse_args(twin: Experiment, argv: list[str] | None = None) -> argparse.Namespace:
    """The twin's command line, parsed and checked, importing no torch (kernels sets
    OpenMP's environment from its flags before torch loads). A Failure of check_args
    propagates: main() calls this inside finish(), which makes it one line and exit 1."""
    p = Parser(prog=twin.PROG, allow_abbrev=False, description=twin.ABOUT)
    p.add_argument(
        "--device",
        type=parse_device,
        default="auto",
        metavar="DEVICE",
        help="auto (CUDA GPU 0 if torch has CUDA and a GPU answers, else the CPU), "
        "cpu, cuda, or cuda:N",
    )
    twin.add_flags(p)
    add_shared_flags(p, twin)
    args = p.parse_args(argv)
    twin.check_args(p, args)
    return args


def add_shared_flags(p: argparse.ArgumentParser, twin: Experiment) -> None:
    """--output, --skip-host-memory-check and --dry-run, as src/cli.rs's Common."""
    output = "write the JSON result to FILE (parent folders are created)"
    if twin.STDOUT:
        output += ", or to standard output for - (the tables then go to stderr)"
    p.add_argument("--output", type=Path, metavar="FILE", help=output)
    p.add_argument(
        "--skip-host-memory-check",
        action="store_true",
        help="do not check host memory before allocating. For machines whose memory grows "
        "on demand, where what the kernel reports at start understates what a run can "
        "have; a size that does not fit then aborts the process",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help=f"check every flag{twin.DRY_RUN_READS} as a run would, import torch, print "
        "the plan and exit: no device is opened (its kind comes from --device), nothing "
        "big is allocated, no file is written",
    )


def to_stdout(twin: Experiment, args) -> bool:
    """Whether the JSON goes to standard output (`--output -`, where the twin has it)."""
    return twin.STDOUT and args.output is not None and str(args.output) == "-"


def written(twin: Experiment, args) -> list[Path]:
    """The files a run writes: its result (unless it goes to standard output) and its
    side files."""
    result = [] if to_stdout(twin, args) else [args.output]
    return [p for p in [*result, *twin.side_files(args)] if p is not None]


def _run(twin: Experiment, args) -> tuple[list[str], int]:
    # No output may be an input, checked before any work, the dry run's too.
    refuse_overwriting_inputs([args.output, *twin.side_files(args)], twin.inputs(args))
    twin.before_torch(args)
    torch = import_torch()
    state = twin.open(torch, args)
    if state is DONE:
        return [], 0
    if args.dry_run:
        return _dry_run(twin, torch, args, state)
    return _measure(twin, torch, args, state)


def _dry_run(twin: Experiment, torch, args, state) -> tuple[list[str], int]:
    on_gpu, device_line = device_plan(torch, args.device)
    lines = twin.plan_lines(DryRun(torch, args, state, on_gpu, device_line))
    # What a run's check_writable refuses, without its side effects (no folder made).
    for path in written(twin, args):
        check_would_write(path)
    print("\n".join(lines))
    return [], 0


def _measure(twin: Experiment, torch, args, state) -> tuple[list[str], int]:
    device, info = select_device(torch, args.device)
    session = Session(torch, args, state, device, info)
    cfg = twin.config(session)
    twin.fits(session, cfg, not args.skip_host_memory_check)
    # Before a long run: a file that cannot be written fails now, not after it.
    for path in written(twin, args):
        check_writable(path)
    report = twin.run(session, cfg)
    env = environment(torch) | report.environment
    save(twin, session, report, env)
    report.show(sys.stderr if to_stdout(twin, args) else sys.stdout, env)
    return report.failed, report.total


def save(twin: Experiment, session: Session, report: Report, env: dict) -> None:
    """The result in its envelope, to --output (whole or untouched) or standard output,
    then the side files, each said on stderr."""
    args = session.args
    if args.output is not None:
        kind = twin.kind(args)
        result = envelope(
            kind, command_line(), env, session.info, report.body, twin.schema_version(args)
        )
        if to_stdout(twin, args):
            sys.stdout.write(json_text(result))
            sys.stdout.flush()
        else:
            write_json_atomic(args.output, result)
            print(f"wrote {args.output}", file=sys.stderr)
    for path, data in report.side.items():
        write_bytes_atomic(path, data)
        print(f"wrote {path}", file=sys.stderr)
