"""The terminal tables: any table (print_table: a title, a header and lines, the first
column left-aligned, the others right-aligned, a short line filled with blanks), and the
matmul reference's table of benchmark rows, as src/bench/matmul/mod.rs rows_table: one line per
precision, or its status and error when it was not measured."""

from __future__ import annotations


def print_rows(title: str, rows: list[dict]) -> None:
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
