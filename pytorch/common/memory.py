"""Whether a size fits before anything is allocated, as src/memory/fits.rs check does for
src/bench/square/mod.rs need (the same bounds and policy, so both programs refuse the same
sizes): the bytes a run holds on its device at once (a row, or a row beside fp32's) and on
the host, against what the host and the GPU have. On the host a size is refused only where
it cannot fit (a trial reservation refused, or more than memory and swap); less
MemAvailable than needed is a note. `--skip-host-memory-check` skips the host side for
machines whose memory grows on demand."""

from __future__ import annotations

import mmap
import sys
from dataclasses import dataclass
from pathlib import Path

from common.errors import Failure
from common.formulas import payload_bytes
from common.precisions import PRECISIONS, Precision


def human_bytes(n: int) -> str:
    """As src/units.rs bytes(): "3221225472 (3.0 GiB)"."""
    value, unit = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024.0 and unit < len(units) - 1:
        value, unit = value / 1024.0, unit + 1
    return f"{n} B" if unit == 0 else f"{n} ({value:.1f} {units[unit]})"


def device_bytes(on_cpu: bool, p: Precision, n: int) -> int:
    """The payload, plus (on the CPU, for formats narrower than f32) f32 copies of all three
    matrices: Candle's measured CPU behaviour, kept as the bound for both programs."""
    widened = payload_bytes(n, 4) if on_cpu and p.element_bytes < 4 else 0
    return payload_bytes(n, p.element_bytes) + widened


def at_once_bytes(on_cpu: bool, n: int, precisions: list[Precision]) -> int:
    """The most a run holds on its device at once (src/bench/square/mod.rs need): the widest
    precision's matrices, or, where fp32 is among the precisions, the widest pair of a
    precision and fp32, since the pass that times each beside fp32 holds both
    (pytorch/matmul/beside.py)."""
    fp32 = PRECISIONS["fp32"]
    beside = device_bytes(on_cpu, fp32, n) if fp32 in precisions else 0
    return max(device_bytes(on_cpu, p, n) + (beside if p != fp32 else 0) for p in precisions)


def host_bytes(on_cpu: bool, n: int, precisions: list[Precision]) -> int:
    """Host bytes a run needs: A and B in f32, the f64 copy of B the reference needs, and on
    the CPU what the device holds at once too (src/bench/square/mod.rs Inputs::host_bytes,
    and fits.rs check)."""
    on_device = at_once_bytes(on_cpu, n, precisions)
    return 2 * n * n * 4 + n * n * 8 + (on_device if on_cpu else 0)


@dataclass(frozen=True)
class HostMemory:
    """/proc/meminfo's MemTotal, SwapTotal and MemAvailable, in bytes (src/env.rs)."""

    total_bytes: int
    swap_bytes: int
    available_bytes: int  # what a new allocation can have now without swapping


def parse_meminfo(text: str) -> HostMemory | None:
    """None when a field is missing or unreadable."""
    fields = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields[name] = rest.split()
    try:
        kib = [int(fields[f][0]) for f in ["MemTotal", "SwapTotal", "MemAvailable"]]
    except (KeyError, IndexError, ValueError):
        return None
    return HostMemory(*(k * 1024 for k in kib))


def host_memory() -> HostMemory | None:
    """None where /proc/meminfo does not exist or lacks a field."""
    try:
        return parse_meminfo(Path("/proc/meminfo").read_text())
    except OSError:
        return None


def try_reserve_host(nbytes: int) -> bool:
    """Asks the kernel for `nbytes` of private memory and gives them back untouched (no page
    is written, so nothing is used), as src/bench/square/mod.rs try_reserve_host. It fails where the
    real allocations would: under a process limit (`ulimit -v`) or beyond what the kernel
    agrees to commit."""
    if nbytes <= 0:
        return True
    try:
        prot = mmap.PROT_READ | mmap.PROT_WRITE  # writable private pages are what commit counts
        mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=prot).close()
    except (OSError, OverflowError, ValueError):
        return False
    return True


