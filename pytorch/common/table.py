"""The terminal tables: any table (print_table: a title, a header and lines, the first
column left-aligned, the others right-aligned, a short line filled with blanks), and the
matmul reference's table of benchmark rows, as src/export/views/matmul.rs rows_table: one
line per precision, or its status and error when it was not measured, with each row's
ratio to fp32 timed side by side (and the note that says what it is)."""

from __future__ import annotations

from common.timing import samples_ms


def beside(r: dict, source: str) -> str:
    """The ratio to fp32 timed in turn with it, in its own clock's column ("x fp32" for the
    wall clock, "GPU x fp32" for CUDA events) with its interval, "0.66x [0.64, 0.67]";
    "-" in the other column and where the row has none (fp32's own row among them: the
    twin writes no ratio of two rows sampled apart)."""
    s = r.get("vs_fp32_side_by_side")
    if s is None or s["time_source"] != source:
        return "-"
    i = s["interval"]
    if i is None:
        return f"{s['speedup']:.2f}x (direction only)"
    return f"{s['speedup']:.2f}x [{i['lo']:.2f}, {i['hi']:.2f}]"


def vs_fp32_note(rows: list[dict]) -> str | None:
    """What the "x fp32" columns are, in src/export/views/matmul.rs vs_fp32_note's words;
    None where no row was timed beside fp32."""
    s = next((r["vs_fp32_side_by_side"] for r in rows if r.get("vs_fp32_side_by_side")), None)
    if s is None:
        return None
    gpu = s["time_source"] == "gpu_median_ms"
    rounds = len(samples_ms(s["row"]))
    # Rust's other column holds the rows' own medians' ratio; the twin writes none.
    wall = "; x fp32 (wall): none, the twin writes no ratio of rows sampled apart" if gpu else ""
    return (
        f"{'GPU x fp32' if gpu else 'x fp32'}: the row and fp32 timed in turn (A B A B, "
        f"{rounds} rounds after each row's own sampling), fp32's median over the row's "
        f"[its 95% bootstrap interval]{wall}"
    )


def print_rows(title: str, rows: list[dict]) -> None:
    header = [
        "precision",
        "median ms",
        "GFLOP/s",
        "x fp32",
        "IQR/median",
        "GPU ms",
        "GPU x fp32",
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
                beside(r, "median_ms"),
                spread + (" noisy" if r["wall_ms"]["noisy"] else ""),
                opt(r["gpu_median_ms"], 3),
                beside(r, "gpu_median_ms"),
                opt(r["pct_of_datasheet"], 1),
                opt(r["peak_mib"], 1),
                f"{r['payload_mib']:.1f}",
                f"{r['accuracy']['max_rel_err']:.2e}",
            ]
        )
    print_table(title, header, lines)


def print_table(title: str, header: list[str], lines: list[list[str]], file=None) -> None:
    """`=== title ===`, then the header and the lines in aligned columns, then a blank
    line, on `file` (standard output by default)."""
    padded = [line + [""] * (len(header) - len(line)) for line in lines]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *padded)]
    print(f"=== {title} ===", file=file)
    for line in [header, *lines]:
        cells = [line[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        print("  ".join(cells).rstrip(), file=file)
    print(file=file)
