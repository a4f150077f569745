"""`--dry-run` of pytorch/generate, as Candle's: every flag checked as a run checks it (the
same refusals, lines and exit codes), the model file opened and checked (its tensors are
not dequantized) and the prompt formatted, torch imported, the plan printed on stdout; no
device is opened, nothing big is allocated, no file or folder is written."""

from __future__ import annotations

from common.precisions import check_dtypes
from common.runner import DryRun
from generate.setup import config


def plan_lines(dry: DryRun) -> list[str]:
    """The plan of the run `dry.args` asks for (the output's checks are the runner's);
    `dry.state` is the model opened (experiment.Opened)."""
    torch, args, on_gpu = dry.torch, dry.args, dry.on_gpu
    model = dry.state.model
    cfg = config(args, model, dry.state.tok, on_gpu)
    check_dtypes(torch, cfg.precisions, on_gpu)
    d = cfg.dims
    known = "" if on_gpu is not None else " (the CPU's; a GPU's when the run starts on one)"
    if args.output is None:
        target = "nothing (no --output)"
    else:
        target = "standard output" if str(args.output) == "-" else str(args.output)
    return [
        f"dry run: pytorch generate {args.what}",
        f"torch: {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
        f"device: {dry.device_line}",
        f"model: {model.path}: {model.info['name']}, {d.layers} layers, hidden {d.hidden}, "
        f"{d.heads} heads ({d.kv_heads} key/value), MLP {d.mlp}, vocabulary {d.vocab}, "
        f"context {d.context}",
        f"prompt: {len(cfg.prompt_ids)} tokens with the chat template",
        f"precisions: {', '.join(p.name for p in cfg.precisions)}{known}",
        f"pp_tokens: {cfg.pp_tokens}, tg_tokens: {cfg.tg_tokens}, iters: {cfg.plan.iters}, "
        f"warmup: {cfg.plan.warmup}{known}",
        "host memory check: "
        + (
            "skipped (--skip-host-memory-check)"
            if args.skip_host_memory_check
            else "on (made when the run starts)"
        ),
        f"would write: {target}",
    ]
