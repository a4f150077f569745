"""What every twin's rows share: a failed row's error line, which rows failed (for the
exit code), and the device memory in use before a row (its peak's baseline)."""

from __future__ import annotations

from common.errors import Failure, first_line

# The side of the untimed matmul that makes cuBLAS take its workspace before a row's
# baseline: any size does, since the workspace's size does not depend on the product's.
WORKSPACE_WARMUP_N = 64

def row_error(e: Exception) -> str:
    """A failed row's one-line error. Ours and torch's RuntimeErrors ("CUDA out of memory.
    ...", "CUDA error: ...") say what they are; any other keeps its type's name."""
    if isinstance(e, (Failure, RuntimeError)):
        return first_line(e)
    return f"{type(e).__name__}: {first_line(e)}"


def failed_rows(rows: list[dict | None]) -> tuple[list[str], int]:
    """The precisions of the rows that were not measured, and how many rows there were,
    as src/bench/square/mod.rs completion() counts them (a missing row, None, is not counted)."""
    present = [r for r in rows if r is not None]
    return [r["precision"] for r in present if r["status"] != "ok"], len(present)


def baseline(torch, device, dtype) -> int | None:
    """Bytes in use on the GPU before a row's inputs exist; None on the CPU (no peak there).

    Candle's peak leaves cuBLAS's workspace out (cuBLAS allocates it outside Candle's
    pool). torch takes the workspace from its own allocator at the first cuBLAS call on a
    stream, so without this only the first GPU row would carry it in its peak (the
    reference lab's 224 MiB for 192 of payload). So one small untimed matmul in the row's
    dtype runs first, under the row's GEMM mode (the caller's), and the workspace lands in
    the baseline on every row."""
    if device.type != "cuda":
        return None
    x = torch.ones(WORKSPACE_WARMUP_N, WORKSPACE_WARMUP_N, dtype=dtype, device=device)
    y = x @ x
    del x, y
    torch.cuda.synchronize(device)
    return torch.cuda.memory_allocated(device)
