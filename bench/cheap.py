"""Cheap nodes: real sshd on loopback that answer the probe with a recorded answer of the simulated Kimi node.

Run by ``python -m bench`` as a separate process (so the measuring side's CPU and RSS are its own):

    python -m bench.cheap --nodes 1024 --configs 1,64,256,512,1024 --watch-configs 512 \\
        --workdir DIR --manifest DIR/manifest.json [--node-cost]

How they are made:

1. **Recording.** Two simulated Kimi nodes (``services.sim``) start behind their own real sshd, as in
   ``bench.cluster``: one 13 minutes into its 30-minute load (what ``bench.cluster`` measures), one whose
   load has finished (ready; what the watcher sees most of its life). The settings question's remote
   command (``bench.contenders.settings_commands``, the bot's own probe) and the watcher's
   (``handlers.watcher.WATCH_PROBE``, taken from ``Cluster.probe_node`` itself) are run once over real
   SSH with OpenSSH's ``ssh``; their stdout bytes are the recorded answers (settings: the loading node,
   watcher: the ready node). The leader's watcher asks the same probe on a persistent session (one per
   node, answered once per newline: ``NodePool.ask``); that command is run once too, with one line of
   input, and its answer (the same answer, then its ``done`` line) recorded. With ``--node-cost`` the same
   commands are also run locally on both nodes to measure what the probe costs a node (``bench.nodecost``:
   CPU and forks).
2. **The nodes.** Node *i* is the address ``127.0.{1 + i // 250}.{2 + i % 250}`` (127.0.0.x stays free for
   ``bench.cluster`` and the tests). One ``sshd -D`` serves 16 nodes (OpenSSH takes at most 16
   ``ListenAddress``), each group on its own port with its own host key; known_hosts has one line per node
   and every client checks it. Key authentication only, as the login user of ``tests.sshd``.
   ``ForceCommand … exec cat -- ANSWERS/${#SSH_ORIGINAL_COMMAND}`` answers every command with the recorded
   answer to the command of that length (the settings probe, the watcher's probe, and ``true`` — with an
   empty answer — for OpenSSH's multiplexing masters to warm up); any other command fails loudly
   (``cat: …: No such file``). The watcher's persistent session (its length has a ``.loop`` file) gets a
   shell that ``cat``s its recorded answer once per line read, as the bot's session loop answers. The
   lengths are checked to be distinct when recording. So the node's work per question is sshd's own (a
   channel, a fork) plus a shell that execs ``cat``, and per watcher poll a ``cat``: no probe runs.
3. sshd's limits are raised for hundreds of simultaneous connects (``MaxStartups``, ``MaxSessions``,
   ``LoginGraceTime``). Their key exchange is curve25519 only: connection set-up is not measured on
   cheap nodes (every contender is warm), and OpenSSH's default sntrup761 would cost ~0.2 s of CPU per
   connection on each side, minutes at 1,024 nodes.

The node side's cost (processes, RSS/PSS, CPU per question) is measured by the orchestrator from /proc
(``bench.common.tree_cpu_s`` / ``tree_memory`` on this process's tree) and reported with the results.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from bench.cluster import (
    PR_SET_CHILD_SUBREAPER,
    _settle,
    reap_all,
    stop_event,
    write_config,
    write_ssh_config,
)
from bench.common import CpuGroup, Manifest, NodeInfo
from bench.contenders import END_MARK, settings_commands, watch_commands
from bench.nodecost import measure as measure_node_cost
from bench.nodecost import node_env
from services.node.journal_stream import stream_command
from services.node.probe import session_answer_end
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.sshd import SSHD, ClientKey, Sshd, free_port, login_user, start_sshd

GROUP = 16  # OpenSSH's limit of ListenAddress lines per sshd
MAX_NODES = 250 * 250
WATCH_INTERVAL = "15s"
NODE_TIMEOUT = "120s"  # the first question opens up to 1,024 connections at once: the handshakes queue
STREAM_COMMAND = stream_command([KIMI_UNIT])
"""The leader's journal stream of a cheap node (one Kimi unit each): run as it is (see :func:`force_command`)."""
WARM_COMMAND = "true"  # what OpenSSH's multiplexing masters are opened with (bench.contenders)


