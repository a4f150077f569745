#!/usr/bin/env python3
"""The PyTorch reference: candle-lab's `matmul` and `cpu_vs_gpu` measurements run with
PyTorch, written as result schema 2.0, so that `compare` can set Candle and PyTorch
side by side on the same machine. Same flags, defaults, timing model, memory and
accuracy rules as experiments/matmul.rs and experiments/cpu_vs_gpu.rs (their
library: src/matmul.rs, src/timing.rs, src/stats.rs); where PyTorch cannot do
what Candle does, it says so instead of writing a look-alike number.

Run it through `just pytorch ...` (which finds or makes a Python with torch).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import re
import shlex
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = "2.0"
ROOT = Path(__file__).resolve().parent.parent
MAX_SIZE = 1_000_000  # as src/cli.rs: keeps 3 n^2 x 8 far from overflow elsewhere
NOISY_IQR_OVER_MEDIAN = 0.10
MIB = 1024 * 1024


class Failure(Exception):
    """A run that cannot go on: printed as one `error:` line, exit code 1."""


# --- statistics (src/stats.rs, operation for operation) -------------------------------


def mean(samples: list[float]) -> float:
    # A plain left-to-right sum, as Rust's `iter().sum()`: Python 3.12's sum() of
    # floats compensates rounding and would differ in the last bits.
    total = 0.0
    for x in samples:
        total += x
    return total / len(samples)


def stddev(samples: list[float]) -> float:
    """Sample standard deviation (n - 1); 0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    m = mean(samples)
    ss = 0.0
    for x in samples:
        ss += (x - m) ** 2
    return math.sqrt(ss / (len(samples) - 1))


