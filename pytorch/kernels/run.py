"""The kernels experiment's rows with PyTorch, as src/bench/kernels: per op, case and
precision, random inputs made off the clock, the row's ceiling (Candle's bound for the row
from --bounds, the bandwidth ladder at the row's footprint; without it, a copy of the row's
bytes between two preallocated buffers, PyTorch's own and labelled so), then PyTorch's op
and the composed form each timed as Candle's are, K calls a sample with the clock's own
cost subtracted (timing.time_calls), against the ceiling, with their first rows checked
against an f64 computation. The cases and the bytes are the Rust side's, so `compare` pairs
the two files row by row."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path

from common.errors import Failure, first_line
from common.precisions import torch_dtype
from common.timing import Plan, rate_ms, time_calls
from kernels.ops import CALLS, first_rows, implementations, normwise, reference, run_op
from kernels.ops import shape, traffic

LARGE_COLS = 4096
CASES = ["block-prefill", "block-decode", "smollm2-prefill", "smollm2-decode", "large", "dram"]
# bench::kernels::DRAM: each f32 tensor half the ladder's memory footprint (four times the
# last cache, at least MIN_MEMORY_FOOTPRINT), fp32 only.
DRAM = "dram"
MIN_MEMORY_FOOTPRINT = 256 << 20
# bench::block's default layers: (hidden, heads, mlp, seq) on a GPU and on the CPU.
GPU_SHAPE, CPU_SHAPE = (4096, 32, 11008, 2048), (512, 8, 1376, 128)
# What the own ceiling is, in its `call` and the table: not the ladder Candle's rows meet.
OWN_CEILING = "pytorch copy, not the ladder"
CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


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


def cache_size(text: str) -> int | None:
    """src/env.rs parse_cache_size: "48K", "2048K", "300M", or plain bytes."""
    t = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    return int(digits) * scale if digits.isdigit() else None


def last_level_cache(root: Path = CACHE_SYSFS) -> int | None:
    """src/env.rs cpu_last_level_cache's bytes: the highest level's data or unified cache."""
    best = None
    try:
        entries = list(root.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            if (entry / "type").read_text().strip() == "Instruction":
                continue
            level, size = int((entry / "level").read_text()), (entry / "size").read_text()
        except (OSError, ValueError):
            continue
        if cache_size(size) is not None:
            best = max(best or (0, 0), (level, cache_size(size)))
    return best[1] if best else None


def default_large_mib(on_gpu: bool) -> int:
    """bench::kernels::default_large_mib: 1024 on a GPU; on the CPU large_mib_for this
    machine's last-level cache."""
    return 1024 if on_gpu else large_mib_for(last_level_cache())


def large_mib_for(llc: int | None) -> int:
    """Twice the last-level cache `llc` (a copy's two tensors: four times it), within
    16..=128 (past 128 Candle's 16-bit forms take seconds a call; a larger last level leaves
    the case in it, and its bound's level says so); 64 where the cache is unknown."""
    return min(max((2 * llc) >> 20 if llc else 64, 16), 128)


def largest_cache(torch, device) -> int | None:
    """device::largest_cache's bytes: the GPU's L2 (as torch reports it), else the CPU's
    last-level cache."""
    if device.type == "cuda":
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    return last_level_cache()


