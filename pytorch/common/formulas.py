"""The matmul's arithmetic, as src/bench/square/mod.rs: FLOPs and GFLOP/s of an n x n product, the
bytes of its three matrices, and which rows of the result are checked against f64."""

from __future__ import annotations

import math

MIB = 1024 * 1024


def matmul_flops(n: int) -> float:
    """2 n^3: n^2 outputs, each n multiplies and n adds."""
    return 2.0 * float(n) ** 3


def gflops(n: int, ms: float) -> float:
    return matmul_flops(n) / (ms * 1e-3) / 1e9 if ms > 0 else math.inf


def payload_bytes(n: int, elem_bytes: int) -> int:
    """A, B and C: 3 n^2 elements."""
    return 3 * n * n * elem_bytes


def accuracy_rows(n: int, wanted: int) -> list[int]:
    """The rows of C checked against f64: k evenly spaced rows, k = clamp(wanted, 1, n)."""
    k = min(max(wanted, 1), n)
    return [i * n // k for i in range(k)]
