"""The bot's own cost per node, isolated: recorded probe answers, pure client path and real SSH.

    python -m bench.profile_client record --out DIR               # what a simulated Kimi node answers
    python -m bench.profile_client pure -n 512 --runs 3            # parse → assemble → redact → handler → Reply
    python -m bench.profile_client ssh -n 512 --runs 3 [--connect-first]   # real sshd, pooled connections
    python -m bench.profile_client watch --direct 300              # one watcher poll after another, no SSH
    python -m bench.profile_client watch -n 64 --interval 2 --seconds 20 [--ssh]   # the scheduler's watchers

``record`` starts one simulated Kimi node behind a real sshd and saves what the settings question's probe and
the watcher's probe print (loading, and ready with traffic); by default the other modes use the copies in
``tests/samples/probe`` (``--rec DIR`` for others: re-record when the probe's wire format changes). ``pure``
replaces the pool by one that hands back the recording (no SSH at all) and asks the whole question through
``bot.dispatch.answer``: what is left is the client's own work per node. ``ssh`` starts sshds on loopback
addresses (16 per sshd) that answer every session with ``cat`` of the recording, so the SSH layer (handshake
once, then one channel per question) is measured too; the state database is created beforehand by another
process, as a restarted serving bot finds it. ``watch`` runs the watcher's job (``bot.jobs.watch_node_job``),
directly or from a real ``BotScheduler``, with token counters that move on every poll. Each prints one JSON
object; ``--profile FILE`` writes a cProfile of the measured part. CPU is this process's user+sys (getrusage,
every thread), so it is meaningful on a busy machine where wall time is not.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import QUESTION, read_vm_hwm_kib

_LISTEN_PER_SSHD = 16  # sshd listens on at most 16 sockets (MAX_LISTEN_SOCKS)


SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "samples" / "probe"  # recorded by `record` too
KIMI_UNIT = "vllm-kimi-k25-int4.service"  # services.sim.scenarios.KIMI_UNIT, without importing the simulator


def _meta(rec: Path) -> dict[str, Any]:
    """What ``record`` wrote beside the answers (the tests' samples have only the answers: the Kimi unit)."""
    path = rec / "meta.json"
    return json.loads(path.read_text()) if path.exists() else {"unit": KIMI_UNIT}


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user+sys) of each thread of this process, by name (``comm``) and id."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        out[f"{comm}:{tid}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _vm_rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---------------------------------------------------------------------------------------------------------
# record


async def record(out: Path) -> dict[str, Any]:
    """Start one simulated Kimi node (loading, then a fast one that becomes ready) and save the probes' answers."""
    from config.models import BotConfig
    from handlers.settings import SETTINGS_PROBE
    from handlers.watcher import WATCH_PROBE
    from services.cluster import Cluster
    from services.node.ssh import NodePool
    from services.sim.node import SimNode
    from services.sim.scenarios import KIMI_UNIT, kimi_node
    from tests.sshd import ClientKey, free_port, login_user, start_sshd

    work = Path(tempfile.mkdtemp(prefix="inferbot-rec-"))
    os.chmod(work, 0o755)
    user = login_user()
    run_as = user if os.geteuid() == 0 else None
    key = ClientKey(work)
    saved: dict[str, Any] = {}
    try:
        for label, scenario in (
            ("loading", kimi_node(port=free_port(), hostname="node-01")),
            ("ready", kimi_node(fast=True, port=free_port(), hostname="node-01", traffic_tps=900.0)),
        ):
            root = work / label
            root.mkdir()
            os.chmod(root, 0o755)
            sim = SimNode(root, scenario, run_as=run_as)
            await sim.start()
            sshd = start_sshd(key, sim.shell_env(), "127.0.0.1", user)
            try:
                if label == "ready":
                    await sim.wait_for(KIMI_UNIT, "ready", 120)
                    await asyncio.sleep(2)  # a stats line in the journal, tokens flowing
                else:
                    await asyncio.sleep(3)
                (work / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
                config = BotConfig.model_validate({
                    "nodes": [{"name": "node-01", "host": sshd.host, "port": sshd.port, "user": sshd.user,
                               "key_file": str(key.private), "known_hosts": str(work / "known_hosts")}],
                    "services": [{"name": "kimi-01", "node": "node-01", "unit": KIMI_UNIT,
                                  "bench_dir": sim.bench_dir}],
                })
                pool = NodePool()
                cluster = Cluster(config, pool)
                real_run = pool.run
                captured: list[tuple[str, str]] = []

                async def rec_run(*a: Any, _real: Any = real_run, _cap: Any = captured, **kw: Any) -> Any:
                    result = await _real(*a, **kw)
                    _cap.append((a[1], result.stdout))
                    return result

                pool.run = rec_run  # type: ignore[method-assign]
                for what, opts in (("settings", SETTINGS_PROBE), ("watch", WATCH_PROBE)):
                    captured.clear()
                    await cluster.probe_node(config.nodes[0], config.services, opts)
                    command, stdout = captured[-1]
                    (out / f"{what}-{label}.out").write_text(stdout)
                    (out / f"{what}-{label}.cmd").write_text(command)
                    saved[f"{what}-{label}"] = {"bytes": len(stdout.encode()), "command_bytes": len(command)}
                await pool.close()
            finally:
                sshd.stop()
                await sim.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out / "meta.json").write_text(json.dumps({"unit": KIMI_UNIT, "files": saved}, indent=1))
    return saved


