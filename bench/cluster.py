"""The cluster process: N simulated vLLM nodes, each behind its own real sshd on its own loopback address.

Run by ``python -m bench`` as a separate process (so the measuring side's CPU and RSS are its own):

    python -m bench.cluster --nodes 64 --configs 1,8,32,64 --workdir DIR --manifest DIR/manifest.json

It starts the nodes concurrently (bounded by ``--start-timeout``), writes an inferbot config and an Ansible
inventory per N (the first N nodes), one known_hosts and one ssh_config, then the manifest, and waits until
SIGTERM/SIGINT or until its standard input closes (the parent died). On the way out it stops every sshd and
simulated node and kills whatever they left (it is a child subreaper, so orphans come back to it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import Manifest, NodeInfo, process_tree
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.sshd import ClientKey, Sshd, free_port, login_user, start_sshd

PR_SET_CHILD_SUBREAPER = 36


def node_name(i: int) -> str:
    """The i-th node's name (0-based): node-01, node-02, …"""
    return f"node-{i + 1:02d}"


def node_host(i: int) -> str:
    """The i-th node's own loopback address: 127.0.0.2, 127.0.0.3, …"""
    if i > 250:
        raise ValueError("at most 251 nodes (127.0.0.2 … 127.0.0.252)")
    return f"127.0.0.{i + 2}"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string of printable text is a valid TOML basic string


def write_config(path: Path, nodes: list[NodeInfo], manifest: Manifest, state_dir: Path,
                 bench_dirs: dict[str, str], timeout: str = "30s", extra: Sequence[str] = ()) -> None:
    """The inferbot TOML for ``nodes``: one Kimi service per node, host keys checked; ``extra`` lines at the end."""
    out = ["# Written by the benchmark for one run.", ""]
    for n in nodes:
        out += ["[[nodes]]", f"name = {_toml_str(n.name)}", f"host = {_toml_str(n.host)}", f"port = {n.port}",
                f"user = {_toml_str(n.user)}", f"key_file = {_toml_str(manifest.key_file)}",
                f"known_hosts = {_toml_str(manifest.known_hosts)}", f"timeout = {_toml_str(timeout)}", ""]
    for n in nodes:
        svc = "kimi-" + n.name.partition("-")[2]
        out += ["[[services]]", f"name = {_toml_str(svc)}", f"node = {_toml_str(n.name)}",
                f"unit = {_toml_str(KIMI_UNIT)}", f"bench_dir = {_toml_str(bench_dirs[n.name])}", ""]
    out += ["[state]", f"dir = {_toml_str(str(state_dir))}", "", *extra]
    path.write_text("\n".join(out))


def write_inventory(path: Path, nodes: list[NodeInfo], manifest: Manifest) -> None:
    """An Ansible INI inventory for ``nodes`` (same user, key and addresses as inferbot's config)."""
    out = ["[nodes]"]
    out += [f"{n.name} ansible_host={n.host} ansible_port={n.port} ansible_user={n.user}" for n in nodes]
    out += ["", "[all:vars]", f"ansible_ssh_private_key_file={manifest.key_file}",
            "ansible_python_interpreter=/usr/bin/python3", ""]
    path.write_text("\n".join(out))


def write_ssh_config(path: Path, nodes: list[NodeInfo], manifest: Manifest) -> None:
    """An ssh_config for OpenSSH's client: every node by name, key auth only, host keys checked."""
    out: list[str] = []
    for n in nodes:
        out += [f"Host {n.name}", f"  HostName {n.host}", f"  Port {n.port}", f"  User {n.user}", ""]
    out += ["Host *", f"  IdentityFile {manifest.key_file}", "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {manifest.known_hosts}", "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes", "  BatchMode yes", "  UpdateHostKeys no", "  LogLevel ERROR", ""]
    path.write_text("\n".join(out))


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (by parent pid, as /proc says now)."""
    return process_tree(root)


def reap_all() -> None:
    """SIGKILL and reap every descendant still alive (orphans come back to us as the subreaper)."""
    for _ in range(50):
        pids = _descendants(os.getpid())
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.01)


def write_files(manifest: Manifest, sims: list[SimNode], sshds: list[Sshd], config_ns: list[int],
                workdir: Path) -> None:
    """Fill in the manifest's nodes; write known_hosts, ssh_config, and a config and inventory per N."""
    n_nodes = len(sims)
    for i, (sim, sshd) in enumerate(zip(sims, sshds, strict=True)):
        manifest.nodes.append(NodeInfo(name=node_name(i), host=sshd.host, port=sshd.port, user=sshd.user,
                                       sim_root=str(sim.root), env=sim.shell_env(),
                                       vllm_port=sim.sc.units[0].port))
    Path(manifest.known_hosts).write_text("".join(s.known_hosts_line() + "\n" for s in sshds))
    write_ssh_config(Path(manifest.ssh_config), manifest.nodes, manifest)
    bench_dirs = {node_name(i): s.bench_dir for i, s in enumerate(sims)}
    for n in sorted(set(config_ns)):
        if n > n_nodes:
            continue
        cfg = workdir / f"inferbot-{n}.toml"
        write_config(cfg, manifest.nodes[:n], manifest, workdir / f"state-{n}", bench_dirs)
        inv = workdir / f"inventory-{n}.ini"
        write_inventory(inv, manifest.nodes[:n], manifest)
        manifest.configs[n], manifest.inventories[n] = str(cfg), str(inv)


