"""The block experiment's core, as src/bench/block/mod.rs: per phase (prefill, decode)
and precision, the block end to end with the clock's rules, its FLOPs and least bytes
(blockformulas), each op class timed alone (blockparts), the speedup over fp32 beside the
matmul-only speedup and Amdahl's prediction, decode's bandwidth against a device copy
measured here, and the output against an f64 run of the same weights on the CPU. Then
PyTorch's single-kernel RMSNorm and softmax against the composed math. Each row stands
alone: an error in one is that row's (status "error" and its line); the others run.
Every time, share and rate is one clock's (rate_ms: CUDA events on a GPU, the wall clock
on the CPU), recorded as the body's time_source; each row's GB/s is held against a copy
of the row's own footprint, measured beside it."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from blockformulas import BlockDims, amdahl, block_bytes, block_flops, copy_bytes, gb_per_s
from blockmodel import DECODE, PREFILL, Block, reference_outputs
from blockparts import MATMUL_CLASSES, fused_rows, rate_ms, time_parts, timed
from blockweights import RMS_EPS, ROPE_THETA
from precisions import GemmMode, torch_dtype
from rows import baseline, row_error
from stats import relative_errors
from timing import Clock


def dims(shape) -> BlockDims:
    return BlockDims(
        batch=shape.batch,
        seq=shape.seq,
        hidden=shape.hidden,
        kv_width=shape.kv_width,
        mlp=shape.mlp,
    )


def needs(shape) -> tuple[int, int]:
    """(host, device) bytes, as mod.rs needs(): the f32 weights and inputs on the host and
    their f64 copy for the reference; on the device one precision's block at f32 with a
    call's activations (the scores, batch x heads x seq x seq, the largest), decode's
    preallocated cache and the two buffers of a row's ceiling copy."""
    d = dims(shape)
    inputs = d.batch * d.seq * (d.hidden + 2 * d.kv_width) + d.batch * d.hidden
    host = (d.params() + inputs) * (4 + 8)
    scores = d.batch * shape.heads * d.seq * d.context(False) * 4
    cache = 2 * d.batch * d.context(True) * d.kv_width * 4
    copy = max(block_bytes(d, False, 4), block_bytes(d, True, 4))
    activations = 4 * (d.batch * d.seq * (6 * d.hidden + 3 * d.mlp)) + 3 * scores + cache + copy
    return host, (d.params() + inputs) * 4 + activations


def copy_ceiling(torch, clock, device, row_bytes: int, plan) -> tuple[int, float]:
    """(bytes moved, GB/s) of a plain copy on the device of a row's footprint, as mod.rs
    copy_ceiling: two buffers of half the row's least bytes, made (and written) first, one
    read and one written, so the copy sits where the row's bytes do (cache or DRAM). On a
    GPU dst.copy_(src) is a device-to-device memcpy (Candle's cuMemcpyDtoD); on the CPU it
    is torch's copy of a uint8 tensor (Candle's is a one-thread copy_from_slice)."""
    n = copy_bytes(row_bytes)
    src = torch.ones(n, dtype=torch.uint8, device=device)
    dst = torch.full((n,), 2, dtype=torch.uint8, device=device)
    t = timed(clock, plan, lambda: dst.copy_(src))
    return 2 * n, gb_per_s(2 * n, rate_ms(t))


def largest_cache(torch, device) -> int | None:
    """The largest cache in front of the device's memory, as src/device.rs largest_cache:
    the GPU's L2 (torch's device properties), or the CPU's last level from sysfs (data and
    unified caches); None where neither says."""
    if device.type == "cuda":
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            sizes.append((level, parse_cache_size((index / "size").read_text())))
        except (OSError, ValueError):
            continue
    sizes = [x for x in sizes if x[1] is not None]
    return max(sizes)[1] if sizes else None


def parse_cache_size(text: str) -> int | None:
    """sysfs cache sizes: "48K", "2048K", "300M", or plain bytes (src/env.rs's)."""
    t = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    digits = t[:-1] if scale > 1 else t
    return int(digits) * scale if digits.isdigit() else None