def cheap_host(i: int) -> str:
    """The i-th cheap node's loopback address (0-based): 127.0.1.2 … 127.0.1.251, 127.0.2.2, …"""
    if not 0 <= i < MAX_NODES:
        raise ValueError(f"at most {MAX_NODES} cheap nodes")
    return f"127.0.{1 + i // 250}.{2 + i % 250}"


def cheap_name(i: int) -> str:
    """The i-th cheap node's name: cheap-0001, cheap-0002, …"""
    return f"cheap-{i + 1:04d}"


def force_command(answers_dir: Path) -> str:
    """sshd's ``ForceCommand``: the recorded answer to a command of this length (the login shell runs it).

    A persistent session's command (a ``LENGTH.loop`` file beside its answer) gets the answer again for each
    line it reads, as the bot's session loop does, until its input ends: between polls the shell sits in
    read(2), and a poll costs a ``cat``. A command with a ``LENGTH.run`` file is run as it is (the file holds
    the bot's own command): the leader's journal stream, a real ``journalctl --follow`` of this host's
    journal, where nothing happens.
    """
    f = f"{answers_dir}/${{#SSH_ORIGINAL_COMMAND}}"
    return (f'f={f}; if [ -e "$f.run" ]; then exec sh -- "$f"; elif [ -e "$f.loop" ]; then '
            f'while read -r t; do cat -- "$f"; done; else exec cat -- "$f"; fi')


def write_answers(answers_dir: Path, answers: dict[str, bytes], looping: Collection[str] = (),
                  running: Collection[str] = ()) -> dict[str, int]:
    """One file per command, named by the command's length in bytes; refuses two commands of one length.

    ``looping``: the commands of persistent sessions, answered once per line read; ``running``: commands run
    as they are, their answer being the command itself (see :func:`force_command`).
    """
    answers_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(answers_dir, 0o755)
    lengths: dict[int, str] = {}
    for command in answers:
        size = len(command.encode())
        if size in lengths and lengths[size] != command:
            raise ValueError(f"two recorded commands have the same length ({size} bytes): the cheap nodes "
                             "could not tell them apart")
        lengths[size] = command
    for command, answer in answers.items():
        path = answers_dir / str(len(command.encode()))
        path.write_bytes(answer)
        os.chmod(path, 0o644)
        for mark, which in ((".loop", looping), (".run", running)):
            marker = path.with_name(path.name + mark)
            if command in which:
                marker.write_bytes(b"")
                os.chmod(marker, 0o644)
            else:
                marker.unlink(missing_ok=True)
    return {c: len(c.encode()) for c in answers}


def sshd_config(hosts: list[str], port: int, d: Path, answers_dir: Path, force: str | None = None,
                log_level: str = "ERROR") -> str:
    """The sshd_config of one group of up to 16 cheap nodes (``force``: another ``ForceCommand``; ``log_level``
    VERBOSE logs each session it starts, "Starting session: forced-command", for counting them on the node's side)."""
    if len(hosts) > GROUP:
        raise ValueError(f"OpenSSH takes at most {GROUP} ListenAddress lines")
    listen = "".join(f"ListenAddress {h}:{port}\n" for h in hosts)
    return (
        f"{listen}HostKey {d}/host_key\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"PermitRootLogin prohibit-password\nStrictModes no\nLogLevel {log_level}\n"
        "MaxStartups 4096\nMaxSessions 64\nLoginGraceTime 600\nClientAliveInterval 0\n"
        "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n"
        "PermitTTY no\nX11Forwarding no\nAllowTcpForwarding no\nAllowAgentForwarding no\nPermitUserRC no\n"
        "PrintMotd no\nPrintLastLog no\n"
        f"ForceCommand {force or force_command(answers_dir)}\n"
    )


