"""Cheap nodes that answer with what a real-systemd node running a busy vLLM answered (issue 26, goals 5–6).

    python -m bench.real_cheap --nodes 512 --configs 1,8,64,512 --workdir DIR --manifest DIR/manifest.json

Like ``bench.cheap`` (real sshd on 127.0.{1…}.x, 16 nodes per sshd, key authentication, host keys checked),
but every node replays the answers recorded by ``python -m bench.real_record`` from the real-systemd tier
(``tests/samples/probe/real-systemd``: a real journal, real ``/metrics`` text, real unit text): the settings,
status, GPU, throughput and logs questions each get their own recorded answer, after the time the real node
took to give it (``--node-time recorded``, the default: a status answer holds two ``/metrics`` samples a second
apart) or at once (``--node-time none``: the client's work alone). The commands are told apart by
a dispatcher script (``ForceCommand``), by their length and, where two are of one length, by a piece of text
only one of them has. Before starting, the commands the bot sends for this config are taken from the bot
itself (each question asked through ``bot.dispatch.answer`` with a pool that only notes the command) and
checked against the recording: a changed probe makes this refuse to start, with the command to re-record.

sshd logs every exec request it serves (``LogLevel VERBOSE``: "Starting session: forced-command"): the manifest names
the logs, so SSH execs are counted on the nodes' side (``exec_count``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.cheap import (
    GROUP,
    NODE_TIMEOUT,
    Group,
    cheap_host,
    reap_orphans,
    start_group,
    write_cheap_ssh_config,
)
from bench.cluster import PR_SET_CHILD_SUBREAPER, reap_all, stop_event, write_config
from bench.common import Manifest, NodeInfo
from bench.real_record import OUT as RECORDING
from bench.real_record import command_id
from tests.sshd import ClientKey, login_user

QUESTIONS = {
    "settings": "what are current settings?",
    "status": "status",
    "gpus": "gpu status",
    "throughput": "throughput",
}
"""The questions the cheap nodes can answer (by kind), each with a recorded answer."""


async def commands_of(config_path: str, questions: list[str]) -> dict[str, list[str]]:
    """What the bot sends a node for each question under ``config_path`` (asked of no node)."""
    from bot.app import runtime
    from bot.dispatch import answer
    from config.loader import load_config
    from config.models import Node
    from handlers.context import Asker
    from services.models import CommandResult, NodeError
    from services.node.ssh import NodeUnreachable

    config = load_config(config_path)
    out: dict[str, list[str]] = {}
    async with runtime(config, with_store=False) as rt:
        for q in questions:
            sent: list[str] = []

            async def noted(node: Node, command: str, *a: Any, sent: list[str] = sent, **kw: Any) -> CommandResult:
                sent.append(command)
                raise NodeUnreachable(NodeError(kind="other", reason="noted, not sent", fix=""))

            rt.pool.run = noted  # type: ignore[method-assign]
            await answer(q, rt.context(Asker(surface="slack"), service_data=False))
            out[q] = sorted(set(sent))
    return out


def _needle(command: str, others: list[str]) -> str:
    """A short piece of ``command`` none of ``others`` has (without a quote: it goes in a shell pattern)."""
    for size in (24, 48, 96, 200):
        for i in range(0, len(command) - size, max(1, size // 4)):
            piece = command[i:i + size]
            if "'" not in piece and "\n" not in piece and not any(piece in o for o in others):
                return piece
    raise ValueError("no piece of the command tells it apart from the others")


def dispatcher(commands: dict[str, str], answers_dir: Path, node_s: dict[str, float] | None = None) -> str:
    """A POSIX sh script answering each command (id -> text) with ``answers_dir/<id>.out``, after waiting
    ``node_s[id]`` seconds when given (the time the real node took)."""
    by_length: dict[int, list[tuple[str, str]]] = {}
    for cid, text in commands.items():
        by_length.setdefault(len(text.encode()), []).append((cid, text))

    def pick(cid: str) -> str:
        wait = (node_s or {}).get(cid, 0.0)
        return f"f={cid}; w={wait:.3f}" if wait >= 0.01 else f"f={cid}"

    lines = ["c=$SSH_ORIGINAL_COMMAND", "w=", "case ${#c} in"]
    for size, group in sorted(by_length.items()):
        if len(group) == 1:
            lines.append(f"  {size}) {pick(group[0][0])};;")
            continue
        arms = " ".join(f"*{shlex.quote(_needle(text, [t for _, t in group if t != text]))}*) {pick(cid)};;"
                        for cid, text in group)
        lines.append(f"  {size}) case $c in {arms} *) f=unknown;; esac;;")
    lines += ["  *) f=unknown;;", "esac", '[ -z "$w" ] || sleep "$w"', f'exec cat -- "{answers_dir}/$f.out"', ""]
    return "\n".join(lines)


def exec_count(logs: list[str]) -> int:
    """SSH exec requests the nodes' sshd served so far (from their VERBOSE logs: each session it starts runs
    the ``ForceCommand``, whatever the client asked)."""
    n = 0
    for path in logs:
        with contextlib.suppress(OSError), open(path, "rb") as f:
            n += f.read().count(b"Starting session: forced-command")
    return n


def _configs(manifest: Manifest, n_nodes: int, config_ns: list[int], bench_dir: str) -> None:
    workdir = Path(manifest.workdir)
    bench_dirs = {n.name: bench_dir for n in manifest.nodes}
    for n in sorted(set(config_ns)):
        if n <= n_nodes:
            cfg = workdir / f"inferbot-{n}.toml"
            (workdir / f"state-{n}").mkdir(exist_ok=True)
            write_config(cfg, manifest.nodes[:n], manifest, workdir / f"state-{n}", bench_dirs, NODE_TIMEOUT)
            manifest.configs[n] = str(cfg)


def _node_files(manifest: Manifest, groups: list[Group], hosts: list[str], user: str, config_ns: list[int],
                bench_dir: str) -> None:
    """known_hosts (a line per node), ssh_config, the nodes and a config per N."""
    Path(manifest.known_hosts).write_text("".join(x + "\n" for g in groups for x in g.known_hosts_lines()))
    write_cheap_ssh_config(Path(manifest.ssh_config), user, manifest.key_file, manifest.known_hosts)
    by_host = {h: g.port for g in groups for h in g.hosts}
    manifest.nodes = [NodeInfo(name=f"cheap-{i + 1:04d}", host=h, port=by_host[h], user=user, sim_root="",
                               env={}, vllm_port=0) for i, h in enumerate(hosts)]
    manifest.configs = {}
    _configs(manifest, len(hosts), config_ns, bench_dir)


async def _answers(manifest: Manifest, meta: dict[str, Any], workdir: Path) -> tuple[Path, dict[str, str]]:
    """The recorded answers where the nodes read them, and the command of each (checked against the recording)."""
    answers_dir = workdir / "answers"
    answers_dir.mkdir()
    os.chmod(answers_dir, 0o755)
    sent = await commands_of(manifest.configs[min(manifest.configs)], list(QUESTIONS.values()))
    commands: dict[str, str] = {}
    for kind, q in QUESTIONS.items():
        ids = [command_id(c) for c in sent[q]]
        if ids != sorted(meta["questions"].get(q, [])):
            raise RuntimeError(f"the bot's command for {kind!r} is not the recorded one (the probe changed): "
                               "re-record with `sudo .venv/bin/python -m bench.real_record`")
        commands.update(zip(ids, sent[q], strict=True))
    for cid in commands:
        target = answers_dir / f"{cid}.out"
        target.write_bytes((RECORDING / f"{cid}.out").read_bytes())
        os.chmod(target, 0o644)
    (answers_dir / "unknown.out").write_text("")
    return answers_dir, commands


async def run(n_nodes: int, config_ns: list[int], workdir: Path, manifest_path: Path, node_time: bool) -> int:
    """Write the configs, check and place the answers, start the sshd groups; serve until told to stop."""
    started = time.monotonic()
    os.chmod(workdir, 0o755)
    user = login_user()
    key = _client_key(workdir)
    meta = json.loads((RECORDING / "meta.json").read_text())
    manifest = Manifest(workdir=str(workdir), key_file=str(key.private), known_hosts=str(workdir / "known_hosts"),
                        ssh_config=str(workdir / "ssh_config"), cluster_pid=os.getpid(), kind="real-cheap")
    stop = stop_event()
    groups: list[Group] = []
    try:
        hosts = [cheap_host(i) for i in range(n_nodes)]
        answers_dir, commands = await _probe_answers(manifest, meta, workdir, hosts[0], user)
        # As the subreaper this process inherits what sshd orphans: reaped as they die (see bench.cheap).
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, reap_orphans)
        script = _write_dispatcher(workdir, commands, answers_dir, meta, node_time)
        if not await _start_groups(groups, hosts, workdir, key, answers_dir, script, stop):
            return 1
        _node_files(manifest, groups, hosts, user, config_ns, meta["bench_dir"])
        manifest.recording = _recording(meta, node_time)
        manifest.node_side = _node_side(n_nodes, groups)
        manifest.start_s = time.monotonic() - started
        manifest.save(manifest_path)
        await stop.wait()
        return 0
    finally:
        for g in groups:
            g.stop()
        reap_all()


def _client_key(workdir: Path) -> ClientKey:
    """The client's key pair, in ``workdir/client``."""
    keydir = workdir / "client"
    keydir.mkdir(exist_ok=True)
    return ClientKey(keydir)


