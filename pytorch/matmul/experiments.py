"""The two experiments, as experiments/matmul.rs and experiments/cpu_vs_gpu.rs: each checks
that its size fits and its output can be written, makes the inputs, runs its rows, prints
its tables, and returns its result body (the schema's `matmul` or `cpu_vs_gpu`) with
every row it ran, so that the caller can tell whether some failed."""

from __future__ import annotations

import sys

from common.environment import cpu_model
from common.formulas import matmul_flops
from common.memory import check_fits
from common.precisions import PRECISIONS, check_dtypes
from common.results import check_writable
from matmul.rows import Inputs, fp32_median, run_cpu_fp32, run_rows
from common.table import print_rows
from common.timing import Plan, cpu_plan


def experiment_matmul(torch, args, device, info) -> tuple[dict, list[dict]]:
    n, plan, precisions = args.size, Plan(args.warmup, args.iters), args.dtypes
    on_gpu = device.type == "cuda"
    check_dtypes(torch, precisions, on_gpu)
    compare_cpu = on_gpu and not args.no_cpu
    check_host = not args.skip_host_memory_check
    check_fits(torch, device, n, precisions, check_host)
    if compare_cpu:
        check_fits(torch, torch.device("cpu"), n, [PRECISIONS["fp32"]], check_host)
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
    body = {
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
    return body, [*rows, cpu_row]


def experiment_cpu_vs_gpu(torch, args, device, info) -> tuple[dict, list[dict]]:
    n, gpu_plan = args.size, Plan(args.warmup, args.iters)
    cpu = cpu_plan(gpu_plan.iters)
    fp32 = [PRECISIONS["fp32"]]
    on_gpu = device.type == "cuda"
    check_host = not args.skip_host_memory_check
    check_fits(torch, torch.device("cpu"), n, fp32, check_host)
    if on_gpu:
        check_fits(torch, device, n, fp32, check_host)
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
    body = {
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
    return body, [cpu_row, gpu_row]


EXPERIMENTS = {"matmul": experiment_matmul, "cpu_vs_gpu": experiment_cpu_vs_gpu}
