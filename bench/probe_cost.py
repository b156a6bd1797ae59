"""``python -m bench.probe_cost``: the probe's own work on a simulated Kimi node, per question, as JSON.

For the settings question (``handlers.settings.SETTINGS_PROBE``) and the unplanned-restart watcher's poll
(``handlers.watcher.WATCH_PROBE``) it lets the bot's own ``Cluster.probe_node`` build the command and its
stdin (the exact bytes the bot sends over SSH), then runs that command on a simulated node the way sshd
would: as the login user, through the login shell (``$SHELL -c COMMAND``), with the session environment
sshd sets (``SetEnv`` of the node), the API keys on stdin. The bot then parses and assembles the output as
usual, so a run that broke the probe shows up as a missing fact.

What is counted
  * ``cpu_ms``: user + system CPU of the login shell and of every process below it (``os.wait4``'s rusage;
    every process of the probe is waited for by its shell, so all of them are in it). The simulated vLLM
    server is a separate Python process (a child of the node, not of the probe): the requests it serves
    cost CPU there and are NOT counted, as a real vLLM's are not the probe's. ``curl``'s own cost is.
  * ``forks`` / ``execs``: every process created below the login shell and every successful ``execve``,
    from ``strace -f`` (a separate run: tracing slows what it traces). ``by_program`` names each process by
    the last program it ran (``(sh)`` for a subshell that ran none). The node's fake ``systemctl``,
    ``journalctl``, ``nvidia-smi``, ``hostname`` and ``sudo`` are shell scripts, where the real tools are one
    process each: ``sim_tool_internal`` counts the processes those scripts spawn inside themselves, and
    ``forks_real_node`` is the count with those left out (what a real node would see).

States
  * ``loading``: the bench's node (``bench.cluster``): 13 minutes into the 30-minute Kimi load, the port
    refuses, weights loading (the journal holds the progress lines).
  * ``ready``: a fast Kimi load that finished; ``/health`` answers, so ``/version``, ``/v1/models`` and
    ``/metrics`` are asked too.

    python -m bench.probe_cost                       # both states, 9 CPU runs each, JSON on stdout
    python -m bench.probe_cost --states ready --runs 5 --out /tmp/probe.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.models import BotConfig, Node
from handlers.settings import SETTINGS_PROBE
from handlers.watcher import WATCH_PROBE
from services.cluster import Cluster
from services.models import CommandResult, ServiceState
from services.node.probe import NodeRaw, ProbeOptions
from services.node.ssh import NodePool
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.sshd import free_port, login_user

QUESTIONS: dict[str, ProbeOptions] = {"settings": SETTINGS_PROBE, "watch": WATCH_PROBE}
STATES = ("loading", "ready")
SIM_TOOLS = ("systemctl", "journalctl", "nvidia-smi", "hostname", "sudo")
TRACED = "trace=execve,execveat,fork,vfork,clone,clone3"


@dataclass
class Login:
    """Who the probe runs as, and the session sshd would give it."""

    user: str
    uid: int
    gid: int
    shell: str
    env: dict[str, str]


def login_for(sim: SimNode) -> Login:
    """The login user of the tests and the bench (unprivileged when we are root), with sshd's session env."""
    name = login_user() if os.geteuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
    pw = pwd.getpwnam(name)
    env = {"USER": name, "LOGNAME": name, "HOME": pw.pw_dir, "SHELL": pw.pw_shell or "/bin/sh",
           **sim.shell_env()}
    return Login(user=name, uid=pw.pw_uid, gid=pw.pw_gid, shell=pw.pw_shell or "/bin/sh", env=env)


@dataclass
class Measured:
    """One run of the command: what it printed and what it cost."""

    rc: int
    stdout: str
    stderr: str
    cpu_ms: float
    wall_ms: float