@dataclass
class Group:
    """One sshd serving up to 16 cheap nodes."""

    hosts: list[str]
    port: int
    dir: Path
    proc: subprocess.Popen[bytes]
    host_public: str

    def known_hosts_lines(self) -> list[str]:
        """One line per node, ``[host]:port key``."""
        return [f"[{h}]:{self.port} {self.host_public}" for h in self.hosts]

    def stop(self) -> None:
        """Stop this sshd (its connection processes go with it: the cluster reaps what is left)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(3)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def _port_free_on(hosts: list[str], port: int) -> bool:
    for h in hosts:
        with socket.socket() as s:
            try:
                s.bind((h, port))
            except OSError:
                return False
    return True


def _all_accept(hosts: list[str], port: int) -> bool:
    for h in hosts:
        with socket.socket() as s:
            if s.connect_ex((h, port)) != 0:
                return False
    return True


def start_group(hosts: list[str], workdir: Path, client_pub: Path, answers_dir: Path, force: str | None = None,
                log_level: str = "ERROR") -> Group:
    """Start one sshd listening on every address of ``hosts`` (one port for all) and wait until all accept
    (``force``, ``log_level``: see :func:`sshd_config`)."""
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    d = workdir
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o755)  # sshd reads authorized_keys as the login user
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(d / "host_key"))
    os.chmod(d / "host_key", 0o600)
    host_public = host_key.export_public_key().decode().strip()
    shutil.copy(client_pub, d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o644)
    last = ""
    for _ in range(8):
        port = free_port(hosts[0])
        if not _port_free_on(hosts, port):
            continue
        (d / "sshd_config").write_text(sshd_config(hosts, port, d, answers_dir, force, log_level))
        proc = subprocess.Popen([SSHD, "-D", "-E", str(d / "sshd.log"), "-f", str(d / "sshd_config")],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if _all_accept(hosts, port):
                return Group(hosts=hosts, port=port, dir=d, proc=proc, host_public=host_public)
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            last = (d / "sshd.log").read_text(errors="replace")[-1500:]
        proc.kill()
        proc.wait()
    raise RuntimeError(f"sshd for {hosts[0]}… did not start: {last}")


def write_cheap_ssh_config(path: Path, user: str, key_file: str, known_hosts: str) -> None:
    """OpenSSH's client config for the cheap nodes: no Host blocks (the address and ``-p PORT`` are given on
    the command line, so ``ssh`` does not parse a thousand entries per call); key auth, host keys checked."""
    path.write_text("\n".join([
        "Host *", f"  User {user}", f"  IdentityFile {key_file}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {known_hosts}", "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes",
        "  BatchMode yes", "  UpdateHostKeys no", "  LogLevel ERROR", "  CheckHostIP no", ""]))


# ----------------------------------------------------------------------------------------------------------
# recording the simulated node's answers


async def _ssh_once(ssh_config: Path, name: str, command: str, stdin: bytes | None = None
                    ) -> tuple[bytes, bytes, int]:
    proc = await asyncio.create_subprocess_exec(
        "ssh", "-F", str(ssh_config), "-o", "ControlMaster=no", "-o", "ControlPath=none", name, command,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    return out, err, proc.returncode or 0


def _recording_files(m: Manifest, infos: dict[str, NodeInfo], known: list[str], bench_dirs: dict[str, str]
                     ) -> dict[str, dict[str, str]]:
    """known_hosts, ssh_config and a config per recording node; the settings and watch command of each."""
    rec = Path(m.workdir)
    Path(m.known_hosts).write_text("".join(x + "\n" for x in known))
    write_ssh_config(Path(m.ssh_config), list(infos.values()), m)
    commands: dict[str, dict[str, str]] = {}
    for state, info in infos.items():
        cfg = rec / f"inferbot-{state}.toml"
        write_config(cfg, [info], m, rec / f"state-{state}", {info.name: bench_dirs[info.name]})
        commands[state] = {"settings": settings_commands(str(cfg))[info.name],
                           "watch": watch_commands(str(cfg))[info.name][0],
                           "watch-session": watch_commands(str(cfg), persistent=True)[info.name][0]}
    return commands


def _recording_sims(rec: Path, run_as: str | None) -> dict[str, SimNode]:
    """The two simulated Kimi nodes to record (not started): one loading, one whose load is quick (ready)."""
    sims: dict[str, SimNode] = {}
    for state, fast in (("loading", False), ("ready", True)):
        root = rec / state
        root.mkdir()
        os.chmod(root, 0o755)
        sims[state] = SimNode(root, kimi_node(port=free_port(), hostname=f"node-{state}", fast=fast), run_as=run_as)
    return sims


async def _serve_over_ssh(sims: dict[str, SimNode], key: ClientKey, user: str, sshds: list[Sshd]
                          ) -> tuple[dict[str, NodeInfo], list[str]]:
    """A real sshd in front of each simulated node (appended to ``sshds`` as it starts, for the caller to stop);
    the nodes as the bench describes them, and their known_hosts lines."""
    infos: dict[str, NodeInfo] = {}
    known: list[str] = []
    for state, sim in sims.items():
        sshd = await asyncio.to_thread(start_sshd, key, sim.shell_env(), "127.0.0.1", user)
        sshds.append(sshd)
        known.append(sshd.known_hosts_line())
        infos[state] = NodeInfo(name=f"rec-{state}", host=sshd.host, port=sshd.port, user=user,
                                sim_root=str(sim.root), env=sim.shell_env(), vllm_port=sim.sc.units[0].port)
    return infos, known


async def _record_answers(ssh_config: Path, name: str, state: str, commands: dict[str, str]) -> dict[str, bytes]:
    """Ask one recording node each command once over real SSH; its stdout, checked to be a whole answer."""
    answers: dict[str, bytes] = {}
    for what in ("settings", "watch", "watch-session"):
        # The persistent session (the leader's watcher) is asked once: one line in, one answer and
        # its "done" line out, then its input ends and so does its loop.
        out, err, rc = await _ssh_once(ssh_config, name, commands[what], b"\n" if what == "watch-session" else None)
        if rc != 0 or END_MARK.encode() not in out or (
                what == "watch-session" and session_answer_end(bytearray(out)) is None):
            raise RuntimeError(f"recording the {what} answer of the {state} node failed (exit {rc}): "
                               f"{err.decode(errors='replace')[-500:]}")
        answers[what] = out
    return answers


async def _node_cost(infos: dict[str, NodeInfo], commands: dict[str, dict[str, str]], user: str,
                     run_as: str | None) -> dict[str, Any]:
    """The settings and watch probes run locally on each recording node: their CPU and forks there."""
    cost: dict[str, Any] = {}
    for state, info in infos.items():
        env = node_env(user, info.env)
        for what in ("settings", "watch"):
            cost.setdefault(what, {})[state] = await asyncio.to_thread(
                measure_node_cost, commands[state][what], env, run_as, 5)
    return cost


def _recorded(sims: dict[str, SimNode], commands: dict[str, dict[str, str]], answers: dict[str, dict[str, bytes]],
              cost: dict[str, Any]) -> dict[str, Any]:
    """What :func:`record` returns: the commands the cheap nodes answer, with their recorded answers."""
    return {
        # Every cheap node is configured like the loading node (same unit, same bench_dir): the bot's
        # settings command for it is the one recorded; the watcher's command has no per-node part.
        "bench_dir": sims["loading"].bench_dir,
        "settings_command": commands["loading"]["settings"],
        "watch_command": commands["ready"]["watch"],
        "watch_session_command": commands["ready"]["watch-session"],
        "settings_answer": answers["loading"]["settings"],
        "watch_answer": answers["ready"]["watch"],
        "watch_session_answer": answers["ready"]["watch-session"],
        "node_cost": cost,
        "answers_by_state": {s: {w: len(a) for w, a in v.items()} for s, v in answers.items()},
    }


async def record(workdir: Path, key: ClientKey, user: str, node_cost: bool, timeout_s: float = 120.0
                 ) -> dict[str, Any]:
    """Start the two simulated nodes, record their answers over SSH (and measure the probe's node cost)."""
    run_as = user if os.geteuid() == 0 else None
    rec = workdir / "recording"
    rec.mkdir()
    os.chmod(rec, 0o755)
    sims = _recording_sims(rec, run_as)
    sshds: list[Sshd] = []
    try:
        await asyncio.gather(*(s.start() for s in sims.values()))
        deadline = time.monotonic() + timeout_s
        await asyncio.gather(_settle(sims["loading"], deadline), sims["ready"].wait_for(KIMI_UNIT, "ready", timeout_s))
        infos, known = await _serve_over_ssh(sims, key, user, sshds)
        m = Manifest(workdir=str(rec), key_file=str(key.private), known_hosts=str(rec / "known_hosts"),
                     ssh_config=str(rec / "ssh_config"))
        bench_dirs = {info.name: sims[state].bench_dir for state, info in infos.items()}
        commands = await asyncio.to_thread(_recording_files, m, infos, known, bench_dirs)
        answers = {state: await _record_answers(Path(m.ssh_config), info.name, state, commands[state])
                   for state, info in infos.items()}
        cost = await _node_cost(infos, commands, user, run_as) if node_cost else {}
        return _recorded(sims, commands, answers, cost)
    finally:
        for s in sshds:
            s.stop()
        for sim in sims.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sim.stop(), 10)