def failed(p, error: str) -> dict:
    print(f"block {p.name}: row failed, recorded with its error ({error})", file=sys.stderr)
    return {"precision": p.name, "status": "error", "error": error, "measured": None}


def flat(t) -> list[float]:
    return t.double().cpu().flatten().tolist()


def measure(torch, clock, block, ph: dict, p, plan, reference, outputs) -> dict:
    """One precision in one phase (mod.rs measure): the schema's BlockMeasured. The
    checked output is kept in `outputs` (f32, for --save-output)."""
    phase, dtype, device = ph["phase"], block.dtype, block.device
    aux, x = block.aux(phase, dtype), block.input(phase)
    # Decode's preallocated cache, made off the clock; each call rewinds it.
    cache = block.decode_cache() if phase == DECODE else None
    base = baseline(torch, device, dtype)  # None on the CPU: no peak there
    if base is not None:
        clock.sync()
        torch.cuda.reset_peak_memory_stats(device)
    print(f"{phase} {p.name}: warmup {plan.warmup}, iters {plan.iters}", file=sys.stderr)
    end_to_end = timed(clock, plan, lambda: block.forward(x, phase, aux, cache=cache))
    peak = torch.cuda.max_memory_allocated(device) - base if base is not None else None

    # Accuracy from one more, untimed, call.
    y = block.forward(x, phase, aux, cache=cache)
    if phase == PREFILL:
        y = y[:, : reference[PREFILL].shape[1]]
    got = flat(y)
    max_err, mean_err = relative_errors(got, flat(reference[phase]))
    outputs[f"y_{phase}_{p.name}"] = y.float().cpu()

    parts = time_parts(torch, clock, block, phase, aux, dtype, plan)
    matmul = sum(rate_ms(x) for x in parts if x["class"] in MATMUL_CLASSES)
    parts_sum = sum(rate_ms(x) for x in parts)
    ms = rate_ms(end_to_end)
    d = dims(block.shape)
    bytes_min = block_bytes(d, phase == DECODE, y.element_size())
    gb = gb_per_s(bytes_min, ms)
    copied, ceiling = copy_ceiling(torch, clock, device, bytes_min, plan)
    return {
        "end_to_end": end_to_end,
        "bytes_min": bytes_min,
        "tokens_per_s": ph["tokens"] / (ms * 1e-3),
        "gflop_per_s": ph["flops"] / (ms * 1e-3) / 1e9,
        "gb_per_s": gb,
        "copy_bytes": copied,
        "copy_ceiling_gb_per_s": ceiling,
        "pct_of_copy_ceiling": 100.0 * gb / ceiling,
        "peak_bytes": peak,
        "parts": parts,
        "parts_sum_ms": parts_sum,
        "matmul_share": matmul / parts_sum,
        # Filled once the phase's fp32 row is known.
        "speedup_vs_fp32": None,
        "matmul_speedup_vs_fp32": None,
        "amdahl_speedup_vs_fp32": None,
        "accuracy": {
            "tokens_checked": len(got) // block.shape.hidden,
            "max_rel_err": max_err,
            "mean_rel_err": mean_err,
        },
    }


def matmul_ms(m: dict) -> float:
    """The matmul classes' time in a measured row (the rates' time source)."""
    return sum(rate_ms(x) for x in m["parts"] if x["class"] in MATMUL_CLASSES)


def fill_vs_fp32(ph: dict) -> None:
    """Each row against the phase's fp32 row (mod.rs fill_vs_fp32): end to end, matmuls
    alone, and Amdahl's prediction from fp32's matmul share and the matmul-only speedup."""
    fp32 = next(
        (r["measured"] for r in ph["rows"] if r["precision"] == "fp32" and r["measured"]), None
    )
    if fp32 is None:
        return
    for m in (r["measured"] for r in ph["rows"] if r["measured"]):
        s = matmul_ms(fp32) / matmul_ms(m)
        m["speedup_vs_fp32"] = rate_ms(fp32["end_to_end"]) / rate_ms(m["end_to_end"])
        m["matmul_speedup_vs_fp32"] = s
        m["amdahl_speedup_vs_fp32"] = amdahl(fp32["matmul_share"], s)


