"""The precisions a row can run in (src/precision.rs's names and aliases), `--dtypes`
parsing, each one's torch dtype, and GemmMode: PyTorch's process-wide cuBLAS switches
set for one row, as src/bench/square/mod.rs GemmMode sets Candle's."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from common.errors import Failure


@dataclass(frozen=True)
class Precision:
    name: str
    dtype: str  # Candle's name: f64, f32, f16, bf16
    element_bytes: int
    reduced_gemm: bool  # cuBLAS may trade precision for speed (needs CUDA)


PRECISIONS = {
    p.name: p
    for p in [
        Precision("fp64", "f64", 8, False),
        Precision("fp32", "f32", 4, False),
        # f32 data, TF32 tensor-core math: torch.backends.cuda.matmul.allow_tf32, as
        # Candle's set_gemm_reduced_precision_f32.
        Precision("tf32", "f32", 4, True),
        Precision("fp16", "f16", 2, False),
        # cuBLAS computes and accumulates in f16 (CUBLAS_COMPUTE_16F) in both:
        # torch.backends.cuda.matmul.allow_fp16_accumulation, Candle's f16 switch.
        Precision("fp16-reduced", "f16", 2, True),
        Precision("bf16", "bf16", 2, False),
        Precision("bf16-reduced", "bf16", 2, True),
    ]
}
DEFAULT_DTYPES = ["fp32", "fp16", "bf16"]
ALIASES = {"f64": "fp64", "float64": "fp64", "f32": "fp32", "float32": "fp32", "f16": "fp16"}
ALIASES |= {"float16": "fp16", "f16-reduced": "fp16-reduced", "bfloat16": "bf16"}
# Candle's bf16-reduced asks cuBLAS for CUBLAS_COMPUTE_32F_FAST_16BF. PyTorch has no
# switch for that compute type (allow_bf16_reduced_precision_reduction is about
# split-K reductions and is on by default in every bf16 row), so it is refused.
NO_TORCH_EQUIVALENT = {
    "bf16-reduced": "PyTorch has no switch for cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF "
    "(Candle's bf16-reduced); allow_bf16_reduced_precision_reduction is a different "
    "setting, already on in the bf16 row",
}


def parse_dtypes(text: str) -> list[Precision]:
    """`--dtypes`: comma-separated names (Candle's and their aliases), in order, deduplicated."""
    out: list[Precision] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        name = ALIASES.get(name, name)
        if name not in PRECISIONS:
            valid = ", ".join(PRECISIONS)
            raise argparse.ArgumentTypeError(f"unknown dtype '{raw}': expected one of {valid}")
        if name in NO_TORCH_EQUIVALENT:
            raise argparse.ArgumentTypeError(f"{name}: {NO_TORCH_EQUIVALENT[name]}")
        if PRECISIONS[name] not in out:
            out.append(PRECISIONS[name])
    return out


def torch_dtype(torch, p: Precision):
    return {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16}.get(
        p.dtype, torch.bfloat16
    )


def gemm_switches(torch) -> set[str]:
    """The cuBLAS switches this torch has: allow_tf32, and allow_fp16_accumulation (2.7+)."""
    m, found = torch.backends.cuda.matmul, set()
    for name in ["allow_tf32", "allow_fp16_accumulation"]:
        try:
            getattr(m, name)
            found.add(name)
        except (AttributeError, RuntimeError):
            pass
    return found


class GemmMode:
    """Sets PyTorch's process-wide cuBLAS switches for one row and restores them after, as
    src/bench/square/mod.rs GemmMode does Candle's. They change cuBLAS calls only: CPU matmuls
    ignore them.

    TF32 goes through the older `allow_tf32`, not torch 2.9's `fp32_precision = "tf32"`:
    the latter leaves the older state at "highest", and torch's cuBLAS calls check that
    both agree (Context::allowTF32CuBLAS), so an fp32 GEMM would fail. allow_tf32 sets
    both; its deprecation warning is silenced in cli.import_torch."""

    def __init__(self, torch, p: Precision):
        self.m = torch.backends.cuda.matmul
        values = {
            "allow_tf32": p.name == "tf32",
            "allow_fp16_accumulation": p.name == "fp16-reduced",
        }
        self.wanted = {k: v for k, v in values.items() if k in gemm_switches(torch)}

    def __enter__(self):
        self.saved = {k: getattr(self.m, k) for k in self.wanted}
        for k, v in self.wanted.items():
            setattr(self.m, k, v)
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(self.m, k, v)


def check_dtypes(torch, precisions, on_gpu: bool | None) -> None:
    """Refuses precisions the device or this torch cannot run. `on_gpu` is None where the
    device is not known yet (a dry run with --device auto): then the cuBLAS modes' need
    for CUDA is checked when the run starts."""
    needs_cuda = next((p for p in precisions if p.reduced_gemm and on_gpu is False), None)
    if needs_cuda:
        raise Failure(
            f"--dtypes {needs_cuda.name}: a cuBLAS GEMM mode, it needs a CUDA device "
            f"(on the CPU it would be a plain {needs_cuda.dtype} row)"
        )
    if any(p.name == "fp16-reduced" for p in precisions) and (
        "allow_fp16_accumulation" not in gemm_switches(torch)
    ):
        raise Failure(
            f"--dtypes fp16-reduced: torch {torch.__version__} has no "
            "torch.backends.cuda.matmul.allow_fp16_accumulation (PyTorch 2.7 and later)"
        )