def run_measured(login: Login, command: str, stdin: str | None) -> Measured:
    """Run ``command`` as sshd would (login shell ``-c``), reap it with ``os.wait4`` for its children's CPU."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        inp.write((stdin or "").encode())
        inp.seek(0)
        drop = os.geteuid() == 0 and login.uid != 0
        started = time.perf_counter()
        p = subprocess.Popen([login.shell, "-c", command], stdin=inp, stdout=out, stderr=err, env=login.env,
                             cwd=login.env["HOME"] if os.path.isdir(login.env["HOME"]) else "/",
                             user=login.uid if drop else None, group=login.gid if drop else None,
                             extra_groups=[] if drop else None)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - started
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(rc=p.returncode, stdout=out.read().decode("utf-8", "replace"),
                        stderr=err.read().decode("utf-8", "replace"),
                        cpu_ms=(ru.ru_utime + ru.ru_stime) * 1000, wall_ms=wall * 1000)


@dataclass
class Traced:
    """Processes and programs of one traced run."""

    forks: int
    execs: int
    by_program: dict[str, int]
    sim_tool_internal: dict[str, int]
    rc: int


_CLONE = re.compile(r"^(clone3?|fork|vfork)\((.*)\)\s+=\s+(\d+)")
_EXEC = re.compile(r'^execve(?:at)?\((?:\d+, )?"([^"]*)".*\)\s+=\s+0$')


def run_traced(login: Login, command: str, stdin: str | None) -> Traced:
    """Run ``command`` under ``strace -ff`` (one file per process: no interleaved lines) and count."""
    strace = shutil.which("strace")
    if strace is None:
        raise RuntimeError("strace is not installed (apt-get install strace)")
    d = Path(tempfile.mkdtemp(prefix="probe-strace-"))
    os.chmod(d, 0o755)
    try:
        argv = [strace, "-ff", "-qq", "-e", TRACED, "-e", "signal=none", "-o", str(d / "t")]
        if os.geteuid() == 0 and login.uid != 0:
            argv += ["-u", login.user]
        argv += [login.shell, "-c", command]
        p = subprocess.run(argv, input=(stdin or "").encode(), capture_output=True, env=login.env,
                           cwd=login.env["HOME"] if os.path.isdir(login.env["HOME"]) else "/", check=False)
        parent: dict[int, int] = {}
        program: dict[int, str] = {}
        root = 0
        for f in d.iterdir():
            pid = int(f.name.rsplit(".", 1)[1])
            for line in f.read_text(errors="replace").splitlines():
                m = _CLONE.match(line)
                if m and "CLONE_THREAD" not in m.group(2):
                    parent[int(m.group(3))] = pid
                    continue
                e = _EXEC.match(line)
                if e:
                    program[pid] = e.group(1)
        pids = set(program) | set(parent) | set(parent.values())
        roots = [p_ for p_ in pids if p_ not in parent]
        root = min(roots) if roots else 0

        def label(pid: int) -> str:
            path = program.get(pid)
            if path is None:
                name = f"({os.path.basename(program.get(_exec_ancestor(pid, parent, program), '') or 'sh')})"
            else:
                name = os.path.basename(path)
                name = f"{name} [sim]" if name in SIM_TOOLS and "/sim/bin/" in path else name
            tool = _sim_tool_above(pid, parent, program)
            return f"{tool} [sim] > {name}" if tool is not None else name

        by_program = Counter(label(p_) for p_ in pids if p_ != root)
        internal: Counter[str] = Counter()
        for p_ in pids:
            tool = _sim_tool_above(p_, parent, program)
            if p_ != root and tool is not None:
                internal[tool] += 1
        return Traced(forks=len(pids) - 1, execs=sum(1 for _ in program), by_program=dict(by_program.most_common()),
                      sim_tool_internal=dict(internal.most_common()), rc=p.returncode)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _exec_ancestor(pid: int, parent: dict[int, int], program: dict[int, str]) -> int:
    """The nearest ancestor of ``pid`` (itself included) that ran a program."""
    seen = 0
    while pid not in program and pid in parent and seen < 1000:
        pid, seen = parent[pid], seen + 1
    return pid


def _sim_tool_above(pid: int, parent: dict[int, int], program: dict[int, str]) -> str | None:
    """The fake node tool that ``pid`` runs inside (a strict ancestor ran it), or None."""
    seen = 0
    x = parent.get(pid)
    while x is not None and seen < 1000:
        path = program.get(x, "")
        name = os.path.basename(path)
        if "/sim/bin/" in path and name in SIM_TOOLS:
            return name
        x, seen = parent.get(x), seen + 1
    return None


class LocalPool(NodePool):
    """The bot's pool with the SSH hop replaced by running the command in the node's login session.

    It records the command and stdin the bot built, so they can be run again measured and traced.
    """

    def __init__(self, login: Login) -> None:
        super().__init__()
        self.login = login
        self.sent: list[tuple[str, str | None]] = []

    async def run(self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                  wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        """Run ``command`` as the node's login user; the result is what SSH would have returned."""
        self.sent.append((command, stdin))
        m = await asyncio.to_thread(run_measured, self.login, command, stdin)
        return CommandResult(exit_status=m.rc, stdout=m.stdout, stderr=m.stderr, elapsed_s=m.wall_ms / 1000)


@dataclass
class Question:
    """What the bot saw (facts) and what the node paid, for one question."""

    command: str
    stdin: str | None
    states: list[ServiceState]
    raw: NodeRaw | None
    stdout_bytes: int
    cpu_ms: list[float] = field(default_factory=list)
    traced: Traced | None = None


def config_for(sim: SimNode) -> BotConfig:
    """The bench's config for one Kimi node (``bench.cluster.write_config``): one service with its bench_dir."""
    return BotConfig.model_validate({
        "nodes": [{"name": "node-01", "host": "127.0.0.1", "port": 22, "user": "nobody", "timeout": 30}],
        "services": [{"name": "kimi-01", "node": "node-01", "unit": KIMI_UNIT, "bench_dir": sim.bench_dir}],
        "state": {"dir": tempfile.gettempdir()},
    })


