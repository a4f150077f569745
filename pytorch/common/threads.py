"""How many threads the twins' CPU ops run on and how their idle threads wait, so that a
PyTorch column is paired with Candle's on equal terms: Candle's compute pool's thread count
(candle-core 0.11.1 utils.rs get_num_threads, read the same way here), and OpenMP's wait
policy, which must be in the environment before torch is imported (libgomp reads
OMP_WAIT_POLICY once, when it is loaded: setting it later changes nothing), then checked
against what OpenMP's idle threads do (spin or sleep), so a file states the policy that
ran, not only the one asked for. (torch 2.11's libgomp is OpenMP 4.5's: it has no
omp_display_env to ask.)"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from common.errors import Failure

# --omp-wait-policy's values: OpenMP 5.2 sec. 6.7. Active: an idle thread spins (libgomp:
# for ~30 billion iterations, in effect always), as Candle's barrier pool spins between
# ops. Passive: it sleeps at once and is woken for the next parallel region.
WAIT_POLICIES = ("active", "passive")
SYSFS_CPU = Path("/sys/devices/system/cpu")


def cpu_list_count(text: str) -> int | None:
    """CPUs in a Linux CPU list ("0-3,8,10-11"), as candle's linux_parse_cpu_list: None for
    a malformed or empty list."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            start, end = int(lo), int(hi or lo)
        except ValueError:
            return None
        if start < 0 or start > end:
            return None
        cpus.update(range(start, end + 1))
    return len(cpus) or None


def preferred_cpus(root: Path = SYSFS_CPU) -> int | None:
    """The big cores of a CPU whose cores differ in capacity (cpuN/cpu_capacity within 90%
    of the largest), as candle's linux_detect_preferred_cpus; None where every CPU is alike
    or sysfs does not say."""
    capacities = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return None
    for entry in entries:
        if not re.fullmatch(r"cpu\d+", entry.name):
            continue
        try:
            capacities.append(int((entry / "cpu_capacity").read_text().strip()))
        except (OSError, ValueError):
            return None  # as candle's `?`: one unreadable CPU and no preference
    if len(capacities) < 2:
        return None
    low, high = min(capacities), max(capacities)
    if high == 0 or low * 10 >= high * 9:
        return None
    big = sum(1 for c in capacities if c * 10 >= high * 9)
    return big if big < len(capacities) else None


def physical_cores(cpuinfo: str) -> int | None:
    """num_cpus 1.17's get_num_physical_cpus: the sum over packages of cpuinfo's
    `cpu cores` (each `physical id` paired with the next `cpu cores`); None when it names
    none. It counts the machine's cores, not the ones this process may use."""
    per_package: dict[int, int] = {}
    package, cores, seen = 0, 0, 0
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key in ("physical id", "cpu cores"):
            try:
                number = int(value)
            except ValueError:
                break
            package, cores = (number, cores) if key == "physical id" else (package, number)
            seen += 1
        if seen == 2:
            per_package[package] = cores
            seen = 0
    return sum(per_package.values()) or None


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def candle_pool_threads(env=None, cpuinfo: str | None = None, root: Path = SYSFS_CPU) -> int:
    """The threads of Candle's CPU pool on this machine, in candle-core 0.11.1's order
    (utils.rs get_num_threads): RAYON_NUM_THREADS when it is a whole number above 0; else
    the CPUs of CANDLE_CPU_MASK; else the big cores of a hybrid CPU; else the physical
    cores /proc/cpuinfo counts; else the CPUs available to the process. (Not simply the
    available CPUs: on a machine with two threads per core Candle runs one per core.)"""
    env = os.environ if env is None else env
    try:
        rayon = int(env.get("RAYON_NUM_THREADS", ""))
    except ValueError:
        rayon = 0
    if rayon > 0:
        return rayon
    mask = cpu_list_count(env["CANDLE_CPU_MASK"]) if "CANDLE_CPU_MASK" in env else None
    if mask:
        return mask
    big = preferred_cpus(root)
    if big:
        return big
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    return physical_cores(cpuinfo) or available_cpus()


def set_wait_policy(policy: str) -> str | None:
    """Puts OMP_WAIT_POLICY=policy in this process's environment, for the OpenMP runtime
    torch loads at its import (so: before `import torch`). Returns the value it replaced
    when that was another one, for a note."""
    before = os.environ.get("OMP_WAIT_POLICY")
    os.environ["OMP_WAIT_POLICY"] = policy.upper()
    return before if before is not None and before.lower() != policy else None


# The wait-policy probe: a sleep this long right after a parallel region, and the shares of
# it the process's other threads spent on a CPU that tell the policies apart. Measured on a
# busy 2-core VM with 2 threads: active 0.50 (the worker spinning, sharing its core),
# passive 0.03-0.05, libgomp's default (spin a while, then sleep) 0.03.
PROBE_SLEEP_S = 0.2
SPINNING_SHARE, SLEEPING_SHARE = 0.2, 0.1


def idle_spin_share(torch, sleep_s: float = PROBE_SLEEP_S) -> float:
    """CPU time the process spent during a sleep of the main thread right after a parallel
    region, over the sleep's wall time: OpenMP's idle workers on a CPU (spinning), or not
    (asleep). A behaviour read from the runtime torch loaded, whichever OpenMP it is."""
    x = torch.ones(1 << 22)
    for _ in range(3):
        x.sum()  # parallel regions: the team exists, and has just gone idle
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(sleep_s)
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def observed_policy(share: float) -> str | None:
    """The wait policy a spin share shows; None in between (a busy machine, unsure)."""
    if share >= SPINNING_SHARE:
        return "active"
    return "passive" if share < SLEEPING_SHARE else None


def apply(torch, threads: int, policy: str) -> str:
    """Sets torch's intra-op threads to `threads` (before any work: OpenMP sizes its team at
    the first parallel region) and checks both settings took: torch's thread count, and
    the wait policy OpenMP's idle threads show (idle_spin_share). Returns the line that
    states them; refuses a run whose idle threads contradict the policy asked for
    (OMP_WAIT_POLICY was set after torch loaded OpenMP, which reads it once)."""
    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        raise Failure(f"torch.set_num_threads({threads}) left {torch.get_num_threads()} threads")
    stated = f"{threads} threads (torch.set_num_threads), OMP_WAIT_POLICY={policy.upper()}"
    if threads == 1:
        return f"{stated}: one thread, no idle OpenMP thread for it to apply to"
    share = idle_spin_share(torch)
    seen = f"idle threads on a CPU for {100 * share:.0f}% of a {PROBE_SLEEP_S * 1e3:.0f} ms sleep"
    shown = observed_policy(share)
    if shown is None:
        return f"{stated}: not confirmed ({seen}: a busy machine?)"
    if shown != policy:
        raise Failure(
            f"OpenMP's idle threads behave as {shown.upper()}, not the OMP_WAIT_POLICY="
            f"{policy.upper()} asked for ({seen}): OpenMP reads the variable once, when torch "
            "loads it, and torch was loaded before it was set"
        )
    return f"{stated}, as OpenMP's {seen} shows"