def keep_freed_memory() -> bool:
    """src/memory/held.rs keep_freed_memory: glibc's malloc serves every block from its
    heap and keeps what is freed (mallopt M_MMAP_MAX 0, M_TRIM_THRESHOLD -1), so that an
    output past 32 MiB (PyTorch's CPU allocator takes it from malloc) is memory the process
    holds, not pages faulted in on each call. False where there is no glibc mallopt."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # glibc's malloc.h
    return mallopt(m_mmap_max, 0) == 1 and mallopt(m_trim_threshold, -1) == 1


def size(n: int) -> str:
    """src/units.rs size(): "4.0 MiB" as "4 MiB" when whole, "1.5 GiB", "512 B"."""
    value, unit, units = float(n), 0, ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024.0 and unit < len(units) - 1:
        value, unit = value / 1024.0, unit + 1
    return f"{value:.0f} {units[unit]}" if value.is_integer() else f"{value:.1f} {units[unit]}"


def dram_rows_for(cache: int | None) -> int:
    """bench::kernels::dram_case's rows: each f32 tensor of LARGE_COLS columns half of
    ladder::memory_footprint (four times the last cache `cache`, at least 256 MiB)."""
    tensor = max(4 * (cache or 0), MIN_MEMORY_FOOTPRINT) // 2
    return max(tensor // 4 // LARGE_COLS, 1)


def large_plan(plan: Plan) -> Plan:
    """bench::kernels::large_plan: at most one warm-up and three timed runs."""
    return Plan(warmup=min(plan.warmup, 1), iters=min(plan.iters, 3))


def cases(
    on_gpu: bool, names: list[str], seq: int | None, large_mib: int, dram_rows: int
) -> list[Case]:
    """bench::kernels::cases and dram_case: the block's layer, SmolLM2-135M's, the large
    case and the dram case (`dram_rows` x LARGE_COLS)."""
    hidden, heads, mlp, default_seq = GPU_SHAPE if on_gpu else CPU_SHAPE
    seq = seq or default_seq
    block = (
        f"the block experiment's layer (hidden {hidden}, {heads} heads, MLP {mlp}), {seq} tokens"
    )
    smol = f"SmolLM2-135M (hidden 576, 9 heads, 3 KV heads, MLP 1536), {seq} tokens"
    rows = max(large_mib * (1 << 20) // 4 // LARGE_COLS, 1)
    large = (
        f"{large_mib} MiB per f32 tensor ({rows} x {LARGE_COLS}): meant to be past the caches, "
        "at most 3 timed runs"
    )
    table = {
        "block-prefill": (block, seq, hidden, heads, mlp, seq),
        "block-decode": (block, 1, hidden, heads, mlp, seq + 1),
        "smollm2-prefill": (smol, seq, 576, 9, 1536, seq),
        "smollm2-decode": (smol, 1, 576, 9, 1536, seq + 1),
        "large": (large, rows, LARGE_COLS, 1, LARGE_COLS, LARGE_COLS),
        DRAM: (
            f"{size(dram_rows * LARGE_COLS * 4)} per f32 tensor ({dram_rows} x {LARGE_COLS}): "
            "a copy's two tensors are the ladder's memory footprint, past every cache; fp32 "
            "only, at most 3 timed runs",
            dram_rows,
            LARGE_COLS,
            1,
            LARGE_COLS,
            LARGE_COLS,
        ),
    }
    return [Case(n, *table[n]) for n in names]


def planned(op: str, case: Case, p) -> dict:
    """A row's identity and least bytes, known before anything runs (--bounds checks them)."""
    dims = shape(op, case)
    n = 1
    for d in dims:
        n *= d
    read, written = traffic(op, n, dims[-1], p.element_bytes)
    return {
        "op": op,
        "case": case.name,
        "precision": p.name,
        "shape": dims,
        "elements": n,
        "bytes_read": read,
        "bytes_written": written,
        "bytes_moved": read + written,
    }


def planned_rows(cfg) -> list[dict]:
    """Every row of the run, in its order of loops (op outermost, as Candle's); the dram
    case's at fp32 only."""
    return [
        planned(op, c, p)
        for op in cfg.ops
        for c in cfg.cases
        for p in cfg.precisions
        if c.name != DRAM or p.name == "fp32"
    ]