# ---------------------------------------------------------------------------------------------------------
# shared: a config of N nodes, each with one Kimi service


def write_config(path: Path, n: int, hosts: list[tuple[str, int]] | None, key_file: str, known_hosts: str,
                 state_dir: Path, unit: str, user: str = "inferbot") -> None:
    """An inferbot TOML of ``n`` nodes (``hosts``: their sshd addresses; fake ones when None)."""
    out: list[str] = []
    for i in range(n):
        host, port = hosts[i] if hosts else (f"127.0.{1 + i // 250}.{2 + i % 250}", 22)
        out += ["[[nodes]]", f'name = "node-{i + 1:03d}"', f'host = "{host}"', f"port = {port}",
                f'user = "{user}"', f'key_file = "{key_file}"', f'known_hosts = "{known_hosts}"',
                'timeout = "30s"', ""]
    for i in range(n):
        out += ["[[services]]", f'name = "kimi-{i + 1:03d}"', f'node = "node-{i + 1:03d}"', f'unit = "{unit}"',
                'bench_dir = "~/bench"', ""]
    out += ["[state]", f'dir = "{state_dir}"', ""]
    path.write_text("\n".join(out))


@dataclass
class Measured:
    """What one measured loop cost."""

    cpu_s: float
    wall_s: float
    runs: int
    sys_s: float = 0.0  # the kernel's part of cpu_s (on loopback, the sshd side's TCP work shows here)


async def _loop(body: Callable[[], Awaitable[object]], runs: int, profile: cProfile.Profile | None) -> Measured:
    s0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    c0, t0 = _cpu_s(), time.perf_counter()
    if profile is not None:
        profile.enable()
    for _ in range(runs):
        await body()
    if profile is not None:
        profile.disable()
    return Measured(cpu_s=_cpu_s() - c0, wall_s=time.perf_counter() - t0, runs=runs,
                    sys_s=resource.getrusage(resource.RUSAGE_SELF).ru_stime - s0)


def prepare_store(config_path: Path) -> None:
    """Create the state database in another process, as a serving bot finds it when it restarts.

    (Creating the schema imports Alembic; a restarted bot finds it current and never does.)
    """
    import subprocess

    code = ("import asyncio, sys\nfrom bot.app import open_store\nfrom config.loader import load_config\n"
            "async def main() -> None:\n    s = open_store(load_config(sys.argv[1]))\n    await s.prepare()\n"
            "    await s.close()\nasyncio.run(main())\n")
    subprocess.run([sys.executable, "-c", code, str(config_path)], check=True, cwd=Path(__file__).parents[1])


def _import_front_end() -> bool:
    try:
        import bot.slack.app  # noqa: F401  (the serving bot has the Slack front end loaded)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------------------------------------------------
# pure: no SSH at all


