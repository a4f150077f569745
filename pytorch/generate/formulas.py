"""The formulas behind generate's rates, as src/model/cost.rs writes them (with their
sources there): a Llama's sizes, FLOPs at 2 per multiply-add, the weight bytes one
generated token reads, and generation's bound, a copy's bandwidth over those bytes; and
scaling's: FLOPs after a depth, the KV cache's bytes (a Llama has no sliding window, so
every layer sees every key)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlamaDims:
    """decoder.rs LlamaDims: layers of attention with grouped-query heads and a SwiGLU
    MLP, an embedding and an output head (the embedding itself when `tied`)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    context: int
    rope_theta: float
    rms_eps: float
    tied: bool

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_matmuls(self) -> list[tuple[int, int]]:
        """(out, in) of Q, K, V, O, gate, up, down."""
        h, kv, m = self.hidden, self.kv_width, self.mlp
        return [(h, h), (kv, h), (kv, h), (h, h), (m, h), (m, h), (h, m)]

    def layer_matmul_params(self) -> int:
        return sum(r * c for r, c in self.layer_matmuls())

    def params(self) -> int:
        """The projections and norms of every layer, the embedding, the final norm, and
        the head unless it is the embedding."""
        h, v = self.hidden, self.vocab
        head = 0 if self.tied else v * h
        return self.layers * (self.layer_matmul_params() + 2 * h) + v * h + h + head

    def token_matmul_params(self) -> int:
        """Multiply-adds of one token through every projection and the head."""
        return self.layers * self.layer_matmul_params() + self.vocab * self.hidden


def pp_flops(d: LlamaDims, tokens: int) -> float:
    """decoder.rs pp_flops: every projection for every token, the head for the last one,
    causal attention (4 heads x head_dim per query-key pair, token i attending to i + 1)."""
    projections = 2.0 * tokens * d.layers * d.layer_matmul_params()
    pairs = tokens * (tokens + 1) // 2
    return projections + 2.0 * d.vocab * d.hidden + 4.0 * d.layers * d.heads * d.head_dim * pairs


def causal_pairs(tokens: int) -> int:
    """cost.rs causal_pairs with no window: query i of `tokens` sees i + 1 keys."""
    return tokens * (tokens + 1) // 2


def flops_after(d: LlamaDims, depth: int, tokens: int, heads: int) -> float:
    """cost.rs flops_after: `tokens` tokens after `depth` cached, the head computed `heads`
    times (a pass: once; `tokens` decode steps: every step); in its order of operations,
    so the floats are Rust's bit for bit."""
    projections = 2.0 * tokens * (d.layers * d.layer_matmul_params())
    head = 2.0 * (d.vocab * d.hidden) * heads
    pairs = d.layers * (causal_pairs(depth + tokens) - causal_pairs(depth))
    return projections + head + 4.0 * (d.heads * d.head_dim) * pairs


def kv_bytes_per_token(d: LlamaDims, elem: int) -> int:
    """cost.rs kv_bytes_per_token: every layer's key and value, kv_width wide."""
    return 2 * d.layers * d.kv_width * elem


def kv_read_bytes(d: LlamaDims, keys: int, elem: int) -> int:
    """cost.rs kv_read_bytes: the cache one query reads with `keys` keys cached."""
    return 2 * (d.layers * keys) * d.kv_width * elem


def pp_matmul_flops(d: LlamaDims, tokens: int) -> float:
    """The same projections and head, no attention: the matmul roofline's FLOPs."""
    return 2.0 * tokens * d.layers * d.layer_matmul_params() + 2.0 * d.vocab * d.hidden


def weight_bytes_per_token(d: LlamaDims, matmul_bytes: int, norm_elem: int, embed_elem: int) -> int:
    """Every projection and the head, the norms, one embedding row."""
    return matmul_bytes + (2 * d.layers + 1) * d.hidden * norm_elem + d.hidden * embed_elem


def float_bytes(d: LlamaDims, elem: int) -> tuple[int, int]:
    """(bytes held, bytes per token) of a float row with `elem`-byte weights, as
    src/model/decoder.rs bytes(): the projections and the head (the embedding
    when tied), the embedding when not, the norms."""
    matmuls = d.token_matmul_params() * elem
    embed = 0 if d.tied else d.vocab * d.hidden * elem
    norms = (2 * d.layers + 1) * d.hidden * elem
    return matmuls + embed + norms, weight_bytes_per_token(d, matmuls, elem, elem)


def tg_bound_tokens_per_s(gb_per_s: float, bytes_per_token: int) -> float:
    """A token cannot be faster than reading its weights once at `gb_per_s` (10^9 B/s)."""
    return gb_per_s * 1e9 / bytes_per_token


def gb_per_s(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def copy_bytes(largest_per_token: int) -> int:
    """The copy's size, as measure.rs: the largest row's bytes per token, at least
    32 MiB and at most 1 GiB (so no cache holds it, and it stays quick)."""
    return min(max(largest_per_token, 32 << 20), 1 << 30)
