#!/usr/bin/env python3
"""summary.md of one gpu-run.sh run, from its work folder: what the run was
(and why it stopped, if it did), each step's exit code and seconds, then every
benchmark row of every JSON report (precision, median ms, GFLOP/s, peak MiB,
status) and what the peak column includes on each side. Standard library only:
the GPU machine has python3 but no jq. Rows are found by shape (an object with
"precision" and "status" or "median_ms"), wherever a report nests them; their
figures are read where each schema keeps them (`figures`). A row the GPU's
library refused as unsupported (status "unsupported", schema 2.3) is counted
apart: neither failed nor measured. A report saved partway (a run stopped after
some rows: its notes begin "partial:") is named, and a rehearsal's host-side
times (host-side.tsv: each step's time on the CPU before its first device call)
are shown.

Usage: summary.py WORK_DIR [ELAPSED_S] > summary.md
"""
import csv
import json
import sys
from pathlib import Path


def cell(value):
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def number(value, digits):
    return "-" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def rows_in(value, path=()):
    """Every benchmark row in a JSON value, with the keys that lead to it (and the
    phase of a block's rows, which sit in a list of phases)."""
    if isinstance(value, dict):
        if "precision" in value and ("status" in value or "median_ms" in value):
            yield path, value
            return
        if isinstance(value.get("phase"), str):
            path = path + (value["phase"],)
        for key, child in value.items():
            yield from rows_in(child, path + (key,))
    elif isinstance(value, list):
        for child in value:
            yield from rows_in(child, path)


MIB = 1 << 20


def figures(row):
    """A row's median ms, GFLOP/s and peak MiB, where its schema keeps them. Matmul rows
    (matmul, cpu_vs_gpu, sweep: src/schema/matmul.rs) hold `median_ms`, `gflops` and
    `peak_mib` in the row; block rows (src/schema/block.rs) under `measured`:
    `end_to_end.median_ms`, `gflop_per_s` and `peak_bytes`."""
    measured = row.get("measured")
    if isinstance(measured, dict):
        end_to_end = measured.get("end_to_end")
        median = end_to_end.get("median_ms") if isinstance(end_to_end, dict) else None
        peak = measured.get("peak_bytes")
        peak_mib = peak / MIB if isinstance(peak, (int, float)) else None
        return median, measured.get("gflop_per_s"), peak_mib
    return row.get("median_ms"), row.get("gflops"), row.get("peak_mib")


def status(row):
    """"ok", or the row's status with its reason ("error: ...", "unsupported: ...")."""
    state = row.get("status", "ok")
    return "ok" if state == "ok" else f"{state}: {row.get('error') or 'no reason given'}"


def device_name(value):
    if isinstance(value, dict):
        device = value.get("device")
        if isinstance(device, dict) and device.get("name"):
            return device["name"]
        for child in value.values():
            found = device_name(child)
            if found:
                return found
    return None


BLOCK_PEAK_NOTE = (
    "A block row's peak MiB is the peak during its end-to-end samples above the use "
    "before the block's inputs: the weights, made before, are not in it."
)

PEAK_NOTE = (
    "Peak MiB means the same on both sides: Candle's is the CUDA memory pool's high-water mark "
    "above the use before the inputs; PyTorch's is `max_memory_allocated` above its use before "
    "the inputs, with cuBLAS's workspace allocated before that baseline. Neither includes "
    "cuBLAS's workspace. The reference lab's 224/128 MiB (fp32/fp16 at 4096) are PyTorch's "
    "`max_memory_allocated` with the workspace inside: payload 192/96 MiB plus about 32 MiB."
)


def partial_notes(value):
    """The "partial: ..." notes anywhere in a report (generate's rows saved as they end)."""
    if isinstance(value, dict):
        notes = value.get("notes")
        if isinstance(notes, list):
            yield from (n for n in notes if isinstance(n, str) and n.startswith("partial:"))
        for key, child in value.items():
            if key != "notes":
                yield from partial_notes(child)
    elif isinstance(value, list):
        for child in value:
            yield from partial_notes(child)


