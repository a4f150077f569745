"""`--dry-run`: what CI's rehearsal of the GPU run calls. Every flag and value is checked
as a real run checks it (the same refusals, lines and exit codes), torch is imported (the
run needs it), and the plan is printed on stdout; but no device is opened (the device's
kind comes from --device), nothing big is allocated, and no file or folder is written."""

from __future__ import annotations

from common.formulas import MIB
from common.memory import at_once_bytes
from common.precisions import PRECISIONS, check_dtypes
from common.runner import DryRun
from common.timing import Plan, cpu_plan
from matmul import beside


def plan_lines(dry: DryRun) -> list[str]:
    """The plan of the run `dry.args` asks for, after the checks a run makes before
    measuring (the output's are the runner's)."""
    torch, args, on_gpu = dry.torch, dry.args, dry.on_gpu
    n, cpu = args.size, cpu_plan(args.iters)
    if args.experiment == "matmul":
        precisions = args.dtypes
        check_dtypes(torch, precisions, on_gpu)
        if on_gpu is False:
            comparison = "no (the run is on the CPU)"
        elif args.no_cpu:
            comparison = "no (--no-cpu)"
        else:
            when = "" if on_gpu else ", if the run is on a GPU"
            comparison = f"yes (fp32: warmup {cpu.warmup}, iters {cpu.iters}{when})"
    else:
        precisions = [PRECISIONS["fp32"]]
        comparison = f"yes (the experiment: warmup {cpu.warmup}, iters {cpu.iters})"
    # The most the matrices take on the device at once (on the CPU, with f32 copies): one
    # row's, or a row's beside fp32's in the pass that times them in turn.
    largest = at_once_bytes(on_gpu is False, n, precisions) / MIB
    lines = [
        f"dry run: pytorch {args.experiment}",
        f"torch: {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
        f"device: {dry.device_line}",
        f"size: {n} (up to {largest:.1f} MiB of matrices at once on the device)",
        f"iters: {args.iters}, warmup: {args.warmup}",
        f"precisions: {', '.join(p.name for p in precisions)}",
    ]
    if args.experiment == "matmul":
        lines.append(f"accuracy rows: {args.accuracy_rows}")
        lines.append(f"beside fp32: {beside_line(precisions, args.iters)}")
    lines += [
        f"cpu comparison: {comparison}",
        "host memory check: "
        + (
            "skipped (--skip-host-memory-check)"
            if args.skip_host_memory_check
            else "on (made when the run starts)"
        ),
        f"would write: {args.output}" if args.output else "would write: nothing (no --output)",
    ]
    return lines


def beside_line(precisions, iters: int) -> str:
    """Whether the rows are timed again in turn with fp32's (pytorch/matmul/beside.py), and
    with which plan."""
    others = [p.name for p in precisions if p.name != "fp32"]
    if PRECISIONS["fp32"] not in precisions:
        return "no (fp32 is not among the precisions)"
    if not others:
        return "no (fp32 is the only precision)"
    p = beside.plan(Plan(0, iters))
    return f"{', '.join(others)}, each in turn with fp32 (warmup {p.warmup}, iters {p.iters})"
