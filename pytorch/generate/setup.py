"""What a generate peer's run asks for, checked, as src/bench/lm/setup.rs: the
device's default counts and token numbers (experiments/generate.rs's), the prompt formatted
with the file's chat template and its length checked against the context, and what must
fit (needs). Its own module so that the command line (generate.cli), the dry run and the
run import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from common.cli import plan_of
from common.errors import Failure
from common.precisions import PRECISIONS
from common.timing import Plan
from generate import hf

# experiments/generate.rs's defaults: 10 timed and 2 warm-up runs on a GPU, 3 and 1 on
# the CPU; 128 new tokens and pp512 on a GPU (llama-bench's tg128, pp512), 32 and 64 on
# the CPU.
GPU_PLAN, CPU_PLAN = Plan(warmup=2, iters=10), Plan(warmup=1, iters=3)
GPU_TOKENS, CPU_TOKENS = (128, 512), (32, 64)


@dataclass
class Config:
    """What a run asks for, checked (setup.rs Config)."""

    dims: object
    plan: Plan
    pp_tokens: int
    tg_tokens: int
    seed: int
    precisions: list
    prompt: dict
    prompt_ids: list[int]
    eos: list[int]
    start: int
    decode: Callable[[list[int]], str]


def config(args, model, tok, on_gpu: bool | None) -> Config:
    """The settings for a device kind (None: not known yet, the CPU's stand in), the
    prompt formatted and its length checked against the context as setup.rs checks it."""
    gpu = on_gpu is True
    default = GPU_PLAN if gpu else CPU_PLAN
    tg, pp = (args.tokens, args.pp_tokens)
    tg = tg or (GPU_TOKENS if gpu else CPU_TOKENS)[0]
    pp = pp or (GPU_TOKENS if gpu else CPU_TOKENS)[1]
    names = ["fp32", "tf32", "fp16", "bf16"] if gpu else ["fp32", "fp16", "bf16"]
    formatted, ids = hf.chat_ids(tok, args.prompt)
    d = model.dims
    if not ids:
        raise Failure("the prompt gives no tokens")
    if len(ids) + tg > d.context:
        raise Failure(
            f"the prompt is {len(ids)} tokens and --tokens {tg}: {len(ids) + tg} positions, "
            f"longer than the model's context of {d.context}"
        )
    for flag, n in [("--pp-tokens", pp), ("--tokens", tg)]:
        if n > d.context:
            raise Failure(f"{flag} {n}: longer than the model's context of {d.context}")
    return Config(
        dims=d,
        plan=plan_of(args, default),
        pp_tokens=pp,
        tg_tokens=tg,
        seed=args.seed,
        precisions=args.dtypes or [PRECISIONS[n] for n in names],
        prompt={"user": args.prompt, "formatted": formatted, "token_ids": ids},
        prompt_ids=ids,
        eos=model.eos,
        start=model.bos if model.bos is not None else ids[0],
        decode=lambda t: tok.decode(
            t, skip_special_tokens=False, clean_up_tokenization_spaces=False
        ),
    )


def needs(d, cfg: Config) -> tuple[int, int]:
    """(host, device) bytes, as generate's needs(): on the host the file's weights in f32
    (the twin's dequantized copy; transformers' state dict while it loads), on the device
    the widest row's weights, its cache and a pass's attention scores."""
    widest = max(p.element_bytes for p in cfg.precisions)
    positions = max(cfg.pp_tokens, len(cfg.prompt_ids) + cfg.tg_tokens)
    cache = 2 * d.layers * positions * d.kv_width * 4
    scores = d.heads * positions * positions * 4 * 3
    return d.params() * 4, d.params() * widest + cache + scores