def host_side(work):
    """summary.md's lines for a rehearsal's host-side.tsv (step, seconds, exit, what it said)."""
    path = work / "host-side.tsv"
    if not path.exists():
        return []
    out = ["", "## Host side: each step on this CPU before its first device call", "",
           "| step | seconds | exit | what it said |", "| --- | ---: | ---: | --- |"]
    for line in path.read_text().splitlines():
        cells = (line.split("\t") + ["", "", "", ""])[:4]
        out.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return out


def read_text(path):
    return path.read_text().strip() if path.exists() else ""


def main(work, elapsed=None):
    work = Path(work)
    bundle = (work / "BUNDLE").read_text().split() if (work / "BUNDLE").exists() else []
    with open(work / "steps.tsv", newline="") as f:
        steps = list(csv.DictReader(f, delimiter="\t"))
    reports = {}
    for path in sorted(work.glob("*.json")):
        try:
            reports[path.name] = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            reports[path.name] = {"unreadable": str(e)}

    kind = next((b.split("=", 1)[1] for b in bundle if b.startswith("kind=")), "?")
    device = next(filter(None, map(device_name, reports.values())), None)
    failed = [s for s in steps if s["exit"] not in ("0",) and "not counted" not in s["note"]]
    seconds = sum(float(s["seconds"]) for s in steps)

    rehearsal = (work / "rehearsal").exists()
    title = f"# candle-lab run: {kind} bundle" + (f" on {device}" if device else "")
    if rehearsal:
        title = f"# candle-lab rehearsal of the {kind} run: every step's arguments checked, nothing measured"
    out = [title, ""]
    stopped = read_text(work / "stopped")
    if stopped:
        out += [f"**Stopped: {cell(stopped)}**", ""]
    out.append(f"- bundle: {' '.join(bundle) or 'unknown'}")
    verdict = "every step passed" if not failed else "failed: " + ", ".join(
        f"{s['step']} (exit {s['exit']})" for s in failed)
    if stopped:
        verdict = "stopped (above)" + (f"; {verdict}" if failed else "")
    elif rehearsal and not failed:
        verdict = "every step accepted its arguments"
    wall = f", {elapsed} s since the run began" if elapsed else ""
    out.append(f"- {len(steps)} steps, {seconds:.1f} s in steps{wall}; {verdict}")
    out += ["", "| step | exit | seconds | note |", "| --- | ---: | ---: | --- |"]
    for s in steps:
        out.append(f"| {cell(s['step'])} | {cell(s['exit'])} | {cell(s['seconds'])} | {cell(s['note'])} |")

    rows = [(name, path, row) for name, report in reports.items() for path, row in rows_in(report)]
    counts = {state: sum(1 for *_, row in rows if row.get("status", "ok") == state)
              for state in ("ok", "error", "unsupported")}
    out += ["", "## Benchmark rows", "",
            f"{counts['ok']} measured, {counts['error']} failed, {counts['unsupported']} "
            "unsupported (refused by the GPU's library as unsupported: neither failed nor measured)",
            "",
            "| file | row | precision | median ms | GFLOP/s | peak MiB | status |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |"]
    peaks = set()
    for name, path, row in rows:
        where = ".".join(str(k) for k in path)
        if isinstance(row.get("size"), int):
            where += f" n={row['size']}"
        median, gflops, peak_mib = figures(row)
        if isinstance(peak_mib, (int, float)):
            peaks.add("block" if isinstance(row.get("measured"), dict) else "matmul")
        out.append("| " + " | ".join([
            cell(name), cell(where), cell(row.get("precision")),
            number(median, 3), number(gflops, 1), number(peak_mib, 1), cell(status(row)),
        ]) + " |")
    if "matmul" in peaks:
        out += ["", PEAK_NOTE]
    if "block" in peaks:
        out += ["", BLOCK_PEAK_NOTE]
    unreadable = [n for n, r in reports.items() if "unreadable" in r]
    if unreadable:
        out += ["", "Unreadable reports: " + ", ".join(unreadable)]
    partial = [f"{n} ({note})" for n, r in reports.items() for note in partial_notes(r)]
    if partial:
        out += ["", "Saved partway, the rows finished before the run stopped: " + "; ".join(partial)]
    out += host_side(work)
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: summary.py WORK_DIR [ELAPSED_S]")
    main(*sys.argv[1:])
