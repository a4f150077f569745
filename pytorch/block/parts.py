"""Where a block's time goes, as src/bench/block/parts.rs: each op class timed alone at
the block's shapes (per block call: all its calls of that class, on random tensors of
the shapes the block's ops see), and PyTorch's single-kernel RMSNorm and softmax against
the same math from primitive ops. Every sample is timing.Clock's; timing.timed turns
the samples into the schema's Timed."""

from __future__ import annotations

import math

from block.formulas import rms_norm_bytes, softmax_bytes
from block.model import DECODE, PREFILL, has_fused_rms_norm, rms_norm_composed, rms_norm_fused, rope, softmax_composed, softmax_fused
from common.timing import rate_ms, timed  # noqa: F401 (run.py and table.py take them from here)

# Op classes in the schema's order (OpClass::ALL); the first two are the matmuls.
CLASSES = ["linear", "attention_matmul", "norm", "softmax", "rotary", "elementwise"]
MATMUL_CLASSES = {"linear", "attention_matmul"}


class Shapes:
    """Random tensors of the shapes the block's ops see in `phase`, on its device, one per
    role, as parts.rs's Shapes (the same-work rule, docs/block.md): within one timed part,
    two calls read one tensor only where the block's two calls do (Q, K and V project one
    normed x; gate and up one normed h1), so a part touches the bytes the block's calls
    would and no call finds its input warm from the call before it. Each is its own
    allocation (torch.randn), made before the part's clock starts, as Candle's are."""

    def __init__(self, torch, block, phase: str, dtype):
        s = block.shape
        b, heads, kv, d = s.batch, s.heads, s.kv_heads, s.head_dim
        t = block.input(phase).shape[1]
        c = s.seq + 1 if phase == DECODE else t
        h, m = s.hidden, s.mlp

        def rand(*shape):
            return torch.randn(*shape, device=block.device).to(dtype)

        # The layer's input, the normed x, the attention's output, h1, the normed h1, and
        # the two projection outputs the residuals add: (batch, tokens, hidden) each.
        self.x, self.xn, self.attn, self.h1 = (rand(b, t, h) for _ in range(4))
        self.hn, self.o, self.down = (rand(b, t, h) for _ in range(3))
        # The projections' outputs before they are laid out by head.
        self.q_proj = rand(b, t, h)
        self.k_proj, self.v_proj = rand(b, t, kv * d), rand(b, t, kv * d)
        # Down's input, gate's and up's outputs.
        self.act, self.gate, self.up = (rand(b, t, m) for _ in range(3))
        # By head: the queries, the new keys and values.
        self.q, self.k, self.v = rand(b, heads, t, d), rand(b, kv, t, d), rand(b, kv, t, d)
        # What attention reads: every key and value (in decode the preallocated cache, the
        # new token's written at seq) and the scores.
        self.keys, self.values = rand(b, kv, c, d), rand(b, kv, c, d)
        self.scores = rand(b, heads, t, c)


