"""The block's terminal tables, as src/export/views/block.rs shows Candle's: per phase the
end-to-end rows with their speedups beside the matmul-only and Amdahl's, where the time
goes by op class, the single-kernel forms against the composed ones, and the line that
answers the reference lab's caveat with this run's numbers."""

from __future__ import annotations

from blockparts import CLASSES
from formulas import MIB
from table import print_table

CLASS_NAMES = ["linear", "attention matmul", "norm", "softmax", "rotary", "element-wise"]


def times(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def rows_table(title: str, ph: dict, ceiling: bool, file) -> None:
    header = ["precision", "median ms", "tokens/s", "GFLOP/s", "GB/s", "% copy", "x fp32"]
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
                f"{m['end_to_end']['median_ms']:.3f}",
                f"{m['tokens_per_s']:.0f}",
                f"{m['gflop_per_s']:.1f}",
                f"{m['gb_per_s']:.1f}",
                f"{pct:.0f}%" if ceiling and pct is not None else "-",
                times(m["speedup_vs_fp32"]),
                times(m["matmul_speedup_vs_fp32"]),
                times(m["amdahl_speedup_vs_fp32"]),
                f"{100 * m['matmul_share']:.0f}%",
                f"{m['parts_sum_ms'] / m['end_to_end']['median_ms']:.2f}",
                "-" if m["peak_bytes"] is None else f"{m['peak_bytes'] / MIB:.1f}",
                f"{m['accuracy']['max_rel_err']:.2e}",
            ]
        )
    print_table(title, header, lines, file=file)


def parts_table(ph: dict, file) -> None:
    """Each class's median per block call and its share of the parts' sum."""
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
            share = 100 * p["median_ms"] / m["parts_sum_ms"] if p else 0
            cells.append(f"{p['median_ms']:.3f} ({share:.0f}%)" if p else "-")
        cells += [f"{m['parts_sum_ms']:.3f}", f"{m['end_to_end']['median_ms']:.3f}"]
        lines.append(cells)
    title = f"where the time goes, {ph['phase']}: ms per block call (share of the sum)"
    print_table(title, header, lines, file=file)


def fused_table(fused: list[dict], file) -> None:
    header = ["op", "precision", "fused ms", "composed ms", "composed / fused"]
    header += ["fused MiB", "composed MiB"]
    lines = [
        [
            f["op"],
            f["precision"],
            f"{f['fused']['median_ms']:.3f}",
            f"{f['composed']['median_ms']:.3f}",
            f"{f['composed_over_fused']:.2f}x",
            f"{f['fused_bytes'] / MIB:.1f}",
            f"{f['composed_bytes'] / MIB:.1f}",
        ]
        for f in fused
    ]
    title = "PyTorch's single kernels against the same math from primitive ops (prefill shapes)"
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


def show(body: dict, device: dict, notes: list[str], file=None) -> None:
    """Every table, then the sizes note, the caveat's lines and `notes`."""
    s = body["shape"]
    for ph in body["phases"]:
        tokens = 1 if ph["phase"] == "decode" else s["seq"]
        title = (
            f"block {ph['phase']}: batch {s['batch']} x {tokens} tokens, hidden {s['hidden']}, "
            f"{s['heads']} heads, MLP {s['mlp']} on {device['label']} ({device['name']}), "
            "PyTorch"
        )
        rows_table(title, ph, body["copy_ceiling_gb_per_s"] is not None, file)
        parts_table(ph, file)
    if body["fused"]:
        fused_table(body["fused"], file)
    for line in [body["sizes_note"], *caveat(body), *notes]:
        print(line, file=file)