async def pure(rec: Path, n: int, runs: int, state: str, render: bool, profile_path: Path | None,
               with_store: bool, question: str, fresh_db: bool) -> dict[str, Any]:
    """Ask ``question`` of ``n`` nodes whose pool hands back the recorded answer; CPU per node per question."""
    from bench.warm_client import check_reply
    from bot.app import runtime
    from bot.dispatch import answer
    from bot.render_text import render_text
    from config.loader import load_config
    from config.models import Node
    from handlers.context import Asker
    from services.models import CommandResult

    front = _import_front_end()
    meta = _meta(rec)
    stdout = (rec / f"settings-{state}.out").read_text()
    work = Path(tempfile.mkdtemp(prefix="inferbot-pure-"))
    try:
        cfg = work / "inferbot.toml"
        (work / "kh").write_text("")
        write_config(cfg, n, None, "", str(work / "kh"), work / "state", meta["unit"])
        if not fresh_db:
            prepare_store(cfg)
        config = load_config(str(cfg))
        rss0 = _vm_rss_kib()
        async with runtime(config, with_store=with_store) as rt:
            async def fake_run(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                               wait_s: float | None = None, read_only: bool = False) -> CommandResult:
                rt.pool.runs += 1
                return CommandResult(exit_status=0, stdout=stdout, stderr="", elapsed_s=0.01)

            rt.pool.run = fake_run  # type: ignore[method-assign]
            asker = Asker(surface="json")
            last: list[object] = []

            async def one() -> None:
                reply = await answer(question, rt.context(asker))
                if render:
                    json.dumps(reply.to_json(render_text(reply)), ensure_ascii=False)
                last[:] = [reply]

            await one()  # warm: caches, the store's tables
            why = check_reply(last[0], n)  # type: ignore[arg-type]
            prof = cProfile.Profile() if profile_path else None
            m = await _loop(one, runs, prof)
            if prof is not None and profile_path is not None:
                prof.dump_stats(str(profile_path))
        return {"mode": "pure", "state": state, "nodes": n, "runs": runs, "render": render, "store": with_store,
                "slack_front_end_imported": front, "cpu_ms_per_node": m.cpu_s * 1000 / (n * runs),
                "sys_ms_per_node": m.sys_s * 1000 / (n * runs), "wall_ms_per_question": m.wall_s * 1000 / runs,
                "error": why, "rss_kib_start": rss0, "peak_rss_kib": read_vm_hwm_kib()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# ssh: real sshd on loopback answering every session with the recording


@dataclass
class CheapNodes:
    """sshds that answer every command with a recorded probe output (``ForceCommand … cat FILE``); a command
    whose length has a ``FILE.loop-LENGTH`` file (the watcher's persistent session) gets ``FILE.session`` once
    per line it reads."""

    hosts: list[tuple[str, int]]
    user: str
    known_hosts: Path
    key_file: Path
    stop: Callable[[], None]


def start_cheap_nodes(n: int, answer_file: Path, work: Path) -> CheapNodes:
    """``n`` (host, port) pairs on 127.0.x.y, served by ceil(n/16) sshds with a host key each.

    sshd listens on at most 16 sockets, so each sshd takes 16 addresses (one port); every session runs
    ``cat answer_file`` whatever command it was given. Host keys are checked: one known_hosts line per address.
    """
    from tests.sshd import ClientKey, Sshd, free_port, login_user

    user = login_user()
    key = ClientKey(work)
    os.chmod(answer_file, 0o644)
    sshds: list[Sshd] = []
    hosts: list[tuple[str, int]] = []
    lines: list[str] = []
    try:
        for first in range(0, n, _LISTEN_PER_SSHD):
            addrs = [f"127.0.{1 + i // 250}.{2 + i % 250}" for i in range(first, min(n, first + _LISTEN_PER_SSHD))]
            sshd = _start_sshd(key.public, addrs, free_port(addrs[0]), user, answer_file)
            sshds.append(sshd)
            for a in addrs:
                hosts.append((a, sshd.port))
                lines.append(f"[{a}]:{sshd.port} {sshd.host_public}")
    except BaseException:
        for s in sshds:
            s.stop()
        raise
    kh = work / "known_hosts"
    kh.write_text("\n".join(lines) + "\n")

    def stop() -> None:
        for s in sshds:
            s.stop()

    return CheapNodes(hosts=hosts, user=user, known_hosts=kh, key_file=key.private, stop=stop)


def _start_sshd(client_public: Path, addrs: list[str], port: int, user: str, answer_file: Path) -> Any:
    """One OpenSSH sshd on ``addrs``:``port`` (key-only login, as tests/sshd.py) that answers with ``cat``."""
    import socket
    import subprocess

    import asyncssh

    from tests.sshd import SSHD, Sshd

    d = Path(tempfile.mkdtemp(prefix="inferbot-cheap-"))
    os.chmod(d, 0o755)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(d / "host_key"))
    os.chmod(d / "host_key", 0o600)
    shutil.copy(client_public, d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o644)
    cfg = "".join(f"ListenAddress {a}:{port}\n" for a in addrs) + (
        f"HostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n"
        "LogLevel ERROR\nMaxStartups 200:30:400\nMaxSessions 20\n"
        f'ForceCommand if [ -e {answer_file}.loop-${{#SSH_ORIGINAL_COMMAND}} ]; then while read -r t; do '
        f'cat {answer_file}.session; done; else exec cat {answer_file}; fi\n'
    )
    (d / "sshd_config").write_text(cfg)
    with open(d / "sshd.log", "ab") as log:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((d / "sshd.log").read_text(errors="replace")[-2000:])
        with socket.socket() as sock:
            if sock.connect_ex((addrs[0], port)) == 0:
                return Sshd(host=addrs[0], port=port, dir=d, proc=proc,
                            host_public=host_key.export_public_key().decode().strip(), user=user)
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("sshd did not start")


