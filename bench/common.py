"""What the cluster process tells the measuring side: the manifest, and small shared helpers."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

QUESTION = "what are current settings?"
BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


@dataclass
class NodeInfo:
    """One simulated node as reached over SSH."""

    name: str
    host: str
    port: int
    user: str
    sim_root: str
    env: dict[str, str]
    vllm_port: int


@dataclass
class Manifest:
    """Everything the cluster process wrote, for the contenders to use."""

    workdir: str
    key_file: str
    known_hosts: str
    ssh_config: str
    nodes: list[NodeInfo] = field(default_factory=list)
    configs: dict[int, str] = field(default_factory=dict)  # N -> inferbot TOML for the first N nodes
    inventories: dict[int, str] = field(default_factory=dict)  # N -> Ansible inventory for the first N nodes
    start_s: float = 0.0
    cluster_pid: int = 0

    def save(self, path: Path) -> None:
        """Write atomically (the measuring side polls for the file)."""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        """Read what ``save`` wrote."""
        data = json.loads(path.read_text())
        nodes = [NodeInfo(**n) for n in data.pop("nodes")]
        configs = {int(k): v for k, v in data.pop("configs").items()}
        inventories = {int(k): v for k, v in data.pop("inventories").items()}
        return cls(nodes=nodes, configs=configs, inventories=inventories, **data)


def summarize(values: list[float]) -> dict[str, float | int]:
    """Median, min, max and count of ``values`` (empty dict when there are none)."""
    if not values:
        return {}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def read_vm_hwm_kib(pid: int | str = "self") -> int:
    """Peak resident set size (VmHWM) of a process, in KiB; 0 when unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def command_digest(commands: dict[str, str]) -> str:
    """One sha256 over node -> command (sorted), to compare what the bot sent with what baselines send."""
    h = hashlib.sha256()
    for name in sorted(commands):
        h.update(f"{name}\0{commands[name]}\0".encode())
    return h.hexdigest()