async def _probe_answers(manifest: Manifest, meta: dict[str, Any], workdir: Path, host: str, user: str
                         ) -> tuple[Path, dict[str, str]]:
    """The recorded answers placed and the command of each, taken from the bot under a one-node config."""
    # The addresses and ports are known only once the groups listen: the configs are written after, but the
    # commands (which name no node) are taken from a one-node config first.
    manifest.nodes = [NodeInfo(name="probe-0001", host=host, port=22, user=user, sim_root="", env={},
                               vllm_port=0)]
    _configs(manifest, 1, [1], meta["bench_dir"])
    return await _answers(manifest, meta, workdir)


def _write_dispatcher(workdir: Path, commands: dict[str, str], answers_dir: Path, meta: dict[str, Any],
                      node_time: bool) -> Path:
    """``workdir/answer.sh``, the nodes' ``ForceCommand`` (waiting as the real node took when ``node_time``)."""
    script = workdir / "answer.sh"
    waits = {c: float(meta["commands"][c].get("node_s", 0.0)) for c in commands} if node_time else None
    script.write_text(dispatcher(commands, answers_dir, waits))
    os.chmod(script, 0o755)
    return script


async def _start_groups(groups: list[Group], hosts: list[str], workdir: Path, key: ClientKey, answers_dir: Path,
                        script: Path, stop: asyncio.Event) -> bool:
    """Start an sshd per ``GROUP`` hosts (appended to ``groups`` as each listens); False when told to stop first."""
    for first in range(0, len(hosts), GROUP):
        if stop.is_set():
            return False
        gdir = workdir / "sshd" / f"g{first // GROUP:03d}"
        groups.append(await asyncio.to_thread(start_group, hosts[first:first + GROUP], gdir, key.public,
                                              answers_dir, f"exec /bin/sh {script}", "VERBOSE"))
    return True