async def ssh(rec: Path, n: int, runs: int, state: str, profile_path: Path | None, question: str,
              trace: bool, connect_first: bool, fresh_db: bool, keep_previous: bool = False) -> dict[str, Any]:
    """Ask ``question`` of ``n`` cheap nodes over a warm pool; CPU per node per question, RSS."""
    from bench.warm_client import check_reply
    from bot.app import runtime
    from bot.dispatch import answer
    from config.loader import load_config
    from handlers.context import Asker

    front = _import_front_end()
    meta = _meta(rec)
    work = Path(tempfile.mkdtemp(prefix="inferbot-ssh-"))
    os.chmod(work, 0o755)
    answer_file = work / "answer.out"
    shutil.copy(rec / f"settings-{state}.out", answer_file)
    nodes = start_cheap_nodes(n, answer_file, work)
    try:
        cfg = work / "inferbot.toml"
        write_config(cfg, n, nodes.hosts, str(nodes.key_file), str(nodes.known_hosts), work / "state", meta["unit"],
                     nodes.user)
        if not fresh_db:
            prepare_store(cfg)
        config = load_config(str(cfg))
        out: dict[str, Any] = {"mode": "ssh", "state": state, "nodes": n, "runs": runs,
                               "slack_front_end_imported": front}
        out["rss_before_kib"] = _vm_rss_kib()
        async with runtime(config) as rt:
            asker = Asker(surface="json")
            last: list[object] = []

            async def one() -> None:
                if not keep_previous:
                    last.clear()  # a serving bot keeps no answer once it is posted
                last[:] = [await answer(question, rt.context(asker))]

            out["rss_runtime_open_kib"] = _vm_rss_kib()
            if trace:
                tracemalloc.start()
            if connect_first:  # the handshakes alone, to tell their memory from the first answer's
                c0 = _cpu_s()
                await asyncio.gather(*(rt.pool._connection(node, 30.0) for node in config.nodes))
                out["connect_cpu_ms_per_node"] = (_cpu_s() - c0) * 1000 / n
                out["rss_connected_kib"] = _vm_rss_kib()
                out["hwm_connected_kib"] = read_vm_hwm_kib()
            c0, t0 = _cpu_s(), time.perf_counter()
            await one()  # opens the connections (unless connect_first)
            out["warmup_cpu_ms_per_node"] = (_cpu_s() - c0) * 1000 / n
            out["warmup_wall_s"] = time.perf_counter() - t0
            out["warmup_error"] = check_reply(last[0], n)  # type: ignore[arg-type]
            out["rss_after_first_answer_kib"] = _vm_rss_kib()
            out["hwm_after_first_answer_kib"] = read_vm_hwm_kib()
            if trace:
                snap = tracemalloc.take_snapshot()
                out["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
                out["top_allocations"] = [
                    f"{s.size // 1024} KiB {s.count} blocks {s.traceback[0].filename}:{s.traceback[0].lineno}"
                    for s in snap.statistics("lineno")[:15]]
                tracemalloc.stop()
            runs0 = rt.pool.runs
            prof = cProfile.Profile() if profile_path else None
            m = await _loop(one, runs, prof)
            if prof is not None and profile_path is not None:
                prof.dump_stats(str(profile_path))
            out["error"] = check_reply(last[0], n)  # type: ignore[arg-type]
            out["round_trips_per_node"] = (rt.pool.runs - runs0) / (n * runs)
            out["connects"] = rt.pool.connects
            out["cpu_ms_per_node"] = m.cpu_s * 1000 / (n * runs)
            out["sys_ms_per_node"] = m.sys_s * 1000 / (n * runs)
            out["wall_ms_per_question"] = m.wall_s * 1000 / runs
            out["rss_end_kib"] = _vm_rss_kib()
        out["peak_rss_kib"] = read_vm_hwm_kib()
        return out
    finally:
        nodes.stop()
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# watch: the unplanned-restart watcher's poll


class _Traffic:
    """The recorded watcher answer with token counters that grow on every poll (a server at work).

    A recording's counters never move, which would let the watcher skip every write of its memory; a busy
    server's generation counter moves between every two polls.
    """

    def __init__(self, stdout: str) -> None:
        import base64

        self._b64 = base64
        # The light probe's wire format: the /metrics section rides in the one base64 line (WRAP).
        head, sep, rest = stdout.rpartition("\n@@inferbot@@ b64 ")
        blob, nl, after = rest.partition("\n")
        self._text = base64.b64decode(blob).decode() if sep else ""
        if " metrics " not in self._text:
            raise ValueError("the recording has no /metrics sample (record it with the server ready)")
        self._head, self._after = head + sep, nl + after
        self._polls = 0

    def next(self) -> str:
        """The answer of the next poll: 50 more generated and 150 more prompt tokens than the last."""
        import re

        self._polls += 1
        k = self._polls

        def bump(m: re.Match[str]) -> str:
            step = 50 if "generation" in m[1] else 150
            return f"{m[1]} {float(m[2]) + step * k}"

        text = re.sub(r"^(vllm:(?:generation|prompt)_tokens_total\S*) ([0-9.]+)$", bump, self._text, flags=re.M)
        return self._head + self._b64.b64encode(text.encode()).decode() + self._after


def session_answer(stdout: str) -> str:
    """What the watcher's persistent session prints for a recorded one-shot answer: the same answer, then the
    line ``<marker><its value> done`` (``services.node.probe.session_answer_end``)."""
    value = stdout.partition("\n@@inferbot@@")[2].partition(" ")[0]
    return f"{stdout}@@inferbot@@{value} done\n"


async def watch(rec: Path, n: int, seconds: float, interval: float, state: str, via_ssh: bool,
                direct: int, profile_path: Path | None, traffic: bool = True) -> dict[str, Any]:
    """The bot's CPU per watcher poll (one node, one service), as the leader's scheduler runs it.

    Scheduled (default): a real ``BotScheduler`` on SQLite polls ``n`` nodes every ``interval`` s for ``seconds``
    s (after one round to warm up); CPU of this process / polls made. That includes APScheduler, the probe, the
    store and the health checks. The leader asks on one persistent session per node (``NodePool.ask``): with
    ``--ssh`` the cheap nodes answer it once per newline, as the bot's session loop does.
    ``direct``: call ``bot.jobs.watch_node_job`` that many times for one node instead (no APScheduler).
    """
    from bot import jobs
    from bot.app import runtime
    from bot.scheduler import BotScheduler
    from config.loader import load_config
    from config.models import Node
    from handlers.notify import RecordingNotifier
    from services.models import CommandResult
    from services.node.ssh import AnswerEnd

    _import_front_end()
    meta = _meta(rec)
    stdout = (rec / f"watch-{state}.out").read_text()
    work = Path(tempfile.mkdtemp(prefix="inferbot-watch-"))
    os.chmod(work, 0o755)
    nodes: CheapNodes | None = None
    rewriting: asyncio.Future[None] | None = None
    try:
        if via_ssh:
            answer_file = work / "answer.out"
            session_file = work / "answer.out.session"
            shutil.copy(rec / f"watch-{state}.out", answer_file)
            session_file.write_text(session_answer(stdout))
            os.chmod(session_file, 0o644)
            nodes = start_cheap_nodes(n, answer_file, work)
            if traffic:  # the nodes' counters move: the answer files are rewritten twice a second
                writer = _Traffic(stdout)

                async def keep_writing() -> None:
                    while True:
                        text = writer.next()
                        for path, body in ((answer_file, text), (session_file, session_answer(text))):
                            tmp = work / "answer.tmp"
                            tmp.write_text(body)
                            os.chmod(tmp, 0o644)
                            os.replace(tmp, path)
                        await asyncio.sleep(0.5)

                rewriting = asyncio.ensure_future(keep_writing())
            write_config(work / "inferbot.toml", n, nodes.hosts, str(nodes.key_file), str(nodes.known_hosts),
                         work / "state", meta["unit"], nodes.user)
            from bench.contenders import watch_commands

            # The session's command (the same for every node here) loops on the cheap nodes.
            sent = await asyncio.to_thread(watch_commands, str(work / "inferbot.toml"), True)  # its own loop
            for command, _stdin in set(sent.values()):
                (work / f"answer.out.loop-{len(command.encode())}").write_text("")
        else:
            (work / "kh").write_text("")
            write_config(work / "inferbot.toml", n, None, "", str(work / "kh"), work / "state", meta["unit"])
        config = load_config(str(work / "inferbot.toml"))
        out: dict[str, Any] = {"mode": "watch", "state": state, "nodes": n, "ssh": via_ssh, "traffic": traffic}
        async with runtime(config) as rt:
            polls = 0
            if not via_ssh:
                busy = _Traffic(stdout) if traffic else None

                async def fake_run(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                                   wait_s: float | None = None, read_only: bool = False) -> CommandResult:
                    rt.pool.runs += 1
                    out = busy.next() if busy is not None else stdout
                    return CommandResult(exit_status=0, stdout=out, stderr="", elapsed_s=0.01)

                async def fake_ask(node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                                   wait_s: float | None = None) -> CommandResult:
                    return await fake_run(node, command, limit_s)

                rt.pool.run = fake_run  # type: ignore[method-assign]
                rt.pool.ask = fake_ask  # type: ignore[method-assign]  # the leader's persistent session
            notifier = RecordingNotifier()
            if direct:
                sched = BotScheduler(watch_s=3600)
                await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=False)
                node = config.nodes[0].name
                for _ in range(3):  # baseline, first samples
                    await jobs.watch_node_job(node)
                runs0 = rt.pool.runs
                prof = cProfile.Profile() if profile_path else None

                async def one() -> None:
                    await jobs.watch_node_job(node)

                m = await _loop(one, direct, prof)
                if prof is not None and profile_path is not None:
                    prof.dump_stats(str(profile_path))
                polls = rt.pool.runs - runs0
                await sched.shutdown()
                out.update(polls=polls, cpu_ms_per_poll=m.cpu_s * 1000 / max(1, polls),
                           wall_ms_per_poll=m.wall_s * 1000 / max(1, polls))
            else:
                sched = BotScheduler(watch_s=interval)
                await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=True)
                await asyncio.sleep(interval * 1.5)  # every node polled once: baselines, connections
                runs0, c0, t0 = rt.pool.runs, _cpu_s(), time.perf_counter()
                s0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
                th0 = _thread_cpu_s()
                prof = cProfile.Profile() if profile_path else None
                if prof is not None:
                    prof.enable()
                await asyncio.sleep(seconds)
                if prof is not None and profile_path is not None:
                    prof.disable()
                    prof.dump_stats(str(profile_path))
                cpu, wall = _cpu_s() - c0, time.perf_counter() - t0
                polls = rt.pool.runs - runs0
                await sched.shutdown()
                sys_s = resource.getrusage(resource.RUSAGE_SELF).ru_stime - s0
                th1 = _thread_cpu_s()
                # Which threads spent it (the event loop's, the store's database thread, …): ms per poll.
                out["thread_ms_per_poll"] = {
                    k: round((v - th0.get(k, 0.0)) * 1000 / max(1, rt.pool.runs - runs0), 3)
                    for k, v in th1.items() if v - th0.get(k, 0.0) > 0}
                out.update(polls=polls, seconds=wall, cpu_ms_per_poll=cpu * 1000 / max(1, polls),
                           sys_ms_per_poll=sys_s * 1000 / max(1, polls), core_pct=100 * cpu / wall,
                           core_pct_at_512_every_15s=cpu * 1000 / max(1, polls) * 512 / 15 / 10)
            out["posts"] = len(notifier.posts)
            out["connects"] = rt.pool.connects
            out["session_opens"] = rt.pool.session_opens
        out["peak_rss_kib"] = read_vm_hwm_kib()
        return out
    finally:
        if rewriting is not None:
            rewriting.cancel()
        if nodes is not None:
            nodes.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    """Entry point of ``python -m bench.profile_client``."""
    p = argparse.ArgumentParser(prog="python -m bench.profile_client", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--out", type=Path, required=True)
    q = sub.add_parser("pure")
    q.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    q.add_argument("-n", type=int, default=64)
    q.add_argument("--runs", type=int, default=5)
    q.add_argument("--state", choices=("loading", "ready"), default="loading")
    q.add_argument("--render", action="store_true", help="also render text and the --json object")
    q.add_argument("--no-store", action="store_true")
    q.add_argument("--question", default=QUESTION)
    q.add_argument("--profile", type=Path)
    q.add_argument("--fresh-db", action="store_true", help="the measured process creates the state database")
    t = sub.add_parser("ssh")
    t.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    t.add_argument("-n", type=int, default=64)
    t.add_argument("--runs", type=int, default=5)
    t.add_argument("--state", choices=("loading", "ready"), default="loading")
    t.add_argument("--question", default=QUESTION)
    t.add_argument("--profile", type=Path)
    t.add_argument("--tracemalloc", action="store_true", help="where the warm-up's memory went (slow)")
    t.add_argument("--fresh-db", action="store_true", help="the measured process creates the state database")
    t.add_argument("--keep-previous", action="store_true",
                   help="hold the previous answer while asking the next (bench/warm_client.py did before)")
    t.add_argument("--connect-first", action="store_true", help="open every connection before the first question")
    w = sub.add_parser("watch")
    w.add_argument("--rec", type=Path, default=SAMPLES, help="recorded answers (default: the tests' samples)")
    w.add_argument("-n", type=int, default=64)
    w.add_argument("--seconds", type=float, default=20.0)
    w.add_argument("--interval", type=float, default=2.0, help="the watcher's interval (the bot's is 15-60 s)")
    w.add_argument("--state", choices=("loading", "ready"), default="ready")
    w.add_argument("--ssh", action="store_true", help="real sshd answering with the recording")
    w.add_argument("--direct", type=int, default=0, help="call the job function this many times instead")
    w.add_argument("--profile", type=Path)
    w.add_argument("--no-traffic", action="store_true", help="keep the recording's token counters still")
    args = p.parse_args()
    result: dict[str, Any]
    if args.cmd == "record":
        args.out.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(record(args.out))
    elif args.cmd == "pure":
        result = asyncio.run(pure(args.rec, args.n, args.runs, args.state, args.render, args.profile,
                                  not args.no_store, args.question, args.fresh_db))
    elif args.cmd == "ssh":
        result = asyncio.run(ssh(args.rec, args.n, args.runs, args.state, args.profile, args.question,
                                 args.tracemalloc, args.connect_first, args.fresh_db, args.keep_previous))
    elif args.cmd == "watch":
        result = asyncio.run(watch(args.rec, args.n, args.seconds, args.interval, args.state, args.ssh,
                                   args.direct, args.profile, not args.no_traffic and args.state == "ready"))
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