def own_ceiling(torch, clock, device, plan, moved: int, clock_ms: float) -> dict:
    """A copy of the row's bytes (half read, half written) between two preallocated buffers,
    PyTorch's copy_ on its threads, timed as the variants are: the ceiling without --bounds,
    labelled as not the ladder Candle's rows are held against."""
    copied = max(moved // 2, 1)
    src = torch.ones(copied, dtype=torch.uint8, device=device)
    dst = torch.zeros(copied, dtype=torch.uint8, device=device)
    t, k, ms = time_calls(clock, plan, lambda: dst.copy_(src), clock_ms)
    return {
        "call": f"{OWN_CEILING}: dst.copy_(src) (uint8, preallocated), {k} calls a sample",
        "bytes_copied": copied,
        "time_ms": ms,
        "time_source": "gpu_median_ms" if t["gpu_median_ms"] is not None else "median_ms",
        "gb_per_s": 2 * copied / (ms * 1e-3) / 1e9,
        **t,
    }


def measure_variant(torch, clock, plan, row: dict, imp: str, inputs, want, ceiling_gb, c_ms):
    """One implementation: timed by time_calls (the clock covers K calls and the
    synchronization after them; `c_ms`, its own cost, comes off), its rate against
    `ceiling_gb`, then one more call's first rows checked against `want` off the clock."""
    x, y, w = inputs
    op, width = row["op"], row["shape"][-1]
    t, k, ms = time_calls(clock, plan, lambda: run_op(torch, op, imp, x, y, w), c_ms)
    got = first_rows(run_op(torch, op, imp, x, y, w), width).double().cpu().flatten().tolist()
    rate = row["bytes_moved"] / (ms * 1e-3) / 1e9
    max_err, mean_err = normwise(got, want)
    return {
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
        "calls_per_sample": k,
        **t,
    }


def measure_row(torch, clock, device, row: dict, p, plan, ceiling, clock_ms) -> dict:
    """One row: its inputs, its ceiling (`ceiling`, Candle's from --bounds, or None: the
    own copy measured now), and each implementation, failed ones recorded with their error."""
    op, dims = row["op"], row["shape"]
    width, dtype = dims[-1], torch_dtype(torch, p)
    scale = 3.0 if op == "softmax" else 1.0
    x = (torch.randn(*dims, device=device) * scale).to(dtype)
    y = torch.randn(*dims, device=device).to(dtype) if op in ("swiglu", "add") else x
    w = (torch.randn(width, device=device) * 0.1 + 1.0).to(dtype)
    want = first_rows(reference(torch, op, first_rows(x, width), first_rows(y, width), w), width)
    want = want.flatten().tolist()
    if ceiling is None:
        ceiling = own_ceiling(torch, clock, device, plan, row["bytes_moved"], clock_ms)
    variants = []
    # bench::kernels::implementations_at: no composed form at the dram case.
    for imp in [i for i in implementations(op) if row["case"] != DRAM or i != "composed"]:
        v = {"implementation": imp, "call": CALLS[(op, imp)], "status": "ok", "error": None}
        try:
            v["measured"] = measure_variant(
                torch, clock, plan, row, imp, (x, y, w), want, ceiling["gb_per_s"], clock_ms
            )
        except (Failure, RuntimeError) as e:
            why = first_line(e)
            print(f"{op} {row['case']} {p.name} {imp}: failed ({why})", file=sys.stderr)
            v |= {"status": "error", "error": why, "measured": None}
        variants.append(v)
    return {**row, "ceiling": ceiling, "variants": variants}


def run_kernels(torch, clock, device, cfg, bounds: dict | None, clock_ms: float):
    """The body (schema's `kernels`), the failed variants' names and the variant count.
    `bounds`: each row's ceiling by (op, case, precision), from --bounds; None: own copies."""
    rows = []
    # On a GPU the outputs come from the device's pool: not said (null).
    held = keep_freed_memory() if device.type == "cpu" else None
    by_name = {p.name: p for p in cfg.precisions}
    for row in planned_rows(cfg):
        plan = large_plan(cfg.plan) if row["case"] in ("large", DRAM) else cfg.plan
        key = (row["op"], row["case"], row["precision"])
        print(" ".join(key), file=sys.stderr)
        ceiling = bounds[key] if bounds is not None else None
        p = by_name[row["precision"]]
        rows.append(measure_row(torch, clock, device, row, p, plan, ceiling, clock_ms))
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
        "cache_bytes": largest_cache(torch, device),
        "telemetry": {
            "source": None,
            "unavailable_reason": "not read by the PyTorch twin",
        },
        "cases": [c.as_json() for c in cfg.cases],
        "rows": rows,
        # The clock's own cost per sample, subtracted from every K-call sample (the
        # ladder's `clock_overhead_ms`; not in the schema's kernels body yet).
        "clock_overhead_ms": clock_ms,
        "freed_memory_kept": held,
    }
    return body, failed, sum(len(r["variants"]) for r in rows)
