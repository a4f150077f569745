"""The decoder block, as src/model/layer.rs computes it, in plain eager PyTorch
(torch.nn.functional and tensor ops): RMSNorm, the Q/K/V/O projections (F.linear over
(out, in) weights), rotary embedding (non-interleaved, as Llama's), causal attention
(Q K^T / sqrt(d), softmax, times V: explicit matmuls, not scaled_dot_product_attention,
so the op classes are Candle's), a residual add, RMSNorm, a SwiGLU MLP
(down(silu(gate(x)) * up(x))) and a residual add. A Block is the weights file's f32
tensors in one dtype on one device.

Attention is grouped-query (GQA; Ainslie et al. 2023), as model.rs's: kv_heads key/value
heads, query head i reading key/value head i // groups (Llama's repeat_kv order); the
queries of a group are one taller matrix against their one K/V head (a reshape, no copy),
so K and V are never repeated. Decode writes its token's key and value into a
preallocated KvCache (a slice copy) and reads the cache where it lies, as model.rs's
KvCache does, instead of concatenating (which copies the whole cache every step).

Two kernel sets, as model.rs's Kernels. FUSED is what the block is timed with: PyTorch's
single-kernel RMSNorm (F.rms_norm, torch >= 2.4) and softmax (torch.softmax), the
counterparts of candle_nn::ops::rms_norm and softmax_last_dim. COMPOSED is the same math
from primitive ops, op for op as candle's rms_norm_slow and softmax: the f64 reference.
Rotary embedding is composed in both: eager PyTorch has no rope kernel (as Llama's
PyTorch code does it: x * cos + rotate_half(x) * sin, the tables made once per call)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from block.weights import RMS_EPS, ROPE_THETA, BlockShape

FUSED, COMPOSED = "fused", "composed"
PREFILL, DECODE = "prefill", "decode"


def has_fused_rms_norm(torch) -> bool:
    return hasattr(torch.nn.functional, "rms_norm")


def rms_norm_composed(x, w, eps: float):
    """candle's rms_norm_slow op for op: in f32 for f16 and bf16, square, sum over the row,
    divide by the width, add eps, square root, divide the row, cast back, then scale."""
    import torch

    inner = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xf = x.to(inner)
    norm = xf.square().sum(-1, keepdim=True) / x.shape[-1]
    return (xf / (norm + eps).sqrt()).to(x.dtype) * w


def rms_norm_fused(x, w, eps: float):
    """PyTorch's RMSNorm (nn.RMSNorm's function). For f16 and bf16 it also computes in
    f32, but scales before casting back: one rounding fewer than the composed form."""
    import torch

    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


def softmax_composed(x):
    """candle_nn::ops::softmax op for op: row max, subtract, exp, row sum, divide."""
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_fused(x):
    import torch

    return torch.softmax(x, -1)


def rotate_half(x):
    """(-x2, x1) from x = (x1, x2), split at the middle of the last dim (non-interleaved)."""
    import torch

    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


def rope(x, cos, sin):
    """x * cos + rotate_half(x) * sin with full-width (positions, d) tables:
    (x1 cos - x2 sin, x2 cos + x1 sin), as candle's rope_slow and rope."""
    return x * cos + rotate_half(x) * sin