@dataclass
class Run:
    """What every row of a run shares."""

    torch: object
    clock: Clock
    device: object
    host: dict
    shape: object
    cfg: object
    reference: dict
    phases: list[dict]
    fused: list[dict] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)


def run_block(torch, device, host, shape, cfg) -> tuple[dict, list[dict], dict]:
    """Runs the experiment: the body (the schema's BlockResults), every row, and the
    checked outputs by name (y_<phase>_<precision>, f32). `cfg` holds accuracy_seq,
    plan, precisions, phases, seed and sizes_note."""
    torch.manual_seed(cfg.seed)  # the parts' random tensors
    clock, d = Clock(torch, device), dims(shape)
    print(f"block: the f64 reference on the CPU ({cfg.accuracy_seq} tokens)", file=sys.stderr)
    with torch.inference_mode():
        reference = reference_outputs(torch, host, shape, cfg.accuracy_seq)
        phases = [
            {
                "phase": phase,
                "tokens": d.tokens(phase == DECODE),
                "context": d.context(phase == DECODE),
                "flops": block_flops(d, phase == DECODE),
                "rows": [],
            }
            for phase in cfg.phases
        ]
        run = Run(torch, clock, device, host, shape, cfg, reference, phases)
        for p in cfg.precisions:
            with GemmMode(torch, p):
                run_precision(run, p)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    for ph in phases:
        fill_vs_fp32(ph)
    body = {
        "shape": {
            "batch": shape.batch,
            "seq": shape.seq,
            "hidden": shape.hidden,
            "heads": shape.heads,
            "kv_heads": shape.kv_heads,
            "head_dim": shape.head_dim,
            "mlp": shape.mlp,
            "rms_eps": RMS_EPS,
            "rope_theta": ROPE_THETA,
            "accuracy_seq": cfg.accuracy_seq,
        },
        "sizes_note": cfg.sizes_note,
        "warmup": cfg.plan.warmup,
        "iters": cfg.plan.iters,
        "seed": cfg.seed,
        "params": d.params(),
        "time_source": "gpu_median_ms" if device.type == "cuda" else "median_ms",
        "cache_bytes": largest_cache(torch, device),
        "phases": phases,
        "fused": run.fused,
    }
    return body, [r for ph in phases for r in ph["rows"]], run.outputs


def run_precision(run: Run, p) -> None:
    """One precision's rows in every phase, and its fused rows (with a prefill). The error
    of a row is kept as its line; the exception, and the tensors its frames hold, are let
    go before the next row (as rows.run_rows)."""
    torch, error, block = run.torch, None, None
    try:
        block = Block(torch, run.host, run.shape, torch_dtype(torch, p), run.device)
    except Exception as e:
        error = row_error(e)
    if error is not None:
        for ph in run.phases:
            ph["rows"].append(failed(p, error))
        return
    plan = run.cfg.plan
    for ph in run.phases:
        error = None
        try:
            row = {"precision": p.name, "status": "ok", "error": None}
            row["measured"] = measure(
                torch, run.clock, block, ph, p, plan, run.reference, run.outputs
            )
        except Exception as e:
            error = row_error(e)
        if error is not None:
            row = failed(p, error)
            if run.device.type == "cuda":
                torch.cuda.empty_cache()
        ph["rows"].append(row)
    if any(ph["phase"] == PREFILL for ph in run.phases):
        error = None
        try:
            run.fused.extend(fused_rows(torch, run.clock, block, p.name, block.dtype, plan))
        except Exception as e:
            error = row_error(e)
        if error is not None:
            print(f"{p.name}: fused against composed failed ({error})", file=sys.stderr)
