"""The ops of the kernels twin, as src/bench/kernels/ops.rs: each op's input shape and least
traffic, PyTorch's op and the composed form (the same math from primitive ops), and the f64
reference their first rows are checked against, norm-wise."""

from __future__ import annotations

EPS = 1e-5  # src/bench/kernels/ops.rs EPS (Llama's)
ACCURACY_ROWS = 4
OPS = ["rms_norm", "rms_norm_mul", "softmax", "swiglu", "copy", "add"]

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


def shape(op: str, c) -> list[int]:
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