def time_parts(torch, clock, block, phase: str, aux, dtype, plan) -> list[dict]:
    """Each op class of one block call of `phase`, timed alone on Shapes' inputs (the
    same-work rule): the schema's BlockParts."""
    F = torch.nn.functional
    sh = Shapes(torch, block, phase, dtype)
    b, t, h = sh.x.shape
    s = block.shape
    heads, kv, g, d = s.heads, s.kv_heads, s.groups, s.head_dim
    eps, scale = block.eps, 1.0 / math.sqrt(d)
    lin = block.linears()
    decode, seq = phase == DECODE, s.seq
    norm = rms_norm_fused if has_fused_rms_norm(torch) else rms_norm_composed

    def linear():
        for w in lin[:3]:
            F.linear(sh.xn, w)
        F.linear(sh.attn, lin[3])
        F.linear(sh.hn, lin[4])
        F.linear(sh.hn, lin[5])
        return F.linear(sh.act, lin[6])

    def attention():
        # Grouped as the block does it: each K/V head against its group's queries.
        torch.matmul(sh.q.reshape(b, kv, g * t, d), sh.keys.transpose(-2, -1))
        probs = sh.scores.reshape(b, kv, g * t, sh.scores.shape[-1])
        return torch.matmul(probs, sh.values)

    def norms():
        norm(sh.x, block.attn_norm, eps)
        return norm(sh.h1, block.mlp_norm, eps)

    def rotary():
        rope(sh.q, aux.cos, aux.sin)
        return rope(sh.k, aux.cos, aux.sin)

    def elementwise():
        # The scale, the mask (prefill), SiLU and the gate's product, two residual adds,
        # three tensors laid out by head and one back, and (decode) the new key and value
        # written into the cache.
        scores = sh.scores * scale
        if aux.mask is not None:
            scores = scores + aux.mask
        F.silu(sh.gate) * sh.up
        sh.x + sh.o
        sh.h1 + sh.down
        for y, n in ((sh.q_proj, heads), (sh.k_proj, kv), (sh.v_proj, kv)):
            y.reshape(b, t, n, d).transpose(1, 2).contiguous()
        back = sh.q.transpose(1, 2).contiguous().reshape(b, t, h)
        if decode:
            sh.keys[:, :, seq : seq + 1].copy_(sh.k)
            sh.values[:, :, seq : seq + 1].copy_(sh.v)
        return back

    elementwise_calls = 1 + (0 if decode else 1) + 2 + 2 + 4 + (2 if decode else 0)
    work = [
        ("linear", 7, linear),
        ("attention_matmul", 2, attention),
        ("norm", 2, norms),
        ("softmax", 1, lambda: softmax_fused(sh.scores)),
        ("rotary", 2, rotary),
        ("elementwise", elementwise_calls, elementwise),
    ]
    return [{"class": c, "calls": n, **timed(clock, plan, f)} for c, n, f in work]


def fused_calls(torch) -> dict:
    """The fused rows PyTorch has: (fused call, composed call) per op. No rope: eager
    PyTorch has no rotary kernel, and a row holding the composed form against itself
    would say nothing. No rms_norm before torch 2.4 (no F.rms_norm)."""
    calls = {
        "softmax": (
            "torch.softmax",
            "torch ops: amax, sub, exp, sum, div (candle_nn::ops::softmax's)",
        )
    }
    if has_fused_rms_norm(torch):
        calls = {
            "rms_norm": (
                "torch.nn.functional.rms_norm",
                "torch ops: to f32, square, sum, div, add, sqrt, div, to dtype, mul "
                "(candle_nn::ops::rms_norm_slow's)",
            ),
            **calls,
        }
    return calls


def fused_rows(torch, clock, block, precision: str, dtype, plan) -> list[dict]:
    """The single-kernel forms against the composed ones at the prefill's shapes, in one
    precision: the schema's FusedRows, with the bytes each moves (blockformulas)."""
    sh = Shapes(torch, block, PREFILL, dtype)
    b, t, h = sh.x.shape
    elem = sh.x.element_size()
    eps, w = block.eps, block.attn_norm
    width = sh.scores.shape[-1]
    work = {
        "rms_norm": (
            lambda: rms_norm_fused(sh.x, w, eps),
            lambda: rms_norm_composed(sh.x, w, eps),
            rms_norm_bytes(b * t, h, elem),
        ),
        "softmax": (
            lambda: softmax_fused(sh.scores),
            lambda: softmax_composed(sh.scores),
            softmax_bytes(sh.scores.numel() // width, width, elem),
        ),
    }
    rows = []
    for op, (fused_call, composed_call) in fused_calls(torch).items():
        fused_fn, composed_fn, (fused_bytes, composed_bytes) = work[op]
        fused = timed(clock, plan, fused_fn)
        composed = timed(clock, plan, composed_fn)
        rows.append(
            {
                "op": op,
                "precision": precision,
                "fused_call": fused_call,
                "composed_call": composed_call,
                "fused": fused,
                "composed": composed,
                "fused_bytes": fused_bytes,
                "composed_bytes": composed_bytes,
                "composed_over_fused": rate_ms(composed) / rate_ms(fused),
            }
        )
    return rows
