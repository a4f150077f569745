"""One row measured llama-bench's way, as src/bench/generate/measure.rs measures Candle's:
a pp test is pp_tokens tokens in one forward pass from an empty cache, a tg test
tg_tokens forward passes of one token from an empty cache, each next token picked
greedily from the last logits; each reports tokens / seconds, from the median of
--iters timed runs after --warmup (timing.Clock), the slowest and fastest sample's beside
it. Time to first token is the formatted prompt's pass and the pick of its first token.
Then the matmuls alone and (where the peer can time them) the op classes, the weight
bytes, generation against the bound a copy measured in the same run sets, and the
speedups over fp32. What a row runs is the peer's (a `Row`: the twin's model, or
transformers')."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from common.rows import baseline
from common.timing import rate_ms, timed
from generate import parts as gparts
from generate.formulas import copy_bytes, gb_per_s, pp_flops, pp_matmul_flops, tg_bound_tokens_per_s


@dataclass
class Row:
    """What one precision runs, as the peer runs it."""

    answer: Callable[[], list[int]]
    ttft: Callable[[], object]
    pp: Callable[[], object]
    tg: Callable[[], object]
    mats: object  # layers_count, project(l, i, x), logits(x)
    weight_bytes: int
    weight_bytes_per_token: int
    # The op classes (parts.token_parts on the row's matmuls at tg), or None where the
    # peer does not time them (transformers' model is its own code).
    parts: Callable[[object, object, object, dict], list[dict]] | None


def copy_ceiling(torch, clock, device, nbytes: int, plan) -> tuple[dict, float]:
    """A plain copy of `nbytes` (read, and written: 2 x nbytes moved) and its GB/s, as
    src/bench/memory ceiling(): on a GPU dst.copy_(src), a device-to-device memcpy
    (Candle's cuMemcpyDtoD); on the CPU numpy's copyto, one thread's memcpy (Candle's
    copy_from_slice). Both buffers are written first, so no page is mapped on the clock."""
    if device.type == "cuda":
        src = torch.ones(nbytes, dtype=torch.uint8, device=device)
        dst = torch.full((nbytes,), 2, dtype=torch.uint8, device=device)
        t = timed(clock, plan, lambda: dst.copy_(src))
    else:
        import numpy as np

        src, dst = np.ones(nbytes, dtype=np.uint8), np.full(nbytes, 2, dtype=np.uint8)
        t = timed(clock, plan, lambda: np.copyto(dst, src))
    return t, gb_per_s(2 * nbytes, rate_ms(t))


def largest_copy(rows_bytes_per_token: list[int]) -> int:
    return copy_bytes(max(rows_bytes_per_token, default=0))


def rates(t: dict, tokens: int) -> tuple[float, float, float]:
    """tokens/s of the median, slowest and fastest sample (measure.rs rates)."""
    ms = rate_ms(t)
    samples = t["samples_gpu_ms"] or t["samples_wall_ms"]
    return (
        tokens / (ms * 1e-3),
        tokens / (max([ms, *samples]) * 1e-3),
        tokens / (min([ms, *samples]) * 1e-3),
    )


def measure(
    torch, clock, device, cfg, name: str, row_of: Callable[[], Row], dtype, copy_gb: float
) -> dict:
    """The schema's GenerateMeasured for one precision. `row_of` loads the row's model
    (after the memory baseline is read); the peak is what the runs held above it."""
    base = baseline(torch, device, dtype)
    row = row_of()
    if base is not None:
        clock.sync()
        torch.cuda.reset_peak_memory_stats(device)
    plan, d = cfg.plan, cfg.dims
    print(f"generate {name}: the answer ({cfg.tg_tokens} tokens)", file=sys.stderr)
    ids = row.answer()
    print(f"generate {name}: ttft, pp{cfg.pp_tokens}, tg{cfg.tg_tokens}", file=sys.stderr)
    ttft = timed(clock, plan, row.ttft)
    pp = timed(clock, plan, row.pp)
    tg = timed(clock, plan, row.tg)
    peak = torch.cuda.max_memory_allocated(device) - base if base is not None else None
    shapes = gparts.Shapes(torch, d, dtype, device, cfg.seed, cfg.pp_tokens, cfg.tg_tokens)
    mm_pp = gparts.matmuls(clock, plan, row.mats, shapes, True)
    mm_tg = gparts.matmuls(clock, plan, row.mats, shapes, False)
    token_parts = row.parts(clock, plan, shapes, mm_tg) if row.parts else []
    parts_sum = sum(p["ms_per_token"] for p in token_parts) if row.parts else None

    pp_tps, pp_min, pp_max = rates(pp, cfg.pp_tokens)
    tg_tps, tg_min, tg_max = rates(tg, cfg.tg_tokens)
    flops = pp_flops(d, cfg.pp_tokens)
    pp_gflop = flops / (rate_ms(pp) * 1e-3) / 1e9
    mm_gflop = pp_matmul_flops(d, cfg.pp_tokens) / (rate_ms(mm_pp) * 1e-3) / 1e9
    bound = tg_bound_tokens_per_s(copy_gb, row.weight_bytes_per_token)
    pct = 100.0 * tg_tps / bound
    held = None
    if pct < 50.0 and parts_sum:
        held = gparts.held_back_by(token_parts, parts_sum, row.weight_bytes_per_token, copy_gb)
    return {
        "answer": {
            "token_ids": ids,
            "text": cfg.decode(ids),
            "differs_from_fp32_at": None,
            "stopped_at_eos": bool(ids) and ids[-1] in cfg.eos,
        },
        "ttft": ttft,
        "pp": pp,
        "pp_tokens_per_s": pp_tps,
        "pp_tokens_per_s_min": pp_min,
        "pp_tokens_per_s_max": pp_max,
        "tg": tg,
        "tg_tokens_per_s": tg_tps,
        "tg_tokens_per_s_min": tg_min,
        "tg_tokens_per_s_max": tg_max,
        "weight_bytes": row.weight_bytes,
        "weight_bytes_per_token": row.weight_bytes_per_token,
        "tg_bound_tokens_per_s": bound,
        "tg_pct_of_bound": pct,
        "pp_flops": flops,
        "pp_gflop_per_s": pp_gflop,
        "matmuls_pp": mm_pp,
        "matmuls_pp_gflop_per_s": mm_gflop,
        "pp_vs_matmuls_alone_pct": 100.0 * pp_gflop / mm_gflop,
        "matmuls_tg": mm_tg,
        "peak_bytes": peak,
        "parts": token_parts,
        "parts_sum_ms": parts_sum,
        "held_back_by": held,
        "vs_fp32": None,
    }


def fill_vs_fp32(rows: list[dict]) -> None:
    """Each row against fp32's (measure.rs fill_vs_fp32): speedups, and where its answer
    parts from fp32's."""
    fp32 = next((r["measured"] for r in rows if r["precision"] == "fp32" and r["measured"]), None)
    if fp32 is None:
        return
    for m in (r["measured"] for r in rows if r["measured"]):
        m["vs_fp32"] = {
            k: rate_ms(fp32[k]) / rate_ms(m[k]) for k in ("matmuls_pp", "matmuls_tg", "pp", "tg")
        }
        a, b = m["answer"]["token_ids"], fp32["answer"]["token_ids"]
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if at is None and len(a) != len(b):
            at = min(len(a), len(b))
        m["answer"]["differs_from_fp32_at"] = at