# ----------------------------------------------------------------------------------------------------------
# the cluster process


def _cheap_files(manifest: Manifest, groups: list[Group], user: str, n_nodes: int, config_ns: list[int],
                 watch_ns: list[int], bench_dir: str) -> None:
    """known_hosts (one line per node), ssh_config, and an inferbot config per N (and per watcher N)."""
    workdir = Path(manifest.workdir)
    Path(manifest.known_hosts).write_text("".join(x + "\n" for g in groups for x in g.known_hosts_lines()))
    write_cheap_ssh_config(Path(manifest.ssh_config), user, manifest.key_file, manifest.known_hosts)
    manifest.nodes = _cheap_nodes(n_nodes, groups, user)
    bench_dirs = {n.name: bench_dir for n in manifest.nodes}
    for n in sorted(set(config_ns)):
        if n <= n_nodes:
            cfg = workdir / f"inferbot-{n}.toml"
            write_config(cfg, manifest.nodes[:n], manifest, workdir / f"state-{n}", bench_dirs, NODE_TIMEOUT)
            manifest.configs[n] = str(cfg)
    for n in sorted(set(watch_ns)):
        if n <= n_nodes:
            cfg = workdir / f"inferbot-watch-{n}.toml"
            write_config(cfg, manifest.nodes[:n], manifest, workdir / f"state-watch-{n}", bench_dirs,
                         NODE_TIMEOUT, ["[watch]", f'interval = "{WATCH_INTERVAL}"', "push = false", ""])
            manifest.watch_configs[n] = str(cfg)
            # The same with the leader's journal streams (issue 26), the safety poll at its default interval.
            cfg = workdir / f"inferbot-watch-push-{n}.toml"
            write_config(cfg, manifest.nodes[:n], manifest, workdir / f"state-watch-push-{n}", bench_dirs,
                         NODE_TIMEOUT, ["[watch]", f'interval = "{WATCH_INTERVAL}"', "push = true", ""])
            manifest.push_watch_configs[n] = str(cfg)


