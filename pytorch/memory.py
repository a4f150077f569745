"""Whether a size fits before anything is allocated, as src/matmul.rs check_fits (the same
bound, so both programs refuse the same sizes): the bytes a row needs on its device and
on the host, against what the host and the GPU have."""

from __future__ import annotations

from pathlib import Path

from errors import Failure
from formulas import payload_bytes
from precisions import Precision


def human_bytes(n: int) -> str:
    """As src/report.rs bytes(): "3221225472 (3.0 GiB)"."""
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


def host_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(torch, device, n: int, precisions: list[Precision]) -> None:
    on_cpu = device.type == "cpu"
    on_device = max(device_bytes(on_cpu, p, n) for p in precisions)
    # A and B in f32 on the host, and the f64 copy of B the reference needs.
    host_needed = 2 * n * n * 4 + n * n * 8 + (on_device if on_cpu else 0)
    free = host_available_bytes()
    if free is not None and host_needed > free:
        raise Failure(
            f"--size {n}: needs {human_bytes(host_needed)} of host memory, "
            f"{human_bytes(free)} available; choose a smaller --size"
        )
    if not on_cpu:
        free, _ = torch.cuda.mem_get_info(device)
        if on_device > free:
            raise Failure(
                f"--size {n}: needs {human_bytes(on_device)} on the GPU, "
                f"{human_bytes(free)} free; choose a smaller --size"
            )
