"""What CPU this is beyond its marketing name, as src/cpu_identity.rs records it in
`environment.cpu`: vendor, family, model, stepping, the instruction sets the matmul kernels
choose between, the x86-64 ISA level, physical cores against logical CPUs. With it, `compare`
and the results folder's checks tell two VMs that both say "AMD EPYC" apart, and see that a
PyTorch file and a Candle file came from the same CPU.

Source: /proc/cpuinfo, its `flags` line alone deciding the instruction sets (the Rust side
also asks CPUID at run time, which Python's standard library cannot), then sysfs topology
where cpuinfo names no cores. Detection never fails: what cannot be read stays null."""

from __future__ import annotations

from pathlib import Path

# As src/cpu_identity.rs's ISA, in its order.
ISA = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)

# The x86-64 psABI levels, each requiring the previous (src/cpu_identity.rs's LEVELS).
LEVELS = (
    ("x86-64-v2", ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe")),
    ("x86-64-v4", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)


def isa_level(flags: set[str]) -> str:
    """The highest level every flag of which (and of every level below) is present."""
    level = "x86-64"
    for name, needs in LEVELS:
        if not all(f in flags for f in needs):
            break
        level = name
    return level


def parse(cpuinfo: str) -> dict:
    """The identity /proc/cpuinfo's text gives (the result schema's CpuIdentity)."""
    blocks = []
    for text in cpuinfo.split("\n\n"):
        block: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                block.setdefault(key.strip(), value.strip())  # the first, as Rust's find
        if "processor" in block:
            blocks.append(block)
    first = blocks[0] if blocks else {}

    def number(key: str) -> int | None:
        try:
            return int(first[key])
        except (KeyError, ValueError):
            return None

    flags_line = first.get("flags")
    flags = set(flags_line.split()) if flags_line is not None else set()
    # Physical cores only when every CPU names its package and core.
    cores = None
    if blocks and all("physical id" in b and "core id" in b for b in blocks):
        cores = len({(b["physical id"], b["core id"]) for b in blocks})
    return {
        "vendor": first.get("vendor_id"),
        "family": number("cpu family"),
        "model": number("model"),
        "stepping": number("stepping"),
        "model_name": first.get("model name"),
        "isa": [f for f in ISA if f in flags],
        "isa_level": isa_level(flags) if flags_line is not None else None,
        "physical_cores": cores or None,
        "logical_cpus": len(blocks) or None,
    }


def sysfs_topology(root: Path = Path("/sys/devices/system/cpu")) -> tuple[int | None, int | None]:
    """(physical cores, logical CPUs) from root/cpuN/topology, as the Rust side reads them."""
    cores, logical = set(), 0
    try:
        entries = list(root.iterdir())
    except OSError:
        return None, None
    for entry in entries:
        n = entry.name.removeprefix("cpu")
        topology = entry / "topology"
        if entry.name == n or not n.isdigit() or not topology.is_dir():
            continue
        logical += 1
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            continue
        cores.add((package, core))
    return len(cores) or None, logical or None


def detect() -> dict:
    """This machine's CPU."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    identity = parse(text)
    if identity["physical_cores"] is None or identity["logical_cpus"] is None:
        physical, logical = sysfs_topology()
        identity["physical_cores"] = identity["physical_cores"] or physical
        identity["logical_cpus"] = identity["logical_cpus"] or logical
    return identity
