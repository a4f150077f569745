"""`--dry-run` of pytorch/kernels, as the other twins': every flag checked as a run checks
it (the same refusals, lines and exit codes), --bounds read and its rows checked (its
machine too where the device is known without opening it: the CPU), torch imported and
its threads set, and the plan printed on stdout; no device is opened, nothing big is
allocated, no file or folder is written (common.runner checks --output as a run would)."""

from __future__ import annotations

from common.environment import cpu_model
from common.runner import DryRun
from kernels.run import last_level_cache
from kernels.setup import checked_ceilings, config, given_by, needs


def plan_lines(dry: DryRun) -> list[str]:
    """The plan of the run `dry.args` asks for; `dry.state` is the Pairing."""
    args, pair, on_gpu = dry.args, dry.state, dry.on_gpu
    # No device is opened: a GPU's dram case is sized as for an unknown cache (256 MiB).
    cfg = config(args, on_gpu, given_by(pair), None if on_gpu else last_level_cache())
    # The machine is checked where the device is known without opening it: the CPU.
    checked_ceilings(pair, cfg, {"kind": "cpu", "name": cpu_model()} if on_gpu is False else None)
    against = f"Candle's ladder from {pair.bounds}" if pair.bounds else "a pytorch copy"
    return [
        f"dry run: kernels on {dry.device_line}; nothing computed",
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
