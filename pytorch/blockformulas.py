"""The block's arithmetic, a port of src/bench/formulas.rs's block part (same names, same
counting, tested against the same hand values): its sizes (BlockDims), FLOPs of one
call, the least bytes it moves, the bytes RMSNorm, softmax and rotary embedding move
fused and composed, Amdahl's law, and GB/s. FLOPs count 2 per multiply-add (Kaplan et
al. 2020); bytes follow STREAM's counting (every input read once, every output written
once; McCalpin 1995)."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class BlockDims:
    batch: int
    seq: int
    hidden: int
    # Width of K and V: kv_heads x head_dim, narrower than hidden under grouped-query
    # attention (Ainslie et al. 2023), equal to it under multi-head attention.
    kv_width: int
    mlp: int

    def params(self) -> int:
        """Weights of one block: Q and O (hidden x hidden each), K and V (kv_width x hidden
        each), the MLP's gate, up and down (hidden x mlp each) and the two norms' scales."""
        h, kv, m = self.hidden, self.kv_width, self.mlp
        return 2 * h * h + 2 * kv * h + 3 * h * m + 2 * h

    def tokens(self, decode: bool) -> int:
        """Tokens one call processes: the whole sequence of each batch (prefill) or one
        new token each (decode)."""
        return self.batch if decode else self.batch * self.seq

    def context(self, decode: bool) -> int:
        """Keys each query attends to at most: `seq` in a causal prefill, the cache and
        the new token in decode."""
        return self.seq + 1 if decode else self.seq


def block_flops(d: BlockDims, decode: bool) -> float:
    """FLOPs of one block call, its matmuls': the projections and MLP, 2 x tokens x
    (2 h^2 + 2 h kv + 3 h m) (K and V project to kv_width), and attention's two matmuls,
    2 x 2 x queries x keys x h (every query head scores every key, so GQA leaves them as
    they are; all keys: the causal mask hides half in prefill but the matmul computes
    them). The norms, softmax, rotary and element-wise work are not counted."""
    h, kv, m = float(d.hidden), float(d.kv_width), float(d.mlp)
    tokens = float(d.tokens(decode))
    linear = 2.0 * tokens * (2.0 * h * h + 2.0 * kv * h + 3.0 * h * m)
    attention = 4.0 * tokens * float(d.context(decode)) * h
    return linear + attention


def block_bytes(d: BlockDims, decode: bool, elem: int) -> int:
    """The least one block call moves at `elem` bytes per element: every weight read once,
    the input read and the output written, and the keys and values, kv_width wide: written
    once in prefill (as a KV cache would hold them); in decode the cache's seq positions
    read and the new token's written into it (a preallocated cache: nothing cached is
    copied), 2 x batch x (seq + 1) x kv_width."""
    activations = 2 * d.tokens(decode) * d.hidden
    kv = 2 * d.batch * d.context(decode) * d.kv_width
    return (d.params() + activations + kv) * elem


def rms_norm_bytes(rows: int, width: int, elem: int) -> tuple[int, int]:
    """(fused, composed) bytes of an RMSNorm over rows x width at `elem` bytes per element.
    Fused: x and the scale read once, the output written once. Composed as candle's
    rms_norm_slow composes it, and as blockmodel.rms_norm_composed does (in f32 for f16
    and bf16: cast in, square, sum over the row, divide, add eps, square root, divide the
    row, cast out, scale), each op reading its inputs and writing its output."""
    n = rows * width
    fused = (2 * n + width) * elem
    inner = max(elem, 4)
    casts = 2 * n * (elem + inner) if elem < 4 else 0
    composed = (
        casts
        + 2 * n * inner  # square
        + (n + rows) * inner  # sum over the row
        + 3 * 2 * rows * inner  # divide by width, add eps, square root
        + (2 * n + rows) * inner  # divide the row
        + (2 * n + width) * elem  # scale
    )
    return fused, composed


def softmax_bytes(rows: int, width: int, elem: int) -> tuple[int, int]:
    """(fused, composed) bytes of a softmax over `rows` rows of `width`: fused read once
    and written once; composed (row max, subtract, exp, row sum, divide): 7 full passes
    and 4 of one value per row."""
    n = rows * width
    return 2 * n * elem, (7 * n + 4 * rows) * elem


def rope_bytes(x: int, table: int, elem: int) -> tuple[int, int]:
    """(fused, composed) bytes of rotary embedding over `x` elements with cos and sin
    tables of `table` elements each, as Candle's rope and rope_slow: 2 x + 2 tables, and
    10 passes over x and 6 over a table. Ported for completeness: the PyTorch block has
    no fused rope to hold it against (blockparts.py)."""
    return (2 * x + 2 * table) * elem, (10 * x + 6 * 2 * table) * elem


def amdahl(f: float, s: float) -> float:
    """Amdahl's law (AFIPS 1967): the whole's speedup when a share `f` of its time runs
    `s` times faster and the rest does not."""
    return 1.0 / ((1.0 - f) + f / s)


def gb_per_s(nbytes: int, ms: float) -> float:
    """GB/s (10^9 bytes per second) of `nbytes` moved in `ms` milliseconds."""
    return nbytes / (ms * 1e-3) / 1e9


def copy_bytes(row_bytes: int) -> int:
    """The size of each of the two buffers of a row's ceiling copy, as src/bench/block's
    copy_ceiling: half the row's least bytes (one read, one written), so the copy moves the
    row's bytes and has its footprint (in the same level of the memory hierarchy)."""
    return max(row_bytes // 2, 1)