def host_verdict(n: int, needed: int, memory: HostMemory | None, reserved: bool) -> str | None:
    """src/bench/square/mod.rs host_verdict: refuses what cannot fit (a reservation the system
    refused, or more than the machine's memory and swap); returns a note when less than
    `needed` is available now, since the kernel can free caches and a VM whose memory grows
    on demand can take more than it reports; else None."""
    need = human_bytes(needed)
    if not reserved:
        raise Failure(
            f"--size {n}: needs {need} of host memory and the allocator refused to reserve it "
            "(a process limit such as `ulimit -v`, or more than the system will commit); "
            "choose a smaller --size"
        )
    if memory is None:
        return None
    most = memory.total_bytes + memory.swap_bytes
    if needed > most:
        raise Failure(
            f"--size {n}: needs {need} of host memory, more than this machine's "
            f"{human_bytes(most)} of memory and swap; choose a smaller --size (or, where "
            "memory grows on demand, --skip-host-memory-check)"
        )
    if needed > memory.available_bytes:
        return (
            f"--size {n} needs {need} of host memory and "
            f"{human_bytes(memory.available_bytes)} is available now; trying anyway"
        )
    return None


def check_fits(torch, device, n: int, precisions: list[Precision], check_host: bool) -> None:
    """Refuses a size the host or the device cannot hold, before anything is allocated (a
    host allocation that fails can end the process instead of raising). `check_host` is
    False under --skip-host-memory-check."""
    on_cpu = device.type == "cpu"
    if check_host:
        needed = host_bytes(on_cpu, n, precisions)
        note = host_verdict(n, needed, host_memory(), try_reserve_host(needed))
        if note is not None:
            print(f"note: {note}", file=sys.stderr)
    if not on_cpu:
        on_device = at_once_bytes(on_cpu, n, precisions)
        free, _ = torch.cuda.mem_get_info(device)
        if on_device > free:
            raise Failure(
                f"--size {n}: needs {human_bytes(on_device)} on the GPU, "
                f"{human_bytes(free)} free; choose a smaller --size"
            )


def need_verdict(what: str, needed: int, memory: HostMemory | None, reserved: bool) -> str | None:
    """src/memory/fits.rs host_verdict for a need named by what asks for it (`what`, such
    as "the block of w.safetensors (...)"): the same policy as host_verdict above, in the
    wording of fits.rs, which every Rust experiment but matmul's row check now uses."""
    need = human_bytes(needed)
    now = f" ({human_bytes(memory.available_bytes)} available now)" if memory else ""
    if not reserved:
        raise Failure(
            f"{what}: needs {need} of host memory{now} and the allocator refused to reserve it "
            "(a process limit such as `ulimit -v`, or more than the system will commit); "
            "ask for less"
        )
    if memory is None:
        return None
    most = memory.total_bytes + memory.swap_bytes
    if needed > most:
        raise Failure(
            f"{what}: needs {need} of host memory, more than this machine's "
            f"{human_bytes(most)} of memory and swap{now}; ask for less (or, where memory "
            "grows on demand, --skip-host-memory-check)"
        )
    if needed > memory.available_bytes:
        return (
            f"{what} needs {need} of host memory and "
            f"{human_bytes(memory.available_bytes)} is available now; trying anyway"
        )
    return None


def check_need(torch, device, what: str, host: int, on_device: int, check_host: bool) -> None:
    """src/memory/fits.rs check: `host` bytes live on the host whatever the device,
    `on_device` on the device (host memory too when it is the CPU). Refuses what cannot
    fit before anything is allocated; a note when less is available now."""
    on_cpu = device.type == "cpu"
    if check_host:
        needed = host + (on_device if on_cpu else 0)
        note = need_verdict(what, needed, host_memory(), try_reserve_host(needed))
        if note is not None:
            print(f"note: {note}", file=sys.stderr)
    if not on_cpu:
        free, _ = torch.cuda.mem_get_info(device)
        if on_device > free:
            raise Failure(
                f"{what}: needs {human_bytes(on_device)} of GPU memory, "
                f"{human_bytes(free)} available"
            )
