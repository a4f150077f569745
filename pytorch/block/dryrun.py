"""`--dry-run` of pytorch/block, as dryrun.py is matmul.py's: every flag is checked as
a run checks it (the same refusals, lines and exit codes), the weights file's header is
read and checked (its tensors are not; a file not there yet is planned as such, since a
rehearsal plans the run before Candle writes it), torch is imported, and the plan is
printed on stdout (common.runner checks the outputs as check_would_write does); no device
is opened (its kind comes from --device), nothing big is allocated, and no file or folder
is written."""

from __future__ import annotations

from block.run import needs
from common.formulas import MIB
from common.precisions import check_dtypes
from common.runner import DryRun


def plan_lines(dry: DryRun, config) -> list[str]:
    """The plan of the run `dry.args` asks for, after the checks a run makes before
    measuring (the outputs' are the runner's). `config` is block.cli.config (the settings
    for a device kind)."""
    torch, args, on_gpu = dry.torch, dry.args, dry.on_gpu
    cfg = config(args, on_gpu)
    check_dtypes(torch, cfg.precisions, on_gpu)
    s = args.shape
    if s is None:
        weights = [
            f"weights: {args.weights}: not there yet (a run reads the block's shape from it; "
            "Candle's block --save-weights writes it)"
        ]
    else:
        host, on_device = needs(s)
        weights = [
            f"weights: {args.weights} (header read, tensors not): batch {s.batch}, seq "
            f"{s.seq}, hidden {s.hidden}, {s.heads} heads of {s.head_dim} ({s.kv_heads} "
            f"key/value), MLP {s.mlp}",
            f"memory: {on_device / MIB:.1f} MiB on the device per precision, "
            f"{host / MIB:.1f} MiB on the host",
        ]
    if on_gpu is None:
        gpu = config(args, True).plan
        counts = (
            f"iters: {gpu.iters}, warmup: {gpu.warmup} on a GPU; {cfg.plan.iters} and "
            f"{cfg.plan.warmup} on the CPU (the device is known when the run starts)"
        )
    else:
        counts = f"iters: {cfg.plan.iters}, warmup: {cfg.plan.warmup}"
    if args.output is None:
        target = "nothing (no --output)"
    else:
        target = "standard output" if str(args.output) == "-" else str(args.output)
    return [
        "dry run: pytorch block",
        f"torch: {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
        f"device: {dry.device_line}",
        *weights,
        counts,
        f"precisions: {', '.join(p.name for p in cfg.precisions)}",
        f"phases: {', '.join(cfg.phases)}",
        f"accuracy tokens: {cfg.accuracy_seq} of the prefill (at most seq), and the decode "
        "token",
        f"seed: {cfg.seed}",
        "host memory check: "
        + (
            "skipped (--skip-host-memory-check)"
            if args.skip_host_memory_check
            else "on (made when the run starts)"
        ),
        f"save output: {args.save_output}" if args.save_output else "save output: no",
        f"would write: {target}",
    ]