def quantile_sorted(sorted_samples: list[float], p: float) -> float:
    """Linear interpolation between the two nearest ranks (numpy's default)."""
    rank = min(max(p, 0.0), 1.0) * (len(sorted_samples) - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (rank - lo)


def summarize(samples: list[float]) -> dict | None:
    """The schema's Summary; None when there are no samples or one is not finite."""
    if not samples or any(not math.isfinite(x) for x in samples):
        return None
    s = sorted(samples)
    m, sd, median = mean(samples), stddev(samples), quantile_sorted(s, 0.5)
    p25, p75 = quantile_sorted(s, 0.25), quantile_sorted(s, 0.75)
    iqr_over_median = (p75 - p25) / median if median > 0.0 else 0.0
    return {
        "n": len(samples),
        "median": median,
        "mean": m,
        "min": s[0],
        "max": s[-1],
        "p10": quantile_sorted(s, 0.10),
        "p25": p25,
        "p75": p75,
        "p90": quantile_sorted(s, 0.90),
        "stddev": sd,
        "cv": sd / m if m != 0.0 else 0.0,
        "iqr_over_median": iqr_over_median,
        "noisy": iqr_over_median > NOISY_IQR_OVER_MEDIAN,
    }


# --- formulas (src/matmul.rs) ----------------------------------------------------------


def matmul_flops(n: int) -> float:
    return 2.0 * float(n) ** 3


def gflops(n: int, ms: float) -> float:
    return matmul_flops(n) / (ms * 1e-3) / 1e9 if ms > 0 else math.inf


def payload_bytes(n: int, elem_bytes: int) -> int:
    return 3 * n * n * elem_bytes


def accuracy_rows(n: int, wanted: int) -> list[int]:
    """The rows of C checked against f64: k evenly spaced rows, k = clamp(wanted, 1, n)."""
    k = min(max(wanted, 1), n)
    return [i * n // k for i in range(k)]


def relative_errors(got: list[float], want: list[float]) -> tuple[float, float]:
    """(max, mean) of |got - want| / rms(want): a relative error that does not explode
    where one output happens to be near zero."""
    ss = 0.0
    for w in want:
        ss += w * w
    rms = math.sqrt(ss / len(want))
    errs = [abs(g - w) / rms if rms > 0 else math.inf for g, w in zip(got, want)]
    worst = 0.0
    for e in errs:  # as Rust's fold with f64::max: a NaN never wins
        if e > worst:
            worst = e
    return worst, mean(errs)


@dataclass(frozen=True)
class Plan:
    warmup: int
    iters: int


def cpu_plan(gpu_iters: int) -> Plan:
    """The reference lab's CPU plan beside a GPU run: 1 warm-up, max(3, iters / 4) runs."""
    return Plan(warmup=1, iters=max(3, gpu_iters // 4))


# --- precisions --------------------------------------------------------------------------


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
    src/matmul.rs GemmMode does Candle's. They change cuBLAS calls only: CPU matmuls
    ignore them.

    TF32 goes through the older `allow_tf32`, not torch 2.9's `fp32_precision = "tf32"`:
    the latter leaves the older state at "highest", and torch's cuBLAS calls check that
    both agree (Context::allowTF32CuBLAS), so an fp32 GEMM would fail. allow_tf32 sets
    both; its deprecation warning is silenced in import_torch."""

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


# --- datasheet peaks (a copy of src/peaks.rs's table; a test checks they agree) --------

# name (driver's, lower case, without "nvidia ") -> fp64, fp32, tf32, fp16/bf16, fp16 acc16
DATASHEET_TFLOPS = {}
for _names, _peaks in [
    (["h200"], (67.0, 67.0, 494.5, 989.5, None)),
    (["h100 80gb hbm3", "h100 sxm5 80gb"], (67.0, 67.0, 494.5, 989.5, None)),
    (["h100 pcie"], (51.0, 51.0, 378.0, 756.5, None)),
    (
        ["a100-sxm4-80gb", "a100-sxm4-40gb", "a100 80gb pcie", "a100-pcie-40gb"],
        (19.5, 19.5, 156.0, 312.0, None),
    ),
    (["l40s"], (None, 91.6, 183.0, 362.0, None)),
    (["l4"], (None, 30.3, 60.0, 121.0, None)),
    (["geforce rtx 4090"], (None, 82.6, 82.6, 165.2, 330.3)),
]:
    for _name in _names:
        DATASHEET_TFLOPS[_name] = _peaks


def datasheet_tflops(gpu_name: str, p: Precision) -> float | None:
    name = gpu_name.strip().lower()
    name = name.removeprefix("nvidia ")
    if name not in DATASHEET_TFLOPS:
        return None
    fp64, fp32, tf32, half, half_acc16 = DATASHEET_TFLOPS[name]
    return {
        "fp64": fp64,
        "fp32": fp32,
        "tf32": tf32,
        "fp16-reduced": half_acc16 if half_acc16 is not None else half,
    }.get(p.name, half)


# --- environment and device --------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") or line.startswith("Model"):
                return line.split(":", 1)[1].strip()
    except (OSError, IndexError):
        pass
    return f"{platform.machine()} CPU"


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.removeprefix("PRETTY_NAME=").strip('"')
    except OSError:
        pass
    return sys.platform


def git_commit() -> str | None:
    """As build.rs: short=12, "-dirty" when tracked files other than results/ changed."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "--short=12", "HEAD")
    if sha is None:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")
    return f"{sha}-dirty" if dirty else sha


def suite_version() -> str:
    """candle-lab's version: the first `version = "..."` of Cargo.toml, the package's."""
    try:
        found = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


def environment(torch) -> dict:
    return {
        "framework": "pytorch",
        "framework_version": torch.__version__,
        "suite_version": suite_version(),
        "git_commit": git_commit(),
        "os": os_name(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        # CPUs this process may run on, as Rust's available_parallelism reads them.
        "cpu_threads_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1,
        "compute_threads": torch.get_num_threads(),
        "build_features": [],
        "target_features": [],
        "profile": None,
        "cuda_build_version": torch.version.cuda,
    }


def driver_cuda_version() -> str | None:
    """Newest CUDA the driver supports, from libcuda's cuDriverGetVersion (torch has no API)."""
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except OSError:
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def parse_device(text: str) -> str:
    """`--device`: auto, cpu, cuda (GPU 0) or cuda:N, as src/device.rs; the canonical form."""
    s = text.strip().lower()
    if s in ("auto", "cpu"):
        return s
    if s in ("cuda", "gpu"):
        return "cuda:0"
    if s.startswith("cuda:") and s[5:].isdigit():
        return f"cuda:{int(s[5:])}"
    raise argparse.ArgumentTypeError(
        f"unknown device '{text}': expected one of auto, cpu, cuda, cuda:N"
    )


def select_device(torch, arg: str):
    """The torch.device to run on and the schema's device object; says which and why."""
    build = f"torch {torch.__version__}"
    if arg == "cpu":
        device, because = torch.device("cpu"), "asked for with --device cpu"
    elif arg == "auto":
        if torch.version.cuda is None:
            device, because = torch.device("cpu"), f"auto: {build} was built without CUDA"
        elif not torch.cuda.is_available():
            device = torch.device("cpu")
            because = (
                f"auto: CUDA build ({build}) but no GPU answered "
                "(torch.cuda.is_available() is False)"
            )
        else:
            device, because = torch.device("cuda:0"), "auto: CUDA build and GPU 0 answered"
    else:
        ordinal = int(arg.split(":")[1])
        if torch.version.cuda is None:
            raise Failure(f"--device {arg}: {build} was built without CUDA support")
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if ordinal >= count:
            raise Failure(f"--device {arg}: no usable GPU: torch sees {count} CUDA device(s)")
        device, because = torch.device(arg), f"asked for with --device {arg}"

    info = {
        "kind": "cpu",
        "label": "cpu",
        "ordinal": None,
        "name": cpu_model(),
        "chosen_because": because,
        "compute_capability": None,
        "sm_count": None,
        "total_memory_bytes": None,
        "free_memory_bytes_at_start": None,
        "driver_cuda_version": None,
        "memory_pool": None,
    }
    if device.type == "cuda":
        torch.cuda.set_device(device)  # events and the default stream follow it
        props = torch.cuda.get_device_properties(device)
        free, _total = torch.cuda.mem_get_info(device)
        info |= {
            "kind": "cuda",
            "label": f"cuda:{device.index}",
            "ordinal": device.index,
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "total_memory_bytes": props.total_memory,
            "free_memory_bytes_at_start": free,
            "driver_cuda_version": driver_cuda_version(),
            # The caching allocator keeps freed blocks for reuse unless turned off.
            "memory_pool": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") != "1",
        }
    print(f"device: {info['label']} ({info['name']}): {because}", file=sys.stderr)
    return device, info


# --- memory check (src/matmul.rs check_fits, same bound so both refuse the same sizes) ---


def human_bytes(n: int) -> str:
    value, unit = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024.0 and unit < len(units) - 1:
        value, unit = value / 1024.0, unit + 1
    return f"{n} B" if unit == 0 else f"{n} ({value:.1f} {units[unit]})"


def device_bytes(on_cpu: bool, p: Precision, n: int) -> int:
    """The payload, plus (on the CPU, for formats narrower than f32) f32 copies of all three
    matrices: Candle's measured CPU behaviour, kept as the bound for both programs."""
    widened = payload_bytes(n, 4) if on_cpu and p.element_bytes < 4 else 0
    return payload_bytes(n, p.element_bytes) + widened


def host_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(torch, device, n: int, precisions: list[Precision]) -> None:
    on_cpu = device.type == "cpu"
    on_device = max(device_bytes(on_cpu, p, n) for p in precisions)
    # A and B in f32 on the host, and the f64 copy of B the reference needs.
    host_needed = 2 * n * n * 4 + n * n * 8 + (on_device if on_cpu else 0)
    free = host_available_bytes()
    if free is not None and host_needed > free:
        raise Failure(
            f"--size {n}: needs {human_bytes(host_needed)} of host memory, "
            f"{human_bytes(free)} available; choose a smaller --size"
        )
    if not on_cpu:
        free, _ = torch.cuda.mem_get_info(device)
        if on_device > free:
            raise Failure(
                f"--size {n}: needs {human_bytes(on_device)} on the GPU, "
                f"{human_bytes(free)} free; choose a smaller --size"
            )


# --- the measurement -------------------------------------------------------------------


class Clock:
    """src/timing.rs's model. Per sample: synchronize; record a start event (CUDA); start
    the host clock; run; record an end event; synchronize; stop the host clock. Warm-up
    runs first, untimed. The output is dropped after the clock stops."""

    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def time(self, plan: Plan, work) -> tuple[list[float], list[float]]:
        for _ in range(plan.warmup):
            out = work()
            self.sync()
            del out
        wall_ms, gpu_ms = [], []
        for _ in range(plan.iters):
            self.sync()
            if self.cuda:
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
            t0 = time.perf_counter()
            out = work()
            if self.cuda:
                end.record()
            self.sync()
            wall_ms.append((time.perf_counter() - t0) * 1e3)
            del out
            if self.cuda:
                gpu_ms.append(start.elapsed_time(end))
        return wall_ms, gpu_ms


class Inputs:
    """Standard-normal f32 A and B made once on the host, so every precision multiplies
    the same numbers, and the f64 product of the checked rows, computed on the CPU."""

    def __init__(self, torch, n: int, wanted_rows: int):
        print(
            f"inputs: two random {n}x{n} f32 matrices, f64 reference for {wanted_rows} rows",
            file=sys.stderr,
        )
        self.a = torch.randn(n, n, dtype=torch.float32)
        self.b = torch.randn(n, n, dtype=torch.float32)
        self.rows = accuracy_rows(n, wanted_rows)
        idx = torch.tensor(self.rows)
        self.reference = (self.a[idx].double() @ self.b.double()).flatten().tolist()


def memory_source(device) -> str:
    if device.type == "cuda":
        return "torch.cuda.max_memory_allocated (PyTorch caching allocator, bytes in tensors)"
    return (
        "not measured: PyTorch keeps no peak of its CPU allocations "
        "(max_memory_allocated is CUDA only)"
    )


def run_rows(torch, device, gpu_name, n, plan, precisions, inputs) -> list[dict]:
    """One schema Row per precision. A CUDA out-of-memory error ends that row only."""
    rows = []
    for p in precisions:
        print(f"{p.name}: warmup {plan.warmup}, iters {plan.iters}", file=sys.stderr)
        row = {
            "precision": p.name,
            "dtype": p.dtype,
            "element_bytes": p.element_bytes,
            "gemm_reduced_precision": p.reduced_gemm,
            "memory_source": memory_source(device),
            "status": "ok",
            "error": None,
        }
        oom = None
        try:
            with GemmMode(torch, p):
                row |= measure(torch, device, gpu_name, n, plan, p, inputs)
        except torch.cuda.OutOfMemoryError as e:
            oom = first_line(e)
        except Exception as e:
            raise Failure(f"{p.name} matmul: {first_line(e)}") from e
        if oom is not None:
            # Out here the exception, and the row's tensors its frames held, are gone.
            print(f"{p.name}: out of device memory, skipped ({oom})", file=sys.stderr)
            row |= {"status": "error", "error": oom}
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def measure(torch, device, gpu_name, n, plan, p, inputs) -> dict:
    clock = Clock(torch, device)
    on_gpu = device.type == "cuda"
    # Peak = inputs + whatever the matmuls add, above the use before the inputs.
    clock.sync()
    base = torch.cuda.memory_allocated(device) if on_gpu else None
    dtype = torch_dtype(torch, p)
    # copy=True: storage of their own, even for f32 on the CPU, as src/matmul.rs owned_on.
    a = inputs.a.to(dtype=dtype, copy=True).to(device)
    b = inputs.b.to(dtype=dtype, copy=True).to(device)
    if on_gpu:
        clock.sync()
        torch.cuda.reset_peak_memory_stats(device)

    wall, gpu = clock.time(plan, lambda: a @ b)
    peak = torch.cuda.max_memory_allocated(device) - base if on_gpu else None

    # Accuracy from one more, untimed, matmul.
    idx = torch.tensor(inputs.rows, device=device)
    got = (a @ b)[idx].double().cpu().flatten().tolist()
    max_err, mean_err = relative_errors(got, inputs.reference)

    wall_ms, gpu_ms = summarize(wall), summarize(gpu)
    if wall_ms is None:
        raise Failure("no finite timed samples")
    gpu_gflops = gflops(n, gpu_ms["median"]) if gpu_ms else None
    peak_tflops = datasheet_tflops(gpu_name, p) if gpu_name else None
    payload = payload_bytes(n, p.element_bytes)
    return {
        "median_ms": wall_ms["median"],
        "gflops": gflops(n, wall_ms["median"]),
        "peak_mib": peak / MIB if peak is not None else None,
        "peak_bytes": peak,
        "payload_mib": payload / MIB,
        "payload_bytes": payload,
        "gpu_median_ms": gpu_ms["median"] if gpu_ms else None,
        "gpu_gflops": gpu_gflops,
        "datasheet_tflops": peak_tflops,
        "pct_of_datasheet": 100.0 * gpu_gflops / (peak_tflops * 1e3)
        if peak_tflops is not None and gpu_gflops is not None
        else None,
        "wall_ms": wall_ms,
        "gpu_ms": gpu_ms,
        "samples_wall_ms": wall,
        "samples_gpu_ms": gpu,
        "accuracy": {
            "rows_checked": len(inputs.rows),
            "max_rel_err": max_err,
            "mean_rel_err": mean_err,
        },
    }


def fp32_median(row: dict | None) -> float | None:
    ok = row is not None and row["precision"] == "fp32" and row["status"] == "ok"
    return row["median_ms"] if ok else None


def run_cpu_fp32(torch, n, plan, inputs) -> dict:
    cpu = cpu_plan(plan.iters)
    print(f"cpu fp32 {n}x{n}: warmup {cpu.warmup}, iters {cpu.iters}", file=sys.stderr)
    return run_rows(torch, torch.device("cpu"), None, n, cpu, [PRECISIONS["fp32"]], inputs)[0]


# --- the two experiments -------------------------------------------------------------------


def experiment_matmul(torch, args, device, info) -> dict:
    n, plan, precisions = args.size, Plan(args.warmup, args.iters), args.dtypes
    on_gpu = device.type == "cuda"
    needs_cuda = next((p for p in precisions if p.reduced_gemm and not on_gpu), None)
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
    compare_cpu = on_gpu and not args.no_cpu
    check_fits(torch, device, n, precisions)
    if compare_cpu:
        check_fits(torch, torch.device("cpu"), n, [PRECISIONS["fp32"]])
    if args.output:
        check_writable(args.output)
    print(
        f"matmul {n}x{n}, warmup {plan.warmup}, iters {plan.iters}, on {info['label']}",
        file=sys.stderr,
    )

    inputs = Inputs(torch, n, args.accuracy_rows)
    gpu_name = info["name"] if on_gpu else None
    rows = run_rows(torch, device, gpu_name, n, plan, precisions, inputs)
    cpu_row = run_cpu_fp32(torch, n, plan, inputs) if compare_cpu else None
    device_fp32 = next((m for m in map(fp32_median, rows) if m is not None), None)
    cpu_fp32_ms = fp32_median(cpu_row) if on_gpu else device_fp32
    if cpu_row is not None:
        cpu_iters = cpu_plan(plan.iters).iters
    else:
        cpu_iters = plan.iters if not on_gpu and device_fp32 is not None else None
    speedup = None
    if on_gpu and cpu_fp32_ms is not None and device_fp32 is not None:
        speedup = cpu_fp32_ms / device_fp32

    print_rows(f"matmul {n}x{n} on {info['label']} ({info['name']}), PyTorch", rows)
    if cpu_row is not None:
        print_rows("the same fp32 matmul on the CPU, PyTorch", [cpu_row])
    if speedup is not None:
        print(
            f"GPU is {speedup:.1f}x faster than the CPU at fp32 "
            "(median wall time, device synchronized)"
        )
    return {
        "size": n,
        "warmup": plan.warmup,
        "iters": plan.iters,
        "gpu_iters": plan.iters if on_gpu else None,
        "cpu_iters": cpu_iters,
        "device": device.type,
        "precisions": rows,
        "cpu_fp32_ms": cpu_fp32_ms,
        "gpu_speedup_fp32": speedup,
        "cpu_fp32": cpu_row,
        "flops_per_matmul": matmul_flops(n),
    }


def experiment_cpu_vs_gpu(torch, args, device, info) -> dict:
    n, gpu_plan = args.size, Plan(args.warmup, args.iters)
    cpu = cpu_plan(gpu_plan.iters)
    fp32 = [PRECISIONS["fp32"]]
    on_gpu = device.type == "cuda"
    check_fits(torch, torch.device("cpu"), n, fp32)
    if on_gpu:
        check_fits(torch, device, n, fp32)
    if args.output:
        check_writable(args.output)
    inputs = Inputs(torch, n, 16)

    gpu_row, gpu_skipped = None, None
    if on_gpu:
        print(
            f"gpu fp32 {n}x{n}: warmup {gpu_plan.warmup}, iters {gpu_plan.iters}", file=sys.stderr
        )
        gpu_row = run_rows(torch, device, info["name"], n, gpu_plan, fp32, inputs)[0]
    else:
        gpu_skipped = f"no CUDA device in use ({info['chosen_because']})"
        print(f"GPU row skipped: {gpu_skipped}")
    cpu_row = run_cpu_fp32(torch, n, gpu_plan, inputs)
    cpu_ms, gpu_ms = fp32_median(cpu_row), fp32_median(gpu_row)
    speedup = cpu_ms / gpu_ms if cpu_ms is not None and gpu_ms is not None else None

    threads = torch.get_num_threads()
    print_rows(f"fp32 {n}x{n} on the CPU ({cpu_model()}, {threads} threads), PyTorch", [cpu_row])
    if gpu_row is not None:
        print_rows(f"fp32 {n}x{n} on {info['label']} ({info['name']}), PyTorch", [gpu_row])
    if speedup is not None:
        print(
            f"GPU is {speedup:.1f}x faster than the CPU at fp32 "
            "(median wall time, device synchronized)"
        )
    else:
        print("speedup: n/a (no GPU row)")
    return {
        "size": n,
        "precision": "fp32",
        "cpu_threads": threads,
        "cpu_warmup": cpu.warmup,
        "cpu_iters": cpu.iters,
        "gpu_warmup": gpu_plan.warmup,
        "gpu_iters": gpu_plan.iters,
        "cpu": cpu_row,
        "gpu": gpu_row,
        "gpu_skipped": gpu_skipped,
        "cpu_fp32_ms": cpu_ms,
        "gpu_fp32_ms": gpu_ms,
        "gpu_speedup_fp32": speedup,
    }


# --- output ------------------------------------------------------------------------------


def print_rows(title: str, rows: list[dict]) -> None:
    """The terminal table of src/matmul.rs rows_table."""
    header = [
        "precision",
        "median ms",
        "GFLOP/s",
        "IQR/median",
        "GPU ms",
        "% datasheet",
        "peak MiB",
        "payload MiB",
        "max rel err",
    ]

    def opt(v, digits):
        return "-" if v is None else f"{v:.{digits}f}"

    lines = []
    for r in rows:
        if r["status"] != "ok":
            lines.append([r["precision"], f"{r['status']}: {r['error'] or ''}"])
            continue
        spread = f"{100 * r['wall_ms']['iqr_over_median']:.1f}%"
        lines.append(
            [
                r["precision"],
                f"{r['median_ms']:.3f}",
                f"{r['gflops']:.1f}",
                spread + (" noisy" if r["wall_ms"]["noisy"] else ""),
                opt(r["gpu_median_ms"], 3),
                opt(r["pct_of_datasheet"], 1),
                opt(r["peak_mib"], 1),
                f"{r['payload_mib']:.1f}",
                f"{r['accuracy']['max_rel_err']:.2e}",
            ]
        )
    widths = [
        max(len(str(c)) for c in col)
        for col in zip(header, *[line + [""] * (len(header) - len(line)) for line in lines])
    ]
    print(f"=== {title} ===")
    for line in [header, *lines]:
        cells = [line[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        print("  ".join(cells).rstrip())
    print()


def json_safe(value):
    """inf and NaN as the strings "inf", "-inf", "NaN" (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def check_writable(path: Path) -> None:
    """Fails now, before a long run, if `path` cannot be written later: an existing target
    that is not a regular file (a folder, a link, a device...) is refused; missing parent
    folders are created."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise Failure(f"cannot write {path}: {e.strerror}") from e
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise Failure(f"cannot write {path}: it is {what}")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as e:
        raise Failure(f"cannot write {path}: {parent}: {e.strerror or e}") from e


def write_json_atomic(path: Path, value) -> None:
    """Writes pretty JSON to a temporary file beside `path`, synced, then renames it over
    `path`: the target is whole or untouched, and no temporary file is left on error."""
    text = json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n"
    check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide results from others
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise Failure(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def command_line() -> str:
    """The command, each argument shell-quoted where needed: it pastes back into bash."""
    return " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0].rstrip()


# --- command line --------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as src/cli.rs parse()
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def bounded(lo: int, hi: int | None = None):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid value '{text}': not a whole number"
            ) from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{v} is not in {lo}..={hi if hi else ''}")
        return v

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(
        prog="pytorch/matmul.py",
        allow_abbrev=False,
        description="candle-lab's matmul and cpu_vs_gpu measurements with PyTorch, written as "
        "result schema 2.0 (same flags, defaults and timing model as the Rust programs).",
    )
    p.add_argument(
        "--experiment",
        choices=["matmul", "cpu_vs_gpu"],
        default="matmul",
        help="matmul: one row per --dtypes precision; cpu_vs_gpu: fp32 on the CPU "
        "and on the GPU, and the speedup (default: matmul)",
    )
    p.add_argument(
        "--device",
        type=parse_device,
        default="auto",
        metavar="DEVICE",
        help="auto (CUDA GPU 0 if torch has CUDA and a GPU answers, else the CPU), "
        "cpu, cuda, or cuda:N",
    )
    p.add_argument(
        "--size",
        type=bounded(1, MAX_SIZE),
        default=4096,
        help="side n of the n x n matrices (default: 4096)",
    )
    p.add_argument(
        "--iters",
        type=bounded(1),
        default=20,
        help="timed runs per row (the CPU comparison makes max(3, iters/4); default 20)",
    )
    p.add_argument(
        "--warmup",
        type=bounded(0),
        default=5,
        help="untimed runs before timing, per row (the CPU comparison makes one; default 5)",
    )
    p.add_argument(
        "--dtypes",
        type=parse_dtypes,
        default=None,
        help="matmul only: fp64, fp32, tf32, fp16, fp16-reduced, bf16 (default "
        "fp32,fp16,bf16). tf32 and fp16-reduced are cuBLAS modes and need CUDA; "
        "bf16-reduced is refused: PyTorch has no equivalent",
    )
    p.add_argument(
        "--accuracy-rows",
        type=bounded(1),
        default=None,
        help="matmul only: rows of C checked against f64 (default 16)",
    )
    p.add_argument(
        "--no-cpu",
        action="store_true",
        default=None,
        help="matmul only: on a GPU, skip the fp32 CPU comparison",
    )
    p.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the JSON result to FILE (parent folders are created)",
    )
    args = p.parse_args(argv)
    matmul_only = [
        f
        for f, v in [
            ("--dtypes", args.dtypes),
            ("--accuracy-rows", args.accuracy_rows),
            ("--no-cpu", args.no_cpu),
        ]
        if v is not None
    ]
    if args.experiment != "matmul" and matmul_only:
        p.error(f"{', '.join(matmul_only)}: for --experiment matmul only")
    args.dtypes = args.dtypes or [PRECISIONS[d] for d in DEFAULT_DTYPES]
    args.accuracy_rows = args.accuracy_rows or 16
    args.no_cpu = bool(args.no_cpu)
    return args


def import_torch():
    # torch warns at import when numpy is missing; nothing here uses numpy. And torch >= 2.9
    # calls allow_tf32 deprecated: see GemmMode for why it is still the one to use.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    warnings.filterwarnings("ignore", message=".*new API settings to control TF32")
    try:
        import torch
    except Exception as e:
        raise Failure(
            f"cannot import torch ({first_line(e)}); run through `just pytorch`, "
            "which makes a Python environment with it"
        ) from e
    return torch


def run(args: argparse.Namespace) -> None:
    torch = import_torch()
    device, info = select_device(torch, args.device)
    experiment = {"matmul": experiment_matmul, "cpu_vs_gpu": experiment_cpu_vs_gpu}
    body = experiment[args.experiment](torch, args, device, info)
    if args.output:
        write_json_atomic(
            args.output,
            {
                "schema_version": SCHEMA_VERSION,
                "experiment": args.experiment,
                "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                "command": command_line(),
                "environment": environment(torch),
                "device": info,
                args.experiment: body,
            },
        )
        print(f"wrote {args.output}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Exit codes as src/cli.rs: 0, 1 for a failed run, 2 for bad arguments."""
    args = parse_args(argv)
    try:
        run(args)
    except Failure as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # no traceback for users: one line, as the Rust programs
        print(f"error: {type(e).__name__}: {first_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
