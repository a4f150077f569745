"""--bounds FILE: the twin's rows held against Candle's bandwidth ladder. FILE is Candle's
`kernels --output FILE` from this machine (what `just vs-pytorch-kernels` writes first);
each twin row's ceiling is that file's row's (same op, case and precision), its `bound`
(the ladder kernel of the op's pattern at the row's own footprint, the faster of one
thread and Candle's pool) included, so both columns are percentages of one measured
number. Everything is checked before any work, each refusal one line (exit 1): a file
that is not Candle's kernels with ladder bounds, another machine (device, GPU or CPU), a
row it lacks, another footprint (the row's shape and bytes moved)."""

from __future__ import annotations

import json
from pathlib import Path

from common.errors import Failure

# The large case's rows per MiB of f32 tensor: 2^20 / 4 bytes / 4096 columns.
LARGE_ROWS_PER_MIB = 64
# What a refusal lists of many rows.
SHOWN = 3


def field(value, *keys):
    """value[k0][k1]..., or None where a level is missing or not an object."""
    for k in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(k)
    return value


def whole(value) -> int | None:
    """A whole number above 0, else None (JSON's true is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def counted(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def listed(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def read(path: Path) -> dict:
    """The file, checked to be Candle's kernels result with a ladder bound on every row."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise Failure(f"--bounds {path}: cannot read it ({e.strerror or e})") from e
    try:
        file = json.loads(text)
    except ValueError as e:
        raise Failure(f"--bounds {path}: not JSON ({e})") from e
    version = field(file, "schema_version")
    if not isinstance(version, str) or version.split(".")[0] != "2":
        raise Failure(f"--bounds {path}: schema_version {version!r}, not a result of schema 2.x")
    experiment = field(file, "experiment")
    if experiment != "kernels":
        raise Failure(
            f"--bounds {path}: a {experiment!r} result, not a kernels one (Candle's "
            "`kernels --output FILE` writes what --bounds reads)"
        )
    framework = field(file, "environment", "framework")
    if framework != "candle":
        raise Failure(
            f"--bounds {path}: written by {framework!r}, not Candle: the bounds are Candle's "
            "ladder, from `kernels --output FILE`"
        )
    rows = field(file, "kernels", "rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise Failure(f"--bounds {path}: no kernels rows")
    unbound = [name(r) for r in rows if not isinstance(field(r, "ceiling", "bound"), dict)]
    if unbound:
        raise Failure(
            f"--bounds {path}: {len(unbound)} of {len(rows)} rows without a ladder bound "
            f"({listed(unbound)}): a file of schema 2.3 or older, whose ceiling is a "
            "one-thread copy; rerun Candle's kernels"
        )
    unmeasured = [name(r) for r in rows if not rate(field(r, "ceiling", "gb_per_s"))]
    if unmeasured:
        raise Failure(
            f"--bounds {path}: {counted(unmeasured, 'ceiling')} without a positive GB/s "
            f"({listed(unmeasured)})"
        )
    return file


def rate(value) -> bool:
    """A positive finite number (JSON's true is not one)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and 0 < value < float("inf")


def name(row: dict) -> str:
    return f"{row.get('op')} {row.get('case')} {row.get('precision')}"


def pool_threads(file: dict) -> int | None:
    """The threads of Candle's pool in the file's run."""
    return whole(field(file, "kernels", "cpu_threads"))


def run_of(file: dict) -> dict:
    """What the file's run asked for, for the flags left out: its ops, cases and dtypes in
    its order, its prefill tokens (--seq), its large case's MiB (--large-mib) and its dram
    case's rows (the ladder's memory footprint there)."""
    rows = field(file, "kernels", "rows")
    cases = field(file, "kernels", "cases")

    def unique(key: str) -> list[str]:
        out = []
        for r in rows:
            if isinstance(r.get(key), str) and r.get(key) not in out:
                out.append(r.get(key))
        return out

    seq = large = dram = None
    for c in cases if isinstance(cases, list) else []:
        tokens, context = whole(field(c, "tokens")), whole(field(c, "context"))
        case = field(c, "name")
        if case in ("block-prefill", "smollm2-prefill") and tokens:
            seq = tokens
        elif case in ("block-decode", "smollm2-decode") and context and seq is None:
            seq = context - 1
        elif case == "large" and tokens:
            large = max(tokens // LARGE_ROWS_PER_MIB, 1)
        elif case == "dram" and tokens:
            dram = tokens
    return {
        "ops": unique("op"),
        "cases": unique("case"),
        "dtypes": unique("precision"),
        "seq": seq,
        "large_mib": large,
        "dram_rows": dram,
    }


def check_machine(path: Path, file: dict, device: dict, cpu_model: str, cpu: dict) -> None:
    """Refuses a file from another machine: another device kind, GPU or CPU (its model, and
    its vendor, family, model and stepping where both files name them)."""
    kind, there = field(file, "device", "kind"), field(file, "device", "name")
    if kind != device["kind"]:
        raise Failure(
            f"--bounds {path}: measured on {kind} ({there}), this run is on "
            f"{device['kind']} ({device['name']}): the ladder of another device"
        )
    if kind == "cuda" and there != device["name"]:
        raise Failure(f"--bounds {path}: measured on {there}, this run is on {device['name']}")
    their_cpu = field(file, "environment", "cpu_model")
    if their_cpu != cpu_model:
        raise Failure(f"--bounds {path}: measured on {their_cpu!r}, this CPU is {cpu_model!r}")
    keys = ("vendor", "family", "model", "stepping")
    theirs = field(file, "environment", "cpu") or {}
    differ = [k for k in keys if None not in (theirs.get(k), cpu.get(k)) and theirs[k] != cpu[k]]
    if differ:
        raise Failure(
            f"--bounds {path}: another CPU of the same name ({', '.join(differ)} differ: "
            f"{', '.join(str(theirs[k]) for k in differ)} there, "
            f"{', '.join(str(cpu[k]) for k in differ)} here)"
        )


def ceilings(path: Path, file: dict, planned: list[dict]) -> dict:
    """Each planned row's ceiling, the file's row's (bound included), by (op, case,
    precision). Refuses rows the file lacks and rows of another footprint."""
    rows = {(r.get("op"), r.get("case"), r.get("precision")): r for r in file["kernels"]["rows"]}
    key = lambda p: (p["op"], p["case"], p["precision"])  # noqa: E731
    missing = [name(p) for p in planned if key(p) not in rows]
    if missing:
        run = run_of(file)
        raise Failure(
            f"--bounds {path} has no row for {len(missing)} of {len(planned)} ({listed(missing)}); "
            f"its run: --ops {','.join(run['ops'])} --cases {','.join(run['cases'])} "
            f"--dtypes {','.join(run['dtypes'])}"
        )
    other = []
    for p in planned:
        r = rows[key(p)]
        if r.get("shape") != p["shape"] or r.get("bytes_moved") != p["bytes_moved"]:
            other.append(
                f"{name(p)}: {r.get('shape')} moving {r.get('bytes_moved')} bytes there, "
                f"{p['shape']} moving {p['bytes_moved']} here"
            )
    if other:
        raise Failure(
            f"--bounds {path}: another footprint for {counted(other, 'row')} ({listed(other)}); run "
            "both with the same --seq and --large-mib"
        )
    out = {}
    for p in planned:
        ceiling = dict(rows[key(p)]["ceiling"])
        ceiling["call"] = f"Candle's bound (--bounds): {ceiling.get('call')}"
        out[key(p)] = ceiling
    return out
