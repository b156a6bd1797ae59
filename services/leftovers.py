"""Leftover vLLM processes: GPU memory held by processes outside every running service.

The probe lists the GPU's compute processes (``nvidia-smi --query-compute-apps``) and the node's process
tree; :func:`services.node.assemble.attach_gpu_owners` puts the ones no running service owns in
``ServiceState.leftovers``. Of those, the ones that look like vLLM (its ``VLLM::`` process titles, a
``vllm`` program, Ray workers, a Python interpreter) are what makes the next start run out of memory.
"""

from __future__ import annotations

import re

from services.models import GpuProcess, ServiceState

VLLM_NAME = re.compile(r"vllm|^ray::|(^|/)python[0-9.]*(\s|$)", re.IGNORECASE)
# torch's OOM, and vLLM's start-up check ("Free memory on device cuda:0 (…) is less than desired GPU memory
# utilization"), which is what leftovers usually cause.
OOM_WORDS = re.compile(r"out of memory|OutOfMemory|No available memory|Free memory on device|less than desired GPU "
                       r"memory utilization", re.IGNORECASE)
MAX_LISTED = 8


def vllm_leftovers(st: ServiceState) -> list[GpuProcess]:
    """The leftover GPU processes of ``st``'s node that look like vLLM, biggest first."""
    found = [p for p in st.leftovers if p.pid is not None and (p.memory_mib or 0) > 0 and VLLM_NAME.search(p.name)]
    return sorted(found, key=lambda p: (-(p.memory_mib or 0), p.pid or 0))


def describe(procs: list[GpuProcess]) -> str:
    """``PID 4242 (VLLM::Worker_TP0) on GPU 0: 61,440 MiB; …`` (at most :data:`MAX_LISTED`)."""
    parts = []
    for p in procs[:MAX_LISTED]:
        gpu = f"GPU {p.gpu_index}" if p.gpu_index is not None else "a GPU"
        parts.append(f"PID {p.pid} ({p.name}) on {gpu}: {p.memory_mib or 0:,} MiB")
    if len(procs) > MAX_LISTED:
        parts.append(f"and {len(procs) - MAX_LISTED} more")
    return "; ".join(parts)


def total_mib(procs: list[GpuProcess]) -> int:
    """The GPU memory they hold together."""
    return sum(p.memory_mib or 0 for p in procs)


def looks_like_oom(text: str) -> bool:
    """True when a failure reason or journal text says the GPU ran out of memory."""
    return bool(OOM_WORDS.search(text))
