"""The kernels experiment's rows with PyTorch, as src/bench/kernels: per op, case and
precision, random inputs made off the clock, a copy of the row's bytes between two
preallocated buffers (the ceiling, measured in the same run), then PyTorch's op and the
composed form timed by timing.Clock, each against the ceiling, with its first rows
checked against an f64 computation. The cases and the bytes are the Rust side's, so
`compare` pairs the two files row by row."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from block.parts import rate_ms, timed
from common.errors import Failure, first_line
from common.precisions import torch_dtype

EPS = 1e-5  # src/bench/kernels/ops.rs EPS (Llama's)
LARGE_COLS = 4096
ACCURACY_ROWS = 4
OPS = ["rms_norm", "rms_norm_mul", "softmax", "swiglu", "copy", "add"]
CASES = ["block-prefill", "block-decode", "smollm2-prefill", "smollm2-decode", "large"]
# bench::block's default layers: (hidden, heads, mlp, seq) on a GPU and on the CPU.
GPU_SHAPE, CPU_SHAPE = (4096, 32, 11008, 2048), (512, 8, 1376, 128)


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    tokens: int
    hidden: int
    heads: int
    mlp: int
    context: int

    def as_json(self) -> dict:
        return dict(self.__dict__)


def cases(on_gpu: bool, names: list[str], seq: int | None, large_mib: int) -> list[Case]:
    """bench::kernels::cases: the block's layer, SmolLM2-135M's, and the large case."""
    hidden, heads, mlp, default_seq = GPU_SHAPE if on_gpu else CPU_SHAPE
    seq = seq or default_seq
    block = f"the block experiment's layer (hidden {hidden}, {heads} heads, MLP {mlp}), {seq} tokens"
    smol = f"SmolLM2-135M (hidden 576, 9 heads, 3 KV heads, MLP 1536), {seq} tokens"
    rows = max(large_mib * (1 << 20) // 4 // LARGE_COLS, 1)
    large = f"{large_mib} MiB per f32 tensor ({rows} x {LARGE_COLS}): memory-bound"
    table = {
        "block-prefill": (block, seq, hidden, heads, mlp, seq),
        "block-decode": (block, 1, hidden, heads, mlp, seq + 1),
        "smollm2-prefill": (smol, seq, 576, 9, 1536, seq),
        "smollm2-decode": (smol, 1, 576, 9, 1536, seq + 1),
        "large": (large, rows, LARGE_COLS, 1, LARGE_COLS, LARGE_COLS),
    }
    return [Case(n, *table[n]) for n in names]


def shape(op: str, c: Case) -> list[int]:
    """KernelOp::shape: tokens x hidden, heads x tokens x context (softmax), tokens x mlp."""
    if op == "softmax":
        return [c.heads, c.tokens, c.context]
    if op == "swiglu":
        return [c.tokens, c.mlp]
    return [c.tokens, c.hidden]


def traffic(op: str, n: int, width: int, elem: int) -> tuple[int, int]:
    """ops::traffic: each input read once, the output written once."""
    read = {"rms_norm_mul": n + width, "swiglu": 2 * n, "add": 2 * n}.get(op, n)
    return read * elem, n * elem


CALLS = {
    ("rms_norm", "pytorch"): "torch.nn.functional.rms_norm(x, (width,), eps=eps)",
    ("rms_norm", "composed"): "x * rsqrt(mean(x^2) + eps) in primitive ops, in f32",
    ("rms_norm_mul", "pytorch"): "torch.nn.functional.rms_norm(x, (width,), w, eps)",
    ("rms_norm_mul", "composed"): "x * rsqrt(mean(x^2) + eps) * w in primitive ops, in f32",
    ("softmax", "pytorch"): "torch.softmax(x, -1)",
    ("softmax", "composed"): "exp(x - max) / sum(exp(x - max)) in primitive ops",
    ("swiglu", "pytorch"): "torch.nn.functional.silu(gate) * up",
    ("swiglu", "composed"): "gate / (exp(-gate) + 1) * up in primitive ops",
    ("copy", "pytorch"): "x.clone()",
    ("add", "pytorch"): "a + b",
}


def implementations(op: str) -> list[str]:
    return ["pytorch"] if op in ("copy", "add") else ["pytorch", "composed"]


def run_op(torch, op: str, imp: str, x, y, w):
    F = torch.nn.functional
    width = x.shape[-1]
    if imp == "pytorch":
        return {
            "rms_norm": lambda: F.rms_norm(x, (width,), eps=EPS),
            "rms_norm_mul": lambda: F.rms_norm(x, (width,), w, EPS),
            "softmax": lambda: torch.softmax(x, -1),
            "swiglu": lambda: F.silu(x) * y,
            "copy": lambda: x.clone(),
            "add": lambda: x + y,
        }[op]()
    if op in ("rms_norm", "rms_norm_mul"):
        wide = x.float()
        out = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + EPS)
        return (out * w.float() if op == "rms_norm_mul" else out).to(x.dtype)
    if op == "softmax":
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)
    return x / ((-x).exp() + 1) * y  # swiglu


def reference(torch, op: str, x, y, w):
    """The op in f64 on the host from the same (rounded) inputs."""
    x, y, w = (t.double().cpu() for t in (x, y, w))
    if op in ("rms_norm", "rms_norm_mul"):
        out = x / (x.pow(2).mean(-1, keepdim=True) + EPS).sqrt()
        return out * w if op == "rms_norm_mul" else out
    if op == "softmax":
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)
    if op == "swiglu":
        return x / (1 + (-x).exp()) * y
    return x + y if op == "add" else x.clone()


def normwise(got: list[float], want: list[float]) -> tuple[float, float]:
    """bench::kernels::normwise_errors: max |d| / max |want|, mean |d| / mean |want|."""
    diffs = [abs(g - w) for g, w in zip(got, want)]
    largest, size = max((abs(w) for w in want), default=0.0), sum(abs(w) for w in want)
    worst, total = max(diffs, default=0.0), sum(diffs)
    return (0.0 if worst == 0 else worst / largest, 0.0 if total == 0 else total / size)


def first_rows(t, width: int):
    return t.reshape(-1, width)[:ACCURACY_ROWS]


def measure_row(torch, clock, device, op: str, case: Case, p, plan) -> dict:
    dims = shape(op, case)
    width, n = dims[-1], 1
    for d in dims:
        n *= d
    dtype = torch_dtype(torch, p)
    read, written = traffic(op, n, width, p.element_bytes)
    moved = read + written
    scale = 3.0 if op == "softmax" else 1.0
    x = (torch.randn(*dims, device=device) * scale).to(dtype)
    y = torch.randn(*dims, device=device).to(dtype) if op in ("swiglu", "add") else x
    w = (torch.randn(width, device=device) * 0.1 + 1.0).to(dtype)
    want = first_rows(reference(torch, op, first_rows(x, width), first_rows(y, width), w), width)
    want = want.flatten().tolist()

    copied = max(moved // 2, 1)
    src = torch.ones(copied, dtype=torch.uint8, device=device)
    dst = torch.zeros(copied, dtype=torch.uint8, device=device)
    t = timed(clock, plan, lambda: dst.copy_(src))
    del src, dst
    ceiling_gb = 2 * copied / (rate_ms(t) * 1e-3) / 1e9
    ceiling = {
        "call": "dst.copy_(src) (uint8, preallocated)",
        "bytes_copied": copied,
        "time_ms": rate_ms(t),
        "time_source": "gpu_median_ms" if t["gpu_median_ms"] is not None else "median_ms",
        "gb_per_s": ceiling_gb,
        **t,
    }
    variants = []
    for imp in implementations(op):
        v = {"implementation": imp, "call": CALLS[(op, imp)], "status": "ok", "error": None}
        try:
            t = timed(clock, plan, lambda: run_op(torch, op, imp, x, y, w))
            got = first_rows(run_op(torch, op, imp, x, y, w), width).double().cpu()
            got = got.flatten().tolist()
            ms = rate_ms(t)
            rate = moved / (ms * 1e-3) / 1e9
            max_err, mean_err = normwise(got, want)
            v["measured"] = {
                "time_ms": ms,
                "time_source": "gpu_median_ms" if t["gpu_median_ms"] is not None else "median_ms",
                "gb_per_s": rate,
                "pct_of_ceiling": 100.0 * rate / ceiling_gb,
                "speedup_vs_candle": None,
                "accuracy": {
                    "elements_checked": len(got),
                    "max_rel_err": max_err,
                    "mean_rel_err": mean_err,
                },
                **t,
            }
        except (Failure, RuntimeError) as e:
            why = first_line(e)
            print(f"{op} {case.name} {p.name} {imp}: failed ({why})", file=sys.stderr)
            v |= {"status": "error", "error": why, "measured": None}
        variants.append(v)
    return {
        "op": op,
        "case": case.name,
        "precision": p.name,
        "shape": dims,
        "elements": n,
        "bytes_read": read,
        "bytes_written": written,
        "bytes_moved": moved,
        "ceiling": ceiling,
        "variants": variants,
    }


def run_kernels(torch, clock, device, cfg) -> tuple[dict, list[str], int]:
    """The body (schema's `kernels`), the failed variants' names and the variant count."""
    rows = []
    for op in cfg.ops:
        for case in cfg.cases:
            for p in cfg.precisions:
                print(f"{op} {case.name} {p.name}", file=sys.stderr)
                rows.append(measure_row(torch, clock, device, op, case, p, cfg.plan))
    failed = [
        f"{r['op']} {r['case']} {r['precision']} {v['implementation']}"
        for r in rows
        for v in r["variants"]
        if v["status"] != "ok"
    ]
    body = {
        "warmup": cfg.plan.warmup,
        "iters": cfg.plan.iters,
        "cpu_threads": torch.get_num_threads(),
        "cache_bytes": None,
        "telemetry": {
            "source": None,
            "unavailable_reason": "not read by the PyTorch twin",
        },
        "cases": [c.as_json() for c in cfg.cases],
        "rows": rows,
    }
    return body, failed, sum(len(r["variants"]) for r in rows)


def table_lines(body: dict) -> list[str]:
    """One line per row: PyTorch's op and the composed form against the ceiling."""
    lines = [
        f"{'op':<13} {'case':<16} {'dtype':<5} {'MiB':>8} {'ceiling GB/s':>12} "
        f"{'pytorch ms':>11} {'composed ms':>11} {'% ceiling':>9}"
    ]
    for r in body["rows"]:
        m = {v["implementation"]: v.get("measured") for v in r["variants"]}
        own, comp = m.get("pytorch"), m.get("composed")
        lines.append(
            f"{r['op']:<13} {r['case']:<16} {r['precision']:<5} "
            f"{r['bytes_moved'] / (1 << 20):>8.2f} {r['ceiling']['gb_per_s']:>12.1f} "
            f"{own['time_ms'] if own else float('nan'):>11.4f} "
            f"{comp['time_ms'] if comp else float('nan'):>11.4f} "
            f"{own['pct_of_ceiling'] if own else float('nan'):>8.0f}%"
        )
    return lines
