"""The block's terminal tables, as src/export/views/block.rs shows Candle's: per phase the
end-to-end rows with their speedups beside the matmul-only and Amdahl's, where the time
goes by op class, the single-kernel forms against the composed ones, and the line that
answers the reference lab's caveat with this run's numbers. Every figure of a table is one
clock's (the body's time_source: CUDA events on a GPU, the wall clock on the CPU) and its
title says which; tokens/s is through one layer, and says so."""

from __future__ import annotations

from blockparts import CLASSES, rate_ms
from formulas import MIB
from table import print_table

CLASS_NAMES = ["linear", "attention matmul", "norm", "softmax", "rotary", "element-wise"]
# The header tokens/s goes by (views/block.rs TOKENS_PER_S): a layer's rate, not a model's.
TOKENS_PER_S = "tokens/s through one layer"
CLOCKS = {"gpu_median_ms": "CUDA events", "median_ms": "the wall clock"}


def clock_clause(body: dict) -> str:
    """", times from CUDA events": what each table's title ends with."""
    return f", times from {CLOCKS[body['time_source']]}"


def times(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def rows_table(title: str, ph: dict, file) -> None:
    header = ["precision", "median ms", TOKENS_PER_S, "GFLOP/s", "GB/s", "% copy", "x fp32"]
    header += ["matmuls x fp32", "Amdahl x fp32", "matmul share", "parts / block"]
    header += ["peak MiB", "max rel err"]
    lines = []
    for row in ph["rows"]:
        m = row["measured"]
        if m is None:
            lines.append([row["precision"], f"error: {row['error'] or ''}"])
            continue
        pct = m["pct_of_copy_ceiling"]
        lines.append(
            [
                row["precision"],
                f"{rate_ms(m['end_to_end']):.3f}",
                f"{m['tokens_per_s']:.0f}",
                f"{m['gflop_per_s']:.1f}",
                f"{m['gb_per_s']:.1f}",
                "-" if pct is None else f"{pct:.0f}%",
                times(m["speedup_vs_fp32"]),
                times(m["matmul_speedup_vs_fp32"]),
                times(m["amdahl_speedup_vs_fp32"]),
                f"{100 * m['matmul_share']:.0f}%",
                f"{m['parts_sum_ms'] / rate_ms(m['end_to_end']):.2f}",
                "-" if m["peak_bytes"] is None else f"{m['peak_bytes'] / MIB:.1f}",
                f"{m['accuracy']['max_rel_err']:.2e}",
            ]
        )
    print_table(title, header, lines, file=file)


def parts_table(ph: dict, clock: str, file) -> None:
    """Each class's median per block call and its share of the parts' sum, one clock's."""
    header = ["precision", *CLASS_NAMES, "sum ms", "block ms"]
    lines = []
    for row in ph["rows"]:
        m = row["measured"]
        if m is None:
            continue
        by_class = {p["class"]: p for p in m["parts"]}
        cells = [row["precision"]]
        for c in CLASSES:
            p = by_class.get(c)
            share = 100 * rate_ms(p) / m["parts_sum_ms"] if p else 0
            cells.append(f"{rate_ms(p):.3f} ({share:.0f}%)" if p else "-")
        cells += [f"{m['parts_sum_ms']:.3f}", f"{rate_ms(m['end_to_end']):.3f}"]
        lines.append(cells)
    title = f"where the time goes, {ph['phase']}: ms per block call (share of the sum){clock}"
    print_table(title, header, lines, file=file)


def fused_table(fused: list[dict], clock: str, file) -> None:
    header = ["op", "precision", "fused ms", "composed ms", "composed / fused"]
    header += ["fused MiB", "composed MiB"]
    lines = [
        [
            f["op"],
            f["precision"],
            f"{rate_ms(f['fused']):.3f}",
            f"{rate_ms(f['composed']):.3f}",
            f"{rate_ms(f['composed']) / rate_ms(f['fused']):.2f}x",
            f"{f['fused_bytes'] / MIB:.1f}",
            f"{f['composed_bytes'] / MIB:.1f}",
        ]
        for f in fused
    ]
    title = (
        "PyTorch's single kernels against the same math from primitive ops (prefill shapes)"
        + clock
    )
    print_table(title, header, lines, file=file)


def caveat(body: dict) -> list[str]:
    """Per narrow precision, the matmuls' speedup over fp32 beside the whole block's."""
    lines = []
    for p in ["fp16", "bf16"]:
        per_phase = []
        for ph in body["phases"]:
            m = next((r["measured"] for r in ph["rows"] if r["precision"] == p), None)
            keys = ["matmul_speedup_vs_fp32", "speedup_vs_fp32", "amdahl_speedup_vs_fp32"]
            if m is None or any(m[k] is None for k in keys):
                continue
            per_phase.append(
                f"{ph['phase']}: matmuls {m[keys[0]]:.2f}x, whole block {m[keys[1]]:.2f}x "
                f"(Amdahl from the parts {m[keys[2]]:.2f}x)"
            )
        if per_phase:
            lines.append(f"{p} against fp32: {'; '.join(per_phase)}")
    return lines


def ceiling_note(body: dict) -> list[str]:
    """What "% copy" is held against, and whether decode's bytes fit in the device's
    largest cache (views/block.rs ceiling_note)."""
    decode = next((p for p in body["phases"] if p["phase"] == "decode"), None)
    rows = [r["measured"] for r in decode["rows"] if r["measured"]] if decode else []
    if not rows:
        return []
    lo, hi = min(m["bytes_min"] for m in rows), max(m["bytes_min"] for m in rows)
    lo_mib, hi_mib = f"{lo / MIB:.1f}", f"{hi / MIB:.1f}"
    moved = f"{hi_mib} MiB" if lo_mib == hi_mib else f"{lo_mib}-{hi_mib} MiB"
    cache = body["cache_bytes"]
    if cache is None:
        where = "the device's cache size is unknown"
    elif hi <= cache:
        where = (
            f"within the device's {cache / MIB:.0f} MiB largest cache: the layer and its copy "
            "both run from cache, so % copy compares cache-resident with cache-resident, not "
            "with DRAM"
        )
    elif lo > cache:
        where = f"beyond the device's {cache / MIB:.0f} MiB largest cache: both stream from memory"
    else:
        where = f"some rows within the device's {cache / MIB:.0f} MiB largest cache, some beyond"
    return [
        "% copy: each row's GB/s against a plain copy of the same footprint (two buffers of "
        "half the row's least bytes, one read, one written), measured in this run; decode "
        f"moves {moved} a call (a preallocated KV cache: the new token written in place, "
        f"nothing cached copied), {where}"
    ]


def show(body: dict, device: dict, notes: list[str], file=None) -> None:
    """Every table, then the sizes note, the ceiling's and the caveat's lines and `notes`."""
    s, clock = body["shape"], clock_clause(body)
    for ph in body["phases"]:
        tokens = 1 if ph["phase"] == "decode" else s["seq"]
        title = (
            f"block {ph['phase']}: batch {s['batch']} x {tokens} tokens, hidden {s['hidden']}, "
            f"{s['heads']} heads ({s['kv_heads']} key/value), MLP {s['mlp']} on "
            f"{device['label']} ({device['name']}), PyTorch{clock}"
        )
        rows_table(title, ph, file)
        parts_table(ph, clock, file)
    if body["fused"]:
        fused_table(body["fused"], clock, file)
    for line in [body["sizes_note"], *ceiling_note(body), *caveat(body), *notes]:
        print(line, file=file)