async def ask(sim: SimNode, options: ProbeOptions, runs: int = 0, trace: bool = False) -> Question:
    """Ask one question of ``sim`` through the bot's ``Cluster.probe_node``; then measure the same command."""
    config = config_for(sim)
    login = login_for(sim)
    pool = LocalPool(login)
    cluster = Cluster(config, pool)
    report, states, raw = await cluster.probe_node(config.nodes[0], config.services, options)
    if not report.ok or not pool.sent:
        raise RuntimeError(f"the probe did not run: {report.error}")
    command, stdin = pool.sent[-1]
    first = await asyncio.to_thread(run_measured, login, command, stdin)
    q = Question(command=command, stdin=stdin, states=states, raw=raw, stdout_bytes=len(first.stdout.encode()))
    for _ in range(runs):
        m = await asyncio.to_thread(run_measured, login, command, stdin)
        q.cpu_ms.append(m.cpu_ms)
    if trace:
        q.traced = await asyncio.to_thread(run_traced, login, command, stdin)
    return q


async def start_node(state: str, workdir: Path) -> SimNode:
    """A Kimi node in ``state`` (``loading`` as in the bench, or ``ready``), run as the login user."""
    root = workdir / state
    root.mkdir(parents=True)
    os.chmod(root, 0o755)
    run_as = login_user() if os.geteuid() == 0 else None
    if state == "loading":
        sim = SimNode(root, kimi_node(port=free_port(), hostname="node-01"), run_as=run_as)
        await sim.start()
        await sim.wait_for(KIMI_UNIT, "loading", 60)
        deadline = time.monotonic() + 60
        while "Completed |" not in sim.journal_path().read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise RuntimeError("the load did not reach the weights")
            await asyncio.sleep(0.1)
    else:
        sim = SimNode(root, kimi_node(fast=True, port=free_port(), hostname="node-01"), run_as=run_as)
        await sim.start()
        await sim.wait_for(KIMI_UNIT, "ready", 60)
    return sim


def summary(q: Question) -> dict[str, Any]:
    """The JSON of one question."""
    st = q.states[0] if q.states else None
    out: dict[str, Any] = {
        "service_state": st.state if st else None,
        "stdout_bytes": q.stdout_bytes,
        "command_bytes": len(q.command.encode()),
    }
    if q.cpu_ms:
        out["cpu_ms"] = {"median": round(statistics.median(q.cpu_ms), 1), "min": round(min(q.cpu_ms), 1),
                         "max": round(max(q.cpu_ms), 1), "runs": [round(x, 1) for x in q.cpu_ms]}
    if q.traced is not None:
        t = q.traced
        internal = sum(t.sim_tool_internal.values())
        out |= {"forks": t.forks, "execs": t.execs, "forks_real_node": t.forks - internal,
                "by_program": t.by_program, "sim_tool_internal": t.sim_tool_internal}
    return out


async def measure(states: Sequence[str], runs: int, trace: bool) -> dict[str, Any]:
    """Every question in every state: the whole JSON report."""
    workdir = Path(tempfile.mkdtemp(prefix="probe-cost-", dir="/tmp"))
    os.chmod(workdir, 0o755)
    result: dict[str, Any] = {
        "tool": "python -m bench.probe_cost",
        "counting": ("cpu_ms: user+sys of the login shell and every process below it (os.wait4), median of runs; "
                     "the fake vLLM server's CPU for the requests it serves is not counted (a real vLLM's is not "
                     "the probe's), curl's is; forks/execs from strace -ff in a separate run; "
                     "forks_real_node leaves out what the fake node tools (shell scripts) spawn inside "
                     "themselves, where the real systemctl/journalctl/nvidia-smi are one process each"),
        "states": {},
    }
    try:
        for state in states:
            sim = await start_node(state, workdir)
            try:
                per: dict[str, Any] = {
                    "journal_lines": sum(1 for _ in sim.journal_path().open(errors="replace")),
                    # Where the kernel has no /proc/PID/task/*/children, the probe's fallback reads every
                    # /proc/PID/stat: say how many there were.
                    "machine_processes": sum(1 for e in os.listdir("/proc") if e.isdigit()),
                }
                for name, options in QUESTIONS.items():
                    q = await ask(sim, options, runs=runs, trace=trace)
                    per[name] = summary(q)
                result["states"][state] = per
            finally:
                await sim.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m bench.probe_cost``."""
    p = argparse.ArgumentParser(prog="python -m bench.probe_cost", description=__doc__.splitlines()[0])
    p.add_argument("--states", default=",".join(STATES), help="comma-separated: loading,ready")
    p.add_argument("--runs", type=int, default=9, help="measured runs per question (median reported)")
    p.add_argument("--no-trace", action="store_true", help="skip the strace run (no fork counts)")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    states = [s for s in args.states.split(",") if s]
    bad = [s for s in states if s not in STATES]
    if bad:
        p.error(f"unknown state(s): {', '.join(bad)}")
    trace = not args.no_trace and shutil.which("strace") is not None
    result = asyncio.run(measure(states, args.runs, trace))
    if not trace:
        result["note"] = "no fork counts: strace is not installed or --no-trace"
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with contextlib.suppress(OSError):
            args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