async def _settle(sim: SimNode, deadline: float) -> None:
    """Wait until the Kimi load is visibly in progress (state loading, a progress line in the journal)."""
    await sim.wait_for(KIMI_UNIT, "loading", max(1.0, deadline - time.monotonic()))
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if "Completed |" in sim.journal_path().read_text(errors="replace"):
                return
        await asyncio.sleep(0.1)


async def run_cluster(n_nodes: int, config_ns: list[int], workdir: Path, manifest_path: Path,
                      start_timeout_s: float) -> int:
    """Start the cluster, write its files and the manifest, wait for the stop signal, tear down."""
    started = time.monotonic()
    os.chmod(workdir, 0o755)
    user = login_user()
    keydir = workdir / "client"
    keydir.mkdir(exist_ok=True)
    key = ClientKey(keydir)
    manifest = Manifest(workdir=str(workdir), key_file=str(key.private), known_hosts=str(workdir / "known_hosts"),
                        ssh_config=str(workdir / "ssh_config"), cluster_pid=os.getpid())
    sims: list[SimNode] = []
    sshds: list[Sshd] = []
    stop = stop_event()
    try:
        _add_sims(sims, n_nodes, workdir, run_as=user if os.geteuid() == 0 else None)
        if not await _start_sims(sims, started + start_timeout_s, start_timeout_s, stop):
            return 1

        async def start_one(i: int) -> Sshd:
            return await asyncio.to_thread(start_sshd, key, sims[i].shell_env(), node_host(i), user)

        sshds.extend(await asyncio.wait_for(asyncio.gather(*(start_one(i) for i in range(n_nodes))),
                                            max(5.0, start_timeout_s - (time.monotonic() - started))))
        write_files(manifest, sims, sshds, config_ns, workdir)
        manifest.start_s = time.monotonic() - started
        manifest.save(manifest_path)
        await stop.wait()
        return 0
    finally:
        for s in sshds:
            s.stop()
        for sim in sims:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sim.stop(), 10)
        reap_all()


def stop_event() -> asyncio.Event:
    """An event set on SIGTERM, SIGINT or SIGHUP, or once standard input closes (the parent closed it or died)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)

    def _watch_stdin() -> None:
        # The raw descriptor, not sys.stdin: a daemon thread blocked in a buffered read aborts shutdown.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):  # returns b"" at EOF: the parent closed the pipe or died
                pass
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=_watch_stdin, daemon=True, name="stdin-eof").start()
    return stop


def _add_sims(sims: list[SimNode], n_nodes: int, workdir: Path, run_as: str | None) -> None:
    """Append ``n_nodes`` simulated Kimi nodes (not started yet), each in its own directory under ``workdir``."""
    for i in range(n_nodes):
        root = workdir / "nodes" / node_name(i)
        root.mkdir(parents=True)
        os.chmod(root, 0o755)
        scenario = kimi_node(port=free_port(), hostname=node_name(i))
        sims.append(SimNode(root, scenario, run_as=run_as))


async def _start_sims(sims: list[SimNode], deadline: float, timeout_s: float, stop: asyncio.Event) -> bool:
    """Start every node and wait until each load is in progress; False when told to stop first.

    Raises TimeoutError when that takes longer than ``timeout_s``.
    """

    async def start_all() -> None:
        await asyncio.gather(*(s.start() for s in sims))
        await asyncio.gather(*(_settle(s, deadline) for s in sims))

    starter = asyncio.ensure_future(asyncio.wait_for(start_all(), timeout_s))
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if not starter.done():
        starter.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starter
        return False
    stopper.cancel()
    starter.result()  # raises TimeoutError when the start-up took too long
    return True


def main() -> int:
    """Entry point of ``python -m bench.cluster``."""
    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--configs", default="", help="comma-separated N: write a config for the first N nodes")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--start-timeout", type=float, default=240.0)
    args = p.parse_args()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    config_ns = [int(x) for x in args.configs.split(",") if x.strip()] or [args.nodes]
    try:
        return asyncio.run(run_cluster(args.nodes, config_ns, args.workdir, args.manifest, args.start_timeout))
    except TimeoutError:
        print(f"bench.cluster: the nodes did not start within {args.start_timeout:g}s", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
