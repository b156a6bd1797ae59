"""What the cluster process tells the measuring side: the manifest, and small shared helpers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
    kind: str = "simulated"  # or "cheap": sshd that answer with a recorded answer (bench/cheap.py)
    watch_configs: dict[int, str] = field(default_factory=dict)  # N -> config with [watch] every 15 s (cheap)
    push_watch_configs: dict[int, str] = field(default_factory=dict)  # N -> the same with the journal streams
    recording: dict[str, Any] = field(default_factory=dict)  # what the cheap nodes replay, and its node cost
    node_side: dict[str, Any] = field(default_factory=dict)  # how the nodes were made and what they cost

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
        watch_configs = {int(k): v for k, v in data.pop("watch_configs", {}).items()}
        push_watch_configs = {int(k): v for k, v in data.pop("push_watch_configs", {}).items()}
        return cls(nodes=nodes, configs=configs, inventories=inventories, watch_configs=watch_configs,
                   push_watch_configs=push_watch_configs, **data)


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


def process_tree(root: int) -> list[int]:
    """Every live process below ``root`` (by parent pid, as /proc says now)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def tree_cpu_s(root: int) -> float:
    """user+sys of every process below ``root``, plus what each has reaped of its own children (cutime+cstime).

    A child that ran and was waited for between two calls shows up in its parent's cutime/cstime, so the
    difference of two calls is the tree's CPU in between (while its long-lived processes stay alive).
    """
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except (OSError, ValueError, IndexError):
            continue
    return total / tck


def tree_memory(root: int) -> dict[str, float | int]:
    """Live processes below ``root`` and their memory: RSS added up (shared pages counted in each) and PSS
    (shared pages divided among their sharers: what the tree really occupies), in MB."""
    rss_kib = pss_kib = live = 0
    for pid in process_tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                text = f.read()
        except OSError:
            continue
        if "Rss:" not in text:
            continue  # a zombie: no memory, not a process that works
        live += 1
        for line in text.splitlines():
            if line.startswith("Rss:"):
                rss_kib += int(line.split()[1])
            elif line.startswith("Pss:"):
                pss_kib += int(line.split()[1])
    return {"processes": live, "rss_sum_mb": round(rss_kib / 1024, 1), "pss_mb": round(pss_kib / 1024, 1)}


def command_digest(commands: dict[str, str]) -> str:
    """One sha256 over node -> command (sorted), to compare what the bot sent with what baselines send."""
    h = hashlib.sha256()
    for name in sorted(commands):
        h.update(f"{name}\0{commands[name]}\0".encode())
    return h.hexdigest()


def raise_nofile() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: one socket per node, and up to 1,024 nodes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1 << 16 if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class CpuGroup:
    """A cgroup of its own for some processes (and all they fork): its CPU counter is exact at any moment,
    for running and exited processes alike, unlike /proc's per-process times (which only count a child once
    its parent reaps it, in clock ticks). cgroup v2's ``cpu.stat`` (present without the cpu controller), else
    v1's ``cpuacct.usage``; ``create`` returns None where neither can be made (not root, no cgroupfs)."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    @classmethod
    def create(cls, name: str) -> CpuGroup | None:
        """A new group ``name`` under the first writable cgroup v2 or v1-cpuacct mount."""
        mounts: list[tuple[Path, bool]] = []
        try:
            with open("/proc/mounts") as f:
                for line in f:
                    _dev, where, fstype, opts, *_ = line.split()
                    if fstype == "cgroup2":
                        mounts.append((Path(where), True))
                    elif fstype == "cgroup" and "cpuacct" in opts.split(","):
                        mounts.append((Path(where), False))
        except OSError:
            return None
        for mount, v2 in sorted(mounts, key=lambda m: not m[1]):
            path = mount / name
            try:
                path.mkdir()
            except OSError:
                continue
            group = cls(path, v2)
            if group.usage_s() is not None:
                return group
            group.remove()
        return None

    def add(self, pid: int) -> bool:
        """Move ``pid`` into the group (what it forks afterwards is born there)."""
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            return False
        return True

    def usage_s(self) -> float | None:
        """CPU seconds used by the group's processes since it was made (None when unreadable)."""
        try:
            if self.v2:
                for line in (self.path / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
                return None
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Remove the group (it must be empty: call after its processes are gone)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def cgroup_usage_s(path: str) -> float | None:
    """``CpuGroup.usage_s`` of a group made by another process (the cheap cluster's), by its path."""
    p = Path(path)
    return CpuGroup(p, (p / "cpu.stat").exists()).usage_s()