def reap_orphans() -> None:
    """Reap every child that has exited (an sshd listener too: Popen then finds it gone, which is fine)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")


def _raise_inotify_instances(want: int) -> int | None:
    """Every cheap node's journal stream is a real ``journalctl --follow`` (one inotify instance each), all of
    them the one login user's on this one host (a real node has one): raise the per-user limit (128 by
    default) for the run; returns the value to put back, None when unchanged."""
    try:
        was = int(INOTIFY_INSTANCES.read_text())
        if was >= want:
            return None
        INOTIFY_INSTANCES.write_text(f"{want}\n")
        return was
    except (OSError, ValueError):
        return None  # not root: the streams past the limit fail, and the idle leader's figure says so


def _put_inotify_back(was: int) -> None:
    with contextlib.suppress(OSError):
        INOTIFY_INSTANCES.write_text(f"{was}\n")


def _cheap_nodes(n: int, groups: list[Group], user: str) -> list[NodeInfo]:
    by_host = {h: g.port for g in groups for h in g.hosts}
    return [NodeInfo(name=cheap_name(i), host=cheap_host(i), port=by_host[cheap_host(i)], user=user, sim_root="",
                     env={}, vllm_port=0) for i in range(n)]


@dataclass
class _NodeSide:
    """What the cluster process starts and must undo: the sshd groups, their cgroup, the raised inotify limit."""

    cpu_group: CpuGroup | None
    inotify_was: int | None = None
    groups: list[Group] = field(default_factory=list)

    async def start_groups(self, hosts: list[str], workdir: Path, client_pub: Path, answers_dir: Path,
                           stop: asyncio.Event) -> bool:
        """One sshd per ``GROUP`` hosts, each put in the cgroup; False when told to stop first."""
        for first in range(0, len(hosts), GROUP):
            if stop.is_set():
                return False
            gdir = workdir / "sshd" / f"g{first // GROUP:03d}"
            self.groups.append(await asyncio.to_thread(start_group, hosts[first:first + GROUP], gdir, client_pub,
                                                       answers_dir))
            if self.cpu_group is not None and not self.cpu_group.add(self.groups[-1].proc.pid):
                self.cpu_group = None
        return True

    def close(self) -> None:
        """Stop every sshd, reap what is left, remove the cgroup and put the inotify limit back."""
        for g in self.groups:
            g.stop()
        reap_all()
        if self.cpu_group is not None:
            self.cpu_group.remove()
        if self.inotify_was is not None:
            _put_inotify_back(self.inotify_was)


def _write_recorded_answers(answers_dir: Path, rec: dict[str, Any]) -> dict[str, int]:
    """The answers directory the cheap nodes serve: the recorded answers, the warm-up's and the journal stream's."""
    return write_answers(answers_dir, {
        rec["settings_command"]: rec["settings_answer"], rec["watch_command"]: rec["watch_answer"],
        rec["watch_session_command"]: rec["watch_session_answer"], WARM_COMMAND: b"",
        STREAM_COMMAND: STREAM_COMMAND.encode()},
        [rec["watch_session_command"]], [STREAM_COMMAND])


def _answer_entry(origin: str, command_bytes: int, answer: bytes, answers_dir: Path) -> dict[str, Any]:
    """One recorded answer as the manifest describes it."""
    return {"from": origin, "command_bytes": command_bytes, "answer_bytes": len(answer),
            "answer_sha256": hashlib.sha256(answer).hexdigest(), "answer_file": str(answers_dir / str(command_bytes))}


def _recording_summary(rec: dict[str, Any], lengths: dict[str, int], answers_dir: Path, record_s: float
                       ) -> dict[str, Any]:
    """The manifest's ``recording``: where each answer came from, its size, digest and file."""
    ready = "simulated Kimi node, loaded and ready"
    return {
        "settings": _answer_entry("simulated Kimi node, 13 min into a 30 min load (as bench.cluster)",
                                  lengths[rec["settings_command"]], rec["settings_answer"], answers_dir),
        "watch": _answer_entry(ready, lengths[rec["watch_command"]], rec["watch_answer"], answers_dir),
        # What the leader's watcher asks: the same probe on one persistent session per node, answered
        # (the same answer, then its "done" line) once per newline.
        "watch_session": _answer_entry(ready, lengths[rec["watch_session_command"]], rec["watch_session_answer"],
                                       answers_dir),
        "answers_by_state": rec["answers_by_state"],
        "node_cost": rec["node_cost"],
        "record_s": round(record_s, 1),
    }


