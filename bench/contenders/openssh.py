"""OpenSSH as a contender: one ``ssh`` per node one after another, or all at once over multiplexing masters."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import Manifest, NodeInfo, cgroup_usage_s, tree_cpu_s, tree_memory
from bench.contenders.processes import Done, last_line, proc_cpu_s, reap, spawn
from bench.contenders.runs import END_MARK, Result, Run


def _ssh_base(manifest: Manifest) -> list[str]:
    return ["ssh", "-F", manifest.ssh_config]


def _dest(manifest: Manifest, node: NodeInfo) -> list[str]:
    """How ``ssh`` names ``node``: its Host entry (simulated nodes), or ``-p PORT ADDRESS`` (cheap nodes, whose
    ssh_config has no per-node entries)."""
    if manifest.kind == "cheap":
        return ["-p", str(node.port), node.host]
    return [node.name]


def _check_outputs(outputs: list[Done]) -> str | None:
    for d in outputs:
        if d.rc != 0 or END_MARK not in d.stdout:
            return f"exit {d.rc}: {last_line(d.stderr) or 'probe output incomplete'}"
    return None


def openssh_sequential(manifest: Manifest, n: int, runs: int, commands: dict[str, str],
                       timeout_s: float = 60.0) -> Result:
    """One ``ssh`` per node, one after another (new connection each; host keys checked, BatchMode)."""
    res = Result("OpenSSH sequential", n, cluster=manifest.kind)
    base = [*_ssh_base(manifest), "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    nodes = manifest.nodes[:n]
    for _ in range(runs):
        started = time.perf_counter()
        done = [reap(spawn([*base, *_dest(manifest, node), commands[node.name]]), timeout_s) for node in nodes]
        wall = time.perf_counter() - started
        res.runs.append(Run(wall, sum(d.cpu_s for d in done), max(d.maxrss_kib for d in done),
                            max(d.maxrss_kib for d in done), _check_outputs(done)))
    return res


@contextlib.contextmanager
def control_dir() -> Iterator[Path]:
    """A short directory for ControlPath sockets; every master found in it is told to exit afterwards."""
    d = Path(tempfile.mkdtemp(prefix="ibm-", dir="/tmp"))
    try:
        yield d
    finally:
        close_masters(d)
        shutil.rmtree(d, ignore_errors=True)


def close_masters(d: Path) -> None:
    """``ssh -O exit`` every multiplexing master whose socket is in ``d``."""
    socks = [p for p in d.rglob("*") if p.is_socket()]
    procs = [subprocess.Popen(["ssh", "-F", "/dev/null", "-o", f"ControlPath={s}", "-O", "exit", "x"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for s in socks]
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _master_pids(manifest: Manifest, mux: list[str], nodes: list[NodeInfo], batch: int = 64) -> list[int]:
    """The multiplexing master's pid of each node (``ssh -O check``, ``batch`` at a time); 0 when not found."""
    out: list[int] = []
    for i in range(0, len(nodes), batch):
        procs = [spawn([*_ssh_base(manifest), *mux, "-O", "check", *_dest(manifest, node)])
                 for node in nodes[i:i + batch]]
        for p in procs:
            d = reap(p, 10)
            m = re.search(r"pid=(\d+)", d.stderr + d.stdout)
            out.append(int(m.group(1)) if m else 0)
    return out


