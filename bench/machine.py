"""What the benchmark ran on: CPU, cores, memory, kernel, Python, OpenSSH, ansible-core, the code's commit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from typing import Any

from bench.common import REPO_ROOT


def _run(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=REPO_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _asyncssh_version() -> str:
    try:
        import asyncssh

        return str(asyncssh.__version__)
    except ImportError:
        return "not installed"


def machine_info(ansible_version: str | None) -> dict[str, Any]:
    """The facts a reader needs to weigh the numbers (gathered at the start of a run)."""
    commit = _run(["git", "rev-parse", "--short", "HEAD"])
    dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"]))
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "openssh": _run(["ssh", "-V"]).splitlines()[0] if _run(["ssh", "-V"]) else "not found",
        "ansible_core": ansible_version or "not used",
        "asyncssh": _asyncssh_version(),
        "inferbot_commit": f"{commit}{' + uncommitted changes' if dirty else ''}" if commit else "unknown",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "note": "nodes, sshd and the client share this machine's cores: node-side work competes with the client",
    }
