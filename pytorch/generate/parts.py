"""Where a generated token's time goes, and the matmuls alone, as
src/bench/generate/parts.rs: the matmuls are the row's own weights, every layer's in turn
(so the weights stream from memory as in a token), at one token (tg's shapes) and at
pp_tokens (pp's: the roofline pp is held against); the other classes are timed alone at
one layer's shapes with the calls the twin's layer makes (the context at tg's middle),
counted once per layer; sampling and the embedding row once per token. Every input is
random (never zeros) and made before the clock starts."""

from __future__ import annotations

import math

from common.timing import rate_ms, timed

# The schema's TokenOpClass, in its order.
CLASSES = ["matmuls", "attention", "norms", "rotary", "elementwise", "sampling"]
CLASS_NAMES = {"elementwise": "element-wise"}


class Shapes:
    """parts.rs Shapes: random tensors at the model's shapes, on its device, in `dtype`."""

    def __init__(self, torch, d, dtype, device, seed: int, pp: int, tg: int):
        g = torch.Generator().manual_seed(seed)

        def rand(*shape):
            return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

        h, m, hd = d.hidden, d.mlp, d.head_dim
        context = max(tg // 2, 1)
        self.x, self.m = rand(1, 1, h), rand(1, 1, m)
        self.x_pp, self.m_pp = rand(1, pp, h), rand(1, pp, m)
        self.q, self.k = rand(1, d.heads, 1, hd), rand(1, d.kv_heads, 1, hd)
        self.keys, self.values = rand(1, d.kv_heads, context, hd), rand(1, d.kv_heads, context, hd)
        # The twin rotates halves with full-width tables (x * cos + rotate_half(x) * sin).
        self.cos, self.sin = rand(1, hd), rand(1, hd)
        self.norm = rand(h)
        self.logits = rand(1, d.vocab)
        self.embedding = rand(min(d.vocab, 4096), h)


def matmuls(clock, plan, mats, s: Shapes, pp: bool) -> dict:
    """Every layer's seven projections and the head (at the last token only, as the model
    runs it), at one token or at pp's tokens. `mats` has layers, project(l, i, x) and
    logits(x)."""
    x, m = (s.x_pp, s.m_pp) if pp else (s.x, s.m)

    def work():
        for layer in range(mats.layers_count):
            for which in range(6):
                mats.project(layer, which, x)
            mats.project(layer, 6, m)
        return mats.logits(s.x)

    return timed(clock, plan, work)


def token_parts(torch, clock, plan, twin, d, s: Shapes, matmuls_tg: dict) -> list[dict]:
    """Each class's time per generated token (parts.rs token_parts): the schema's
    TokenPart list, the matmuls from `matmuls_tg`."""
    layers, groups = d.layers, d.heads // d.kv_heads
    scale = 1.0 / math.sqrt(d.head_dim)
    parts = [
        {
            "class": "matmuls",
            "calls": 7 * layers + 1,
            "ms_per_token": rate_ms(matmuls_tg),
            "timed": matmuls_tg,
        }
    ]

    def push(cls, calls, per_token, t):
        parts.append(
            {"class": cls, "calls": calls, "ms_per_token": rate_ms(t) * per_token, "timed": t}
        )

    def attention():
        k = s.keys.repeat_interleave(groups, 1)
        v = s.values.repeat_interleave(groups, 1)
        return torch.softmax(s.q @ k.transpose(-1, -2) * scale, -1) @ v

    push("attention", 4 * layers, layers, timed(clock, plan, attention))

    def norms():
        twin.rms_norm(s.x, s.norm)
        return twin.rms_norm(s.x, s.norm)

    push("norms", 2 * layers + 1, layers, timed(clock, plan, norms))

    def rotary():
        _ = s.q * s.cos + twin.rotate_half(s.q) * s.sin
        return s.k * s.cos + twin.rotate_half(s.k) * s.sin

    push("rotary", 2 * layers, layers, timed(clock, plan, rotary))
    h, hd, kvw = d.hidden, d.head_dim, d.kv_width

    def elementwise():
        # Two residual adds, SiLU and the gate's product, Q/K/V laid out by head and the
        # output back, the cache's two writes.
        _ = s.x + s.x
        _ = s.x + s.x
        _ = torch.nn.functional.silu(s.m) * s.m
        qh = s.x.reshape(1, 1, d.heads, hd).transpose(1, 2).contiguous()
        kv = s.x[..., :kvw]
        for _ in range(2):
            kv.reshape(1, 1, d.kv_heads, hd).transpose(1, 2).contiguous()
        torch.cat([s.keys, s.k], 2)
        torch.cat([s.values, s.k], 2)
        return qh.transpose(1, 2).reshape(1, 1, h)

    push("elementwise", 10 * layers + 1, layers, timed(clock, plan, elementwise))
    ids = torch.tensor([7], device=s.x.device)
    row = timed(clock, plan, lambda: s.embedding.index_select(0, ids))
    parts[-1]["ms_per_token"] += rate_ms(row)
    t = timed(clock, plan, lambda: int(s.logits.argmax(-1)[0]))
    parts.append({"class": "sampling", "calls": 1, "ms_per_token": rate_ms(t), "timed": t})
    return parts


def held_back_by(
    parts: list[dict], sum_ms: float, bytes_per_token: int, copy_gb_per_s: float
) -> str:
    """parts.rs held_back_by: the matmuls, when their own time is over twice what reading
    the weights at copy speed takes, else the class with the most time besides them."""

    def share(p):
        return 100.0 * p["ms_per_token"] / sum_ms

    bound_ms = bytes_per_token / (copy_gb_per_s * 1e9) * 1e3
    mm = next((p for p in parts if p["class"] == "matmuls"), None)
    if mm is not None and mm["ms_per_token"] > 2.0 * bound_ms:
        return (
            f"matmuls ({share(mm):.0f}% of the token): they read the weights at "
            f"{100.0 * bound_ms / mm['ms_per_token']:.0f}% of copy speed"
        )
    others = [p for p in parts if p["class"] != "matmuls"]
    if not others:
        return "nothing timed"
    p = max(others, key=lambda p: p["ms_per_token"])
    return f"{CLASS_NAMES.get(p['class'], p['class'])} ({share(p):.0f}% of the token)"
