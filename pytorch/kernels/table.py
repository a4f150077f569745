"""The kernels twin's terminal table: a title that states what the column ran under (torch's
threads, OpenMP's wait policy, the clock's cost taken off each sample) and what it is held
against (Candle's ladder from --bounds, or PyTorch's own copy, labelled as not the ladder),
one line per row, then a warning for a variant that beats its bound, as src/export/views
kernels.rs warns (a bound that is beaten is the wrong bound)."""

from __future__ import annotations

from common.table import print_table

# src/schema/ladder.rs BEATEN_PCT: within 5% is the noise of two medians.
BEATEN_PCT = 105.0


def title(label: str, version: str, threads: int, policy: str, bounds, clock_ms: float) -> str:
    against = f"Candle's ladder from {bounds}" if bounds else "a pytorch copy, not the ladder"
    return (
        f"kernels: PyTorch {version} on {label}, {threads} threads (torch.set_num_threads), "
        f"OMP_WAIT_POLICY={policy.upper()}; time per call, K calls a sample, the clock's "
        f"{clock_ms * 1e6:.0f} ns taken off each; % of {against}"
    )


def bound_cell(ceiling: dict) -> str:
    """views::ladder::bound_cell's "copy 2t L2 45.3", or the own copy's "pytorch copy 45.3"."""
    b = ceiling.get("bound")
    if b:
        return f"{b['kernel']} {b['threads']}t {b['level']} {b['gb_per_s']:.1f}"
    return f"pytorch copy {ceiling['gb_per_s']:.1f}"


def cells(r: dict) -> list[str]:
    m = {v["implementation"]: v.get("measured") for v in r["variants"]}
    own, comp = m.get("pytorch"), m.get("composed")

    def ms(x):
        return "-" if x is None else f"{x['time_ms']:.4f}"

    return [
        r["op"],
        r["case"],
        r["precision"],
        f"{r['bytes_moved'] / (1 << 20):.2f}",
        bound_cell(r["ceiling"]),
        ms(own),
        ms(comp),
        "-" if own is None else str(own["calls_per_sample"]),
        "-" if own is None else f"{own['gb_per_s']:.1f}",
        "-" if own is None else f"{own['pct_of_ceiling']:.0f}%",
    ]


def beaten(body: dict) -> list[str]:
    """Every measured variant above BEATEN_PCT of its bound."""
    return [
        f"{r['op']} {r['case']} {r['precision']} {v['implementation']} "
        f"{v['measured']['pct_of_ceiling']:.0f}%"
        for r in body["rows"]
        for v in r["variants"]
        if v.get("measured") and v["measured"]["pct_of_ceiling"] > BEATEN_PCT
    ]


def show(body: dict, heading: str, file=None) -> None:
    header = [
        "op",
        "case",
        "dtype",
        "MiB",
        "bound GB/s",
        "pytorch ms",
        "composed ms",
        "K",
        "GB/s",
        "% bound",
    ]
    print_table(heading, header, [cells(r) for r in body["rows"]], file=file)
    over = beaten(body)
    if over:
        print(
            f"warning: {len(over)} variants beat their bound by more than 5% (a bound that is "
            f"beaten is the wrong bound): {', '.join(over)}",
            file=file,
        )
