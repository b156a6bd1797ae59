"""Parsers for ``nvidia-smi --query-gpu`` / ``--query-compute-apps`` CSV output.

nvidia-smi's text output is not guaranteed stable across driver versions, so parsing is lenient: a
header line may or may not be there, units may or may not be appended, and unsupported fields print
``[N/A]`` / ``[Not Supported]`` (they become None rather than an error).
"""

from __future__ import annotations

import re
import sys

from services.models import GpuInfo, GpuProcess

__all__ = ["GPU_QUERY_FIELDS", "PROCESS_QUERY_FIELDS", "is_vllm_worker", "parse_gpu_processes", "parse_gpus"]

GPU_QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
)
PROCESS_QUERY_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid")

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_HEADER_UNIT = re.compile(r"\s*\[[^\]]*\]$")
# Per-GPU and MIG-instance UUIDs; the only field shape that tells a uuid column apart.
_UUID = re.compile(r"^(?:GPU|MIG)-[0-9A-Fa-f-]+", re.IGNORECASE)
# Header spellings that differ from the query names.
_HEADER_ALIASES = {"used_gpu_memory": "used_memory"}
# vLLM's setproctitle titles (`VLLM::EngineCore_DP0`, `VLLM::Worker_TP0`); the kernel's comm is cut at
# 15 chars (`VLLM::EngineCor`), and VLLM_PROCESS_NAME_PREFIX may replace `VLLM`.
_VLLM_WORKER = re.compile(r"::(?:EngineCor|Worker)")


def _float(field: str | None) -> float | None:
    # `[N/A]`, `[Not Supported]`, `[Unknown Error]` and missing columns all mean "no reading".
    if field is None:
        return None
    m = _NUMBER.match(field.strip())
    return float(m.group(0)) if m else None


def _int(field: str | None) -> int | None:
    value = _float(field)
    return round(value) if value is not None else None


def _rows(csv_text: str) -> tuple[list[str] | None, list[list[str]]]:
    """Split into (header column names or None, data rows)."""
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in csv_text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        first = fields[0].lower()
        if header is None and not rows and first in ("index", "pid"):
            header = [_HEADER_ALIASES.get(n, n) for n in (_HEADER_UNIT.sub("", f).lower() for f in fields)]
            continue
        rows.append(fields)
    return header, rows


def parse_gpus(csv_text: str) -> list[GpuInfo]:
    """GPUs from ``--query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,
    temperature.gpu,power.draw --format=csv[,noheader][,nounits]``.

    With a header the columns are read by name; without one the order above is assumed, or the same
    order without ``uuid`` when the third field is not a uuid. Lines without an integer index are
    skipped (error text on stdout).
    """
    header, rows = _rows(csv_text)
    gpus: list[GpuInfo] = []
    for fields in rows:
        if header is not None:
            columns = header
        elif len(fields) > 2 and _UUID.match(fields[2]):
            columns = list(GPU_QUERY_FIELDS)
        else:
            columns = [c for c in GPU_QUERY_FIELDS if c != "uuid"]
        row = dict(zip(columns, fields, strict=False))
        index = row.get("index", "")
        if not index.isdigit():
            continue
        gpus.append(
            GpuInfo(
                index=int(index),
                name=sys.intern(row.get("name", "")),  # the same few model names on every node of a fleet
                uuid=row.get("uuid", "") if _UUID.match(row.get("uuid", "")) else "",
                memory_used_mib=_int(row.get("memory.used")),
                memory_total_mib=_int(row.get("memory.total")),
                utilization_pct=_int(row.get("utilization.gpu")),
                temperature_c=_int(row.get("temperature.gpu")),
                power_w=_float(row.get("power.draw")),
            )
        )
    return gpus


def parse_gpu_processes(csv_text: str, gpus: list[GpuInfo]) -> list[GpuProcess]:
    """Compute processes from ``--query-compute-apps=pid,process_name,used_memory,gpu_uuid``.

    ``gpu_uuid`` is joined to ``gpus`` for the index. A header-only or empty output, or nvidia-smi's
    "No running processes found", gives an empty list. A process name may itself contain commas, so
    pid is read from the front and memory/uuid from the back.
    """
    by_uuid = {g.uuid: g.index for g in gpus if g.uuid}
    _, rows = _rows(csv_text)
    procs: list[GpuProcess] = []
    for fields in rows:
        if len(fields) < 3:
            continue  # "No running processes found" and other prose
        uuid = ""
        if len(fields) >= 4 and _UUID.match(fields[-1]):
            uuid = fields[-1]
            fields = fields[:-1]
        pid_field, memory_field = fields[0], fields[-1]
        name = ", ".join(fields[1:-1])
        procs.append(
            GpuProcess(
                pid=int(pid_field) if pid_field.isdigit() else None,
                name=sys.intern(name),  # vLLM's process titles repeat on every node
                memory_mib=_int(memory_field),
                gpu_uuid=uuid,
                gpu_index=by_uuid.get(uuid),
            )
        )
    return procs


def is_vllm_worker(name: str) -> bool:
    """True for vLLM's engine-core and worker processes (``VLLM::EngineCore``, ``VLLM::Worker_TP0``...)."""
    return bool(_VLLM_WORKER.search(name))