def _recording(meta: dict[str, Any], node_time: bool) -> dict[str, Any]:
    """The manifest's account of the recording: where from, when, each question's answer sizes (and node times)."""
    return {"from": meta["from"], "recorded_at": meta["recorded_at"],
            "answers": {k: [meta["commands"][c]["answer_bytes"] for c in meta["questions"][q]]
                        for k, q in QUESTIONS.items()},
            "node_s": {k: [meta["commands"][c].get("node_s") for c in meta["questions"][q]]
                       for k, q in QUESTIONS.items()} if node_time else None}


def _node_side(n_nodes: int, groups: list[Group]) -> dict[str, Any]:
    """The manifest's node side: how many nodes and sshd, and the sshd's logs (``exec_count`` reads them) and pids."""
    return {"nodes": n_nodes, "sshd_processes": len(groups), "sshd_logs": [str(g.dir / "sshd.log") for g in groups],
            "sshd_pids": [g.proc.pid for g in groups]}


def main() -> int:
    """Entry point of ``python -m bench.real_cheap``."""
    p = argparse.ArgumentParser(prog="python -m bench.real_cheap", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--configs", default="", help="comma-separated N: an inferbot config for the first N nodes")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--start-timeout", type=float, default=240.0)
    p.add_argument("--node-time", choices=["recorded", "none"], default="recorded",
                   help="answer after the time the real node took (default), or at once")
    args = p.parse_args()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    config_ns = [int(x) for x in args.configs.split(",") if x.strip()] or [args.nodes]
    return asyncio.run(run(args.nodes, config_ns, args.workdir, args.manifest, args.node_time == "recorded"))


if __name__ == "__main__":
    sys.exit(main())
