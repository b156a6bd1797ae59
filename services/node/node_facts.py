"""What one node's answer says for all of its services: the time, the GPUs and the processes on them."""

from __future__ import annotations

from services.models import GpuInfo, GpuProcess
from services.node.probe import NodeRaw
from services.parse import gpu as gpu_parser


class NodeFacts:
    """Node-wide facts shared by every service on that node."""

    def __init__(self, raw: NodeRaw) -> None:
        self.raw = raw
        self.now = raw.now
        self.gpus: list[GpuInfo] = gpu_parser.parse_gpus(raw.gpus) if raw.gpus_rc == 0 else []
        self.gpu_error: str | None = None
        if raw.gpus_rc not in (0, None):
            first = raw.gpus.strip().splitlines()[0] if raw.gpus.strip() else ""
            self.gpu_error = (
                "nvidia-smi not found on the node" if raw.gpus_rc == 127 else f"nvidia-smi failed: {first}"
            )
        self.processes: list[GpuProcess] = (
            gpu_parser.parse_gpu_processes(raw.gpu_apps, self.gpus) if raw.gpu_apps_rc == 0 else []
        )
