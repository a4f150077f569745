"""What the result's `environment` records about this machine and build, as src/env.rs and
build.rs: CPU model and identity (cpuidentity.py), OS, candle-lab's version and git commit, torch's version and threads,
and the newest CUDA the driver supports."""

from __future__ import annotations

import ctypes
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from common import cpuidentity

# The repository root (pytorch/ sits one level below it).
ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") or line.startswith("Model"):
                return line.split(":", 1)[1].strip()
    except (OSError, IndexError):
        pass
    return f"{platform.machine()} CPU"


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.removeprefix("PRETTY_NAME=").strip('"')
    except OSError:
        pass
    return sys.platform


def git_commit() -> str | None:
    """As build.rs: short=12, "-dirty" when tracked files other than results/ changed."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "--short=12", "HEAD")
    if sha is None:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")
    return f"{sha}-dirty" if dirty else sha


def suite_version() -> str:
    """candle-lab's version: the first `version = "..."` of Cargo.toml, the package's."""
    try:
        found = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


def environment(torch) -> dict:
    return {
        "framework": "pytorch",
        "framework_version": torch.__version__,
        "suite_version": suite_version(),
        "git_commit": git_commit(),
        "os": os_name(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu": cpuidentity.detect(),
        # CPUs this process may run on, as Rust's available_parallelism reads them.
        "cpu_threads_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1,
        "compute_threads": torch.get_num_threads(),
        "build_features": [],
        "target_features": [],
        "profile": None,
        "cuda_build_version": torch.version.cuda,
    }


def driver_cuda_version() -> str | None:
    """Newest CUDA the driver supports, from libcuda's cuDriverGetVersion (torch has no API)."""
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except OSError:
        return None
    return f"{version.value // 1000}.{version.value % 1000 // 10}"
