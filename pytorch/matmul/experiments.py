"""The two experiments, as experiments/matmul.rs and experiments/cpu_vs_gpu.rs: what each
needs to fit (checked before anything is allocated), then its inputs, its rows, its result
body (the schema's `matmul` or `cpu_vs_gpu`) and its tables, with every row it ran, so
that the runner (common.runner) can tell whether some failed."""

from __future__ import annotations

import sys

from common.environment import cpu_model
from common.formulas import matmul_flops
from common.memory import check_fits
from common.precisions import PRECISIONS
from common.rows import failed_rows
from common.runner import Report, Session
from common.table import print_rows, vs_fp32_note
from common.timing import Plan, cpu_plan
from matmul import beside
from matmul.rows import Inputs, fp32_median, run_cpu_fp32, run_rows

FP32 = [PRECISIONS["fp32"]]


def compares_cpu(session: Session) -> bool:
    """matmul on a GPU adds the fp32 CPU row unless --no-cpu."""
    return session.on_gpu and not session.args.no_cpu


def fits(session: Session, check_host: bool) -> None:
    """Refuses a size the host or a device the run uses cannot hold."""
    torch, args, device = session.torch, session.args, session.device
    cpu = torch.device("cpu")
    if args.experiment == "matmul":
        check_fits(torch, device, args.size, args.dtypes, check_host)
        if compares_cpu(session):
            check_fits(torch, cpu, args.size, FP32, check_host)
    else:
        check_fits(torch, cpu, args.size, FP32, check_host)
        if session.on_gpu:
            check_fits(torch, device, args.size, FP32, check_host)


def speedup_line(speedup: float | None) -> str:
    return (
        f"GPU is {speedup:.1f}x faster than the CPU at fp32 "
        "(median wall time, device synchronized)"
    )


def run(session: Session) -> Report:
    """The experiment --experiment names."""
    if session.args.experiment == "matmul":
        return experiment_matmul(session)
    return experiment_cpu_vs_gpu(session)


def experiment_matmul(session: Session) -> Report:
    torch, args, device, info = session.torch, session.args, session.device, session.info
    n, plan, on_gpu = args.size, Plan(args.warmup, args.iters), session.on_gpu
    print(
        f"matmul {n}x{n}, warmup {plan.warmup}, iters {plan.iters}, on {info['label']}",
        file=sys.stderr,
    )
    inputs = Inputs(torch, n, args.accuracy_rows)
    gpu_name = info["name"] if on_gpu else None
    rows = run_rows(torch, device, gpu_name, n, plan, args.dtypes, inputs)
    # Each row's x fp32 again, timed in turn with fp32's (none without fp32).
    beside.fill(torch, device, plan, rows, inputs)
    cpu_row = run_cpu_fp32(torch, n, plan, inputs) if compares_cpu(session) else None
    device_fp32 = next((m for m in map(fp32_median, rows) if m is not None), None)
    cpu_fp32_ms = fp32_median(cpu_row) if on_gpu else device_fp32
    if cpu_row is not None:
        cpu_iters = cpu_plan(plan.iters).iters
    else:
        cpu_iters = plan.iters if not on_gpu and device_fp32 is not None else None
    speedup = None
    if on_gpu and cpu_fp32_ms is not None and device_fp32 is not None:
        speedup = cpu_fp32_ms / device_fp32

    def show(_screen, _env):  # stdout: matmul's --output is never standard output
        print_rows(f"matmul {n}x{n} on {info['label']} ({info['name']}), PyTorch", rows)
        if cpu_row is not None:
            print_rows("the same fp32 matmul on the CPU, PyTorch", [cpu_row])
        if speedup is not None:
            print(speedup_line(speedup))
        note = vs_fp32_note(rows)
        if note is not None:
            print(note)

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
    return Report(body, *failed_rows([*rows, cpu_row]), show=show)


def experiment_cpu_vs_gpu(session: Session) -> Report:
    torch, args, device, info = session.torch, session.args, session.device, session.info
    n, gpu_plan = args.size, Plan(args.warmup, args.iters)
    cpu = cpu_plan(gpu_plan.iters)
    inputs = Inputs(torch, n, 16)
    gpu_row, gpu_skipped = None, None
    if session.on_gpu:
        print(
            f"gpu fp32 {n}x{n}: warmup {gpu_plan.warmup}, iters {gpu_plan.iters}", file=sys.stderr
        )
        gpu_row = run_rows(torch, device, info["name"], n, gpu_plan, FP32, inputs)[0]
    else:
        gpu_skipped = f"no CUDA device in use ({info['chosen_because']})"
        print(f"GPU row skipped: {gpu_skipped}")
    cpu_row = run_cpu_fp32(torch, n, gpu_plan, inputs)
    cpu_ms, gpu_ms = fp32_median(cpu_row), fp32_median(gpu_row)
    speedup = cpu_ms / gpu_ms if cpu_ms is not None and gpu_ms is not None else None
    threads = torch.get_num_threads()

    def show(_screen, _env):  # stdout: matmul's --output is never standard output
        cpu_title = f"fp32 {n}x{n} on the CPU ({cpu_model()}, {threads} threads), PyTorch"
        print_rows(cpu_title, [cpu_row])
        if gpu_row is not None:
            print_rows(f"fp32 {n}x{n} on {info['label']} ({info['name']}), PyTorch", [gpu_row])
        print(speedup_line(speedup) if speedup is not None else "speedup: n/a (no GPU row)")

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
    return Report(body, *failed_rows([cpu_row, gpu_row]), show=show)