class KvCache:
    """A preallocated key/value cache, as model.rs's KvCache: two (batch, kv_heads,
    capacity, head_dim) buffers and how many positions they hold. append writes new keys
    and values in place and returns views of everything held (nothing cached is copied);
    truncate forgets positions from n on (a benchmark rewinds to time one step again)."""

    def __init__(self, torch, batch, kv_heads, capacity, head_dim, dtype, device):
        shape = (batch, kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.len = 0

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def append(self, k, v):
        t = k.shape[2]
        if self.len + t > self.capacity:
            raise ValueError(
                f"the KV cache holds {self.capacity} positions: {t} more do not fit after "
                f"{self.len}"
            )
        self.k[:, :, self.len : self.len + t].copy_(k)
        self.v[:, :, self.len : self.len + t].copy_(v)
        self.len += t
        return self.k[:, :, : self.len], self.v[:, :, : self.len]

    def truncate(self, n: int) -> None:
        self.len = min(self.len, n)


def attention(torch, q, keys, values, mask, kv_heads: int, softmax):
    """softmax(Q K^T / sqrt(d) + mask) V for q (batch, heads, t, d) against keys and values
    (batch, kv_heads, keys, d), grouped as model.rs's attention(): the groups query heads of
    one key/value head as one (groups x t) x d matrix. Returns (batch, heads, t, d)."""
    b, heads, t, d = q.shape
    n, g = keys.shape[2], heads // kv_heads
    grouped = q.reshape(b, kv_heads, g * t, d)
    scores = torch.matmul(grouped, keys.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    scores = scores.reshape(b, heads, t, n)
    if mask is not None:
        scores = scores + mask
    probs = softmax(scores).reshape(b, kv_heads, g * t, n)
    return torch.matmul(probs, values).reshape(b, heads, t, d)


@dataclass
class Aux:
    """What a call needs beyond the weights, made once, off the clock: full-width cos and
    sin tables for the call's positions and, in prefill, the causal mask."""

    cos: object
    sin: object
    mask: object | None


class Block:
    def __init__(self, torch, host: dict, shape: BlockShape, dtype, device):
        self.torch, self.shape, self.dtype, self.device = torch, shape, dtype, device
        # model.rs hands candle-nn the eps as an f32 (1e-5 rounded to 9.99999974737875e-06),
        # which rms_norm_slow widens back to f64: the same number here.
        self.eps = torch.tensor(RMS_EPS, dtype=torch.float32).item()
        self.theta = ROPE_THETA
        for name, t in host.items():
            setattr(self, name, t.to(device=device, dtype=dtype))

    def linears(self) -> list:
        """The seven projections' weights in order: Q, K, V, O, gate, up, down."""
        return [self.wq, self.wk, self.wv, self.wo, self.w_gate, self.w_up, self.w_down]

    def input(self, phase: str):
        return self.x_prefill if phase == PREFILL else self.x_decode

    def decode_cache(self) -> KvCache:
        """The decode's cache: the file's seq positions copied into a buffer of seq + 1, so
        a step writes its token in place and reads the whole buffer as it lies (made off
        the clock, as model.rs's Block::decode_cache)."""
        s = self.shape
        cache = KvCache(
            self.torch, s.batch, s.kv_heads, s.seq + 1, s.head_dim, self.dtype, self.device
        )
        cache.append(self.k_cache, self.v_cache)
        return cache

    def rope_tables(self, start: int, length: int, dtype):
        """Full-width cos and sin (length x head_dim) for positions start..start+length,
        angles pos x theta^(-2i/d) for i < d/2 (RoFormer; Llama's base 10000), computed in
        f64 with the C library as model.rs does, each half repeated, then cast."""
        d = self.shape.head_dim
        inv = [self.theta ** (-2.0 * i / d) for i in range(d // 2)]
        angles = [pos * f for pos in range(start, start + length) for f in inv]

        def table(fn):
            half = self.torch.tensor([fn(a) for a in angles], dtype=self.torch.float64)
            half = half.reshape(length, d // 2)
            return self.torch.cat([half, half], -1).to(dtype=dtype, device=self.device)

        return table(math.cos), table(math.sin)

    def causal_mask(self, t: int, dtype):
        """0 on and below the diagonal, -inf above (t queries over t keys)."""
        torch = self.torch
        mask = torch.full((t, t), -math.inf, dtype=torch.float32).triu(1)
        return mask.to(dtype=dtype, device=self.device)

    def aux(self, phase: str, dtype, tokens: int | None = None) -> Aux:
        """Prefill: positions 0..t-1 and the mask; decode: position `seq`, no mask."""
        t = self.input(phase).shape[1] if tokens is None else tokens
        start = 0 if phase == PREFILL else self.shape.seq
        cos, sin = self.rope_tables(start, t, dtype)
        return Aux(cos, sin, self.causal_mask(t, dtype) if phase == PREFILL else None)

    def forward(self, x, phase: str, aux: Aux, kernels: str = FUSED, cache=None):
        """One block call on x (batch, tokens, hidden). Prefill attends causally within x.
        Decode rewinds `cache` (a KvCache; default a fresh decode_cache()) to the file's seq
        positions, writes x's key and value after them and attends to all seq + 1; the
        cached keys are used as stored, already rotated at their positions."""
        F = self.torch.nn.functional
        b, t, h = x.shape
        heads, kv_heads, d = self.shape.heads, self.shape.kv_heads, self.shape.head_dim
        fused = kernels == FUSED
        norm = rms_norm_fused if fused and has_fused_rms_norm(self.torch) else rms_norm_composed
        softmax = softmax_fused if fused else softmax_composed

        def heads_of(y, n):
            return y.reshape(b, t, n, d).transpose(1, 2).contiguous()

        xn = norm(x, self.attn_norm, self.eps)
        q = rope(heads_of(F.linear(xn, self.wq), heads), aux.cos, aux.sin)
        keys = rope(heads_of(F.linear(xn, self.wk), kv_heads), aux.cos, aux.sin)
        values = heads_of(F.linear(xn, self.wv), kv_heads)
        if phase == DECODE:
            cache = cache if cache is not None else self.decode_cache()
            cache.truncate(self.shape.seq)
            keys, values = cache.append(keys, values)
        attn = attention(self.torch, q, keys, values, aux.mask, kv_heads, softmax)
        attn = attn.transpose(1, 2).contiguous().reshape(b, t, h)
        h1 = x + F.linear(attn, self.wo)
        hn = norm(h1, self.mlp_norm, self.eps)
        act = F.silu(F.linear(hn, self.w_gate)) * F.linear(hn, self.w_up)
        return h1 + F.linear(act, self.w_down)


def reference_outputs(torch, host: dict, shape: BlockShape, accuracy_seq: int):
    """The f64 run on the CPU with the composed kernels, as mod.rs references(): the first
    `accuracy_seq` prefill tokens (a causal block's first tokens depend on nothing after
    them, so the block over those alone gives them exactly) and the decode token."""
    block = Block(torch, host, shape, torch.float64, torch.device("cpu"))
    k = accuracy_seq
    prefill = block.forward(
        block.x_prefill[:, :k], PREFILL, block.aux(PREFILL, torch.float64, k), COMPOSED
    )
    decode = block.forward(block.x_decode, DECODE, block.aux(DECODE, torch.float64), COMPOSED)
    return {PREFILL: prefill, DECODE: decode}