def _node_side_summary(side: _NodeSide, n_nodes: int, groups_s: float, answers_dir: Path) -> dict[str, Any]:
    """The manifest's ``node_side``: the sshd processes serving the nodes and how their CPU is read."""
    cpu_group = side.cpu_group
    return {
        "nodes": n_nodes, "sshd_processes": len(side.groups), "nodes_per_sshd": GROUP,
        "sshd_pids": [g.proc.pid for g in side.groups], "start_sshd_s": round(groups_s, 2),
        "force_command": force_command(answers_dir),
        "addresses": f"{cheap_host(0)} … {cheap_host(n_nodes - 1)}",
        "cgroup": str(cpu_group.path) if cpu_group is not None else None,
        "cpu_accounting": ("cgroup v2 cpu.stat" if cpu_group.v2 else "cgroup v1 cpuacct.usage")
        if cpu_group is not None else "/proc utime+stime+cutime+cstime of the sshd tree (clock ticks; a "
                                      "child counts once reaped)",
    }


async def run_cheap(n_nodes: int, config_ns: list[int], watch_ns: list[int], workdir: Path, manifest_path: Path,
                    node_cost: bool, start_timeout_s: float) -> int:
    """Record, start the groups, write the files and the manifest, wait for the stop signal, tear down."""
    started = time.monotonic()
    os.chmod(workdir, 0o755)
    user = login_user()
    keydir = workdir / "client"
    keydir.mkdir(exist_ok=True)
    key = ClientKey(keydir)
    manifest = Manifest(workdir=str(workdir), key_file=str(key.private), known_hosts=str(workdir / "known_hosts"),
                        ssh_config=str(workdir / "ssh_config"), cluster_pid=os.getpid(), kind="cheap")
    # Every sshd (and each connection and shell it forks) in a cgroup of its own: the node side's CPU per
    # question is read from it (bench.contenders.openssh_multiplexed).
    side = _NodeSide(CpuGroup.create(f"ibench-cheap-{os.getpid()}"))
    stop = stop_event()
    side.inotify_was = _raise_inotify_instances(n_nodes + 128)
    try:
        rec = await asyncio.wait_for(record(workdir, key, user, node_cost), start_timeout_s)
        record_s = time.monotonic() - started
        # As the subreaper this process inherits what sshd orphans (about one process per closed connection):
        # reap them as they die instead of holding thousands of zombies. Only now: the simulated nodes'
        # processes, whose exit statuses asyncio waits for, are gone.
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, reap_orphans)
        reap_orphans()
        answers_dir = workdir / "answers"
        lengths = await asyncio.to_thread(_write_recorded_answers, answers_dir, rec)
        t0 = time.monotonic()
        if not await side.start_groups([cheap_host(i) for i in range(n_nodes)], workdir, key.public, answers_dir,
                                       stop):
            return 1
        groups_s = time.monotonic() - t0
        _cheap_files(manifest, side.groups, user, n_nodes, config_ns, watch_ns, rec["bench_dir"])
        manifest.recording = _recording_summary(rec, lengths, answers_dir, record_s)
        manifest.node_side = _node_side_summary(side, n_nodes, groups_s, answers_dir)
        manifest.start_s = time.monotonic() - started
        manifest.save(manifest_path)
        await stop.wait()
        return 0
    finally:
        side.close()


def main() -> int:
    """Entry point of ``python -m bench.cheap``."""
    p = argparse.ArgumentParser(prog="python -m bench.cheap", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--configs", default="", help="comma-separated N: an inferbot config for the first N nodes")
    p.add_argument("--watch-configs", default="", help="comma-separated N: a config with [watch] interval 15s")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--node-cost", action="store_true", help="also measure the probe's CPU and forks on the node")
    p.add_argument("--start-timeout", type=float, default=240.0)
    args = p.parse_args()
    if not 1 <= args.nodes <= MAX_NODES:
        p.error(f"--nodes must be between 1 and {MAX_NODES}")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    config_ns = [int(x) for x in args.configs.split(",") if x.strip()] or [args.nodes]
    watch_ns = [int(x) for x in args.watch_configs.split(",") if x.strip()]
    try:
        return asyncio.run(run_cheap(args.nodes, config_ns, watch_ns, args.workdir, args.manifest, args.node_cost,
                                     args.start_timeout))
    except TimeoutError:
        print(f"bench.cheap: the recording did not finish within {args.start_timeout:g}s", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