def openssh_multiplexed(manifest: Manifest, n: int, runs: int, commands: dict[str, str],
                        timeout_s: float = 60.0) -> Result:
    """``ControlMaster=auto``/``ControlPersist=60``: masters warmed first, then all N ``ssh`` at once.

    On cheap nodes it also measures the node side during the measured runs: the CPU of every sshd process
    (and what they reaped: the shells and ``cat``) per question per node, and, with the N masters connected,
    the node side's processes and memory.
    """
    res = Result("OpenSSH parallel mux", n, cluster=manifest.kind)
    nodes = manifest.nodes[:n]
    with control_dir() as d:
        mux = ["-o", "ControlMaster=auto", "-o", f"ControlPath={d}/%C", "-o", "ControlPersist=120"]
        base = [*_ssh_base(manifest), *mux]
        warm = [reap(p, timeout_s) for p in [spawn([*base, *_dest(manifest, node), "true"]) for node in nodes]]
        if (why := _check_warm(warm)) is not None:
            res.unavailable = f"could not warm the masters: {why}"
            return res
        masters = _master_pids(manifest, mux, nodes)
        res.extra["masters_found"] = sum(1 for m in masters if m)
        node_cpu0 = _node_cpu_s(manifest)
        ok_runs = 0
        for _ in range(runs):
            m0 = sum(proc_cpu_s(m) for m in masters if m)
            started = time.perf_counter()
            procs = [spawn([*base, *_dest(manifest, node), commands[node.name]]) for node in nodes]
            done = [reap(p, timeout_s) for p in procs]
            wall = time.perf_counter() - started
            master_cpu = sum(proc_cpu_s(m) for m in masters if m) - m0
            err = _check_outputs(done)
            ok_runs += err is None
            res.runs.append(Run(wall, sum(x.cpu_s for x in done) + master_cpu, max(x.maxrss_kib for x in done),
                                sum(x.maxrss_kib for x in done), err))
        if manifest.kind == "cheap" and runs:
            node_cpu = _node_cpu_s(manifest) - node_cpu0
            res.extra["node_side"] = {"cpu_ms_per_node_per_question": round(node_cpu * 1000 / (runs * n), 3),
                                      "questions": runs * n, "cpu_accounting": manifest.node_side.get("cpu_accounting"),
                                      **tree_memory(manifest.cluster_pid)}
            res.extra["client_side_masters"] = tree_memory_of(masters)
    res.notes.append("client CPU includes the multiplexing masters (read from /proc before and after)")
    return res


def _node_cpu_s(manifest: Manifest) -> float:
    """CPU used so far by the cheap nodes' sshd and all they forked (their cgroup, else /proc); 0 elsewhere."""
    if manifest.kind != "cheap":
        return 0.0
    if (path := manifest.node_side.get("cgroup")) and (used := cgroup_usage_s(path)) is not None:
        return used
    return tree_cpu_s(manifest.cluster_pid)


def tree_memory_of(pids: list[int]) -> dict[str, float | int]:
    """PSS and RSS added up over ``pids`` (the multiplexing masters), in MB."""
    rss = pss = 0
    for pid in pids:
        if not pid:
            continue
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return {"processes": sum(1 for p in pids if p), "rss_sum_mb": round(rss / 1024, 1), "pss_mb": round(pss / 1024, 1)}


def _check_warm(done: list[Done]) -> str | None:
    bad = [d for d in done if d.rc != 0]
    return f"exit {bad[0].rc}: {last_line(bad[0].stderr)}" if bad else None


def key_exchanges(manifest: Manifest) -> dict[str, str]:
    """The key exchange each SSH client negotiates with the nodes' sshd (from ``ssh -vv`` and asyncssh's list).

    asyncssh picks the first of its own preferred algorithms that the server offers, so its choice follows
    from the server's proposal that ``ssh -vv`` prints.
    """
    node = manifest.nodes[0]
    try:
        out = subprocess.run([*_ssh_base(manifest), "-vv", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                              node.name, "true"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    if m := re.search(r"kex: algorithm: (\S+)", out):
        found["openssh"] = m.group(1)
    server = out.partition("peer server KEXINIT proposal")[2]
    if m := re.search(r"KEX algorithms: (\S+)", server):
        offered = set(m.group(1).split(","))
        try:
            from asyncssh.kex import get_default_kex_algs

            mine = [a.decode() for a in get_default_kex_algs() if not a.startswith(b"gss-")]
            found["asyncssh"] = next((a for a in mine if a in offered), "none in common")
        except ImportError:
            pass
    return found
