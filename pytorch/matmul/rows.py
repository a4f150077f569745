"""One benchmark row per precision, as src/bench/square/mod.rs: the shared random inputs and their f64
reference, measuring one row (timing, peak memory, accuracy, derived rates), running a
list of rows, and the fp32 comparison on the CPU beside a GPU run."""

from __future__ import annotations

import sys

from common.errors import Failure
from common.formulas import MIB, accuracy_rows, gflops, payload_bytes
from common.peaks import datasheet_tflops
from common.precisions import PRECISIONS, GemmMode, torch_dtype
from common.rows import baseline, row_error
from common.stats import relative_errors, summarize
from common.timing import Clock, cpu_plan


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
        return (
            "torch.cuda.max_memory_allocated above the use before the inputs, cuBLAS "
            "workspace excluded (allocated before the baseline), as Candle's pool peak"
        )
    return (
        "not measured: PyTorch keeps no peak of its CPU allocations "
        "(max_memory_allocated is CUDA only)"
    )


def run_rows(torch, device, gpu_name, n, plan, precisions, inputs) -> list[dict]:
    """One schema Row per precision. An error in a row (out of memory, a GEMM mode cuBLAS
    refuses, anything) ends that row only, as src/bench/square/mod.rs run_rows: the row keeps status
    "error" and the error's line, and the next row runs."""
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
        failed = None
        try:
            with GemmMode(torch, p):
                row |= measure(torch, device, gpu_name, n, plan, p, inputs)
        except Exception as e:
            failed = (row_error(e), isinstance(e, torch.cuda.OutOfMemoryError))
        if failed is not None:
            # Out here the exception, and the row's tensors its frames held, are gone.
            error, oom = failed
            what = "out of device memory" if oom else "failed"
            print(f"{p.name}: {what}, skipped ({error})", file=sys.stderr)
            row |= {"status": "error", "error": error}
            if device.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(row)
    return rows


def place_inputs(inputs, dtype, device):
    """A and B in the row's dtype on its device."""
    # copy=True: storage of their own, even for f32 on the CPU, as src/bench/square/mod.rs owned_on.
    a = inputs.a.to(dtype=dtype, copy=True).to(device)
    b = inputs.b.to(dtype=dtype, copy=True).to(device)
    return a, b


def measure(torch, device, gpu_name, n, plan, p, inputs) -> dict:
    clock = Clock(torch, device)
    on_gpu = device.type == "cuda"
    dtype = torch_dtype(torch, p)
    # Peak = inputs + whatever the matmuls add, above the use before the inputs.
    base = baseline(torch, device, dtype)
    a, b = place_inputs(inputs, dtype, device)
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
