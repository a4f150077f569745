"""`--dry-run`: what CI's rehearsal of the GPU run calls. Every flag and value is checked
as a real run checks it (the same refusals, lines and exit codes), torch is imported (the
run needs it), and the plan is printed on stdout; but no device is opened (the device's
kind comes from --device), nothing big is allocated, and no file or folder is written."""

from __future__ import annotations

from common.formulas import MIB
from common.memory import device_bytes
from common.precisions import PRECISIONS, check_dtypes
from common.runner import DryRun
from common.timing import cpu_plan


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
    # The most the matrices of one row take on the device (on the CPU, with f32 copies).
    largest = max(device_bytes(on_gpu is False, p, n) for p in precisions) / MIB
    lines = [
        f"dry run: pytorch {args.experiment}",
        f"torch: {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
        f"device: {dry.device_line}",
        f"size: {n} (up to {largest:.1f} MiB of matrices per row on the device)",
        f"iters: {args.iters}, warmup: {args.warmup}",
        f"precisions: {', '.join(p.name for p in precisions)}",
    ]
    if args.experiment == "matmul":
        lines.append(f"accuracy rows: {args.accuracy_rows}")
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
