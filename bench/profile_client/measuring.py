"""What the measured part costs this process: CPU (getrusage, every thread), CPU per thread, RSS."""

from __future__ import annotations

import cProfile
import os
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path


def cpu_s() -> float:
    """This process's user+sys CPU seconds so far (every thread)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def sys_s() -> float:
    """This process's system (kernel) CPU seconds so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user+sys) of each thread of this process, by name (``comm``) and id."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        out[f"{comm}:{tid}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def vm_rss_kib() -> int:
    """This process's resident set now (VmRSS), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@dataclass
class Measured:
    """What one measured loop cost."""

    cpu_s: float
    wall_s: float
    runs: int
    sys_s: float = 0.0  # the kernel's part of cpu_s (on loopback, the sshd side's TCP work shows here)


async def measure_loop(body: Callable[[], Awaitable[object]], runs: int, profile_path: Path | None) -> Measured:
    """Await ``body`` ``runs`` times and report what it cost; ``profile_path``: a cProfile of it written there."""
    profile = cProfile.Profile() if profile_path else None
    s0 = sys_s()
    c0, t0 = cpu_s(), time.perf_counter()
    if profile is not None:
        profile.enable()
    for _ in range(runs):
        await body()
    if profile is not None:
        profile.disable()
    measured = Measured(cpu_s=cpu_s() - c0, wall_s=time.perf_counter() - t0, runs=runs, sys_s=sys_s() - s0)
    if profile is not None and profile_path is not None:
        profile.dump_stats(str(profile_path))
    return measured
