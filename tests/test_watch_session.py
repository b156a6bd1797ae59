"""The leader's watcher polls on one persistent SSH session per node (issue 15, the watcher at scale).

Real sshd, the simulated Kimi node. Many polls are one session: sshd itself logs one ``Starting session``
(one exec request) for them, and each answer still carries its own random marker value. A session that was
killed, a node whose sshd restarted and a poll that timed out are answered as a one-shot probe answers at
that moment (the same states, the same reasons), and the next poll opens a new session. A replica that
stops leading closes its sessions (the node's loop ends) and opens no new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.app import runtime
from bot.scheduler import BotScheduler
from config.models import BotConfig, Node
from handlers.notify import RecordingNotifier
from handlers.watcher import WATCH_PROBE
from services.cluster import Cluster, NodeReport
from services.models import CommandResult, ServiceState
from services.node.probe import MARK
from services.node.ssh import MAX_CHANNELS, AnswerEnd, NodePool, _Session
from services.sim.scenarios import KIMI_UNIT, kimi_node
from services.store.leader import Callback, Role
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import SSHD, ClientKey, Sshd, free_port, start_sshd

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

LOOP_LINE = "while IFS= read -r _; do"  # in the session's script (services/node/probe/answer.sh)


async def _ready(make_cluster: MakeCluster, **watch: object) -> SimCluster:
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port(), traffic_tps=900.0)},
                                 watch={"interval": "1s", "push": False, **watch})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def _with_timeout(cluster: SimCluster, timeout: float) -> BotConfig:
    node = cluster.config.nodes[0].model_copy(update={"timeout": timeout})
    return cluster.config.model_copy(update={"nodes": [node]})


def _sessions_started(sshd: Sshd) -> int:
    """Exec requests sshd served (it logs each session it starts at LogLevel VERBOSE)."""
    return sshd.log().count("Starting session: command")


def _loop_pids(cluster: SimCluster) -> list[int]:
    """The node's session loops (``sh -c`` of the session script) of this cluster's node."""
    root = str(cluster.sims["gpu-a"].root).encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes()
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if argv.startswith(b"sh\0-c\0") and LOOP_LINE.encode() in argv and root in env:
            found.append(int(d.name))
    return found


def _facts(states: list[ServiceState]) -> list[tuple[object, ...]]:
    """What the watcher reads of a poll (handlers/watcher.py, handlers/health_watch.py)."""
    return [(s.service, s.state, s.reason, s.active, s.main_pid, s.restarts, s.invocation_id, s.since)
            for s in states]


class _Recorded(NodePool):
    """A pool that keeps the stdout of every session answer."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str] = []

    async def ask(self, node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                  wait_s: float | None = None) -> CommandResult:
        result = await super().ask(node, command, end, limit_s, wait_s)
        self.answers.append(result.stdout)
        return result


async def _poll(cluster: Cluster, config: BotConfig) -> tuple[NodeReport, list[ServiceState]]:
    report, states, _raw = await cluster.probe_node(config.nodes[0], config.services, WATCH_PROBE)
    return report, states


async def _one_shot(config: BotConfig) -> tuple[NodeReport, list[ServiceState]]:
    """What a pool without sessions answers now (today's one channel per poll)."""
    pool = NodePool()
    try:
        return await _poll(Cluster(config, pool), config)
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def _leading(config: BotConfig) -> AsyncIterator[Cluster]:
    """A cluster over a pool that keeps persistent sessions, as the scheduler's leader's does (closed after)."""
    pool = NodePool()
    pool.keep_sessions(True)
    try:
        yield Cluster(config, pool)
    finally:
        await pool.close()


async def _until(pred: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_many_polls_are_one_session_with_a_marker_value_per_answer(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config, sshd = cluster.config, cluster.sshds["gpu-a"]
    before = _sessions_started(sshd)
    pool = _Recorded()
    pool.keep_sessions(True)
    try:
        polls = [await _poll(Cluster(config, pool), config) for _ in range(8)]
        assert pool.session_opens == 1 and pool.runs == 8
        assert _sessions_started(sshd) - before == 1  # sshd served one exec request for eight polls
        assert len(_loop_pids(cluster)) == 1
        # The same facts as a one-shot probe of the same node (its own channel, the script sent again).
        report, states = await _one_shot(config)
        assert report.ok and all(r.ok for r, _ in polls)
        assert _facts(polls[-1][1]) == _facts(states) and states[0].state == "ready"
        assert _sessions_started(sshd) - before == 2
        # Every answer has its own random marker value (read on the node for each answer).
        values = {a.partition("\n" + MARK)[2].partition(" ")[0] for a in pool.answers}
        assert len(values) == 8 and "" not in values
    finally:
        await pool.close()
    await _until(lambda: not _loop_pids(cluster), 10, "the node's loop to end with its channel")


async def test_a_killed_session_is_replaced_on_the_next_poll(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config = cluster.config
    async with _leading(config) as cl:
        pool = cl.pool
        report, first = await _poll(cl, config)
        assert report.ok and pool.session_opens == 1
        (pid,) = _loop_pids(cluster)
        os.kill(pid, signal.SIGKILL)  # the node's session loop dies between two polls
        await _until(lambda: pid not in _loop_pids(cluster), 5, "the killed loop to go")
        report, again = await _poll(cl, config)
        assert report.ok and _facts(again) == _facts(first)  # answered, as a one-shot probe would be
        assert pool.session_opens == 2 and len(_loop_pids(cluster)) == 1
        report, _ = await _poll(cl, config)
        assert report.ok and pool.session_opens == 2


def _kill_tree(root: int) -> None:
    """Kill the sshd listener ``root`` and every process under it (a node going down)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parents[int(d.name)] = int(stat.rpartition(")")[2].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parents.items() if pp in frontier]
        tree += frontier
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _restart_sshd(sshd: Sshd) -> None:
    """Start the node's sshd again with the same config (same port, same host key)."""
    with open(sshd.dir / "sshd.log", "ab") as log:
        sshd.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(sshd.dir / "sshd_config")], stdout=log,
                                     stderr=log)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((sshd.host, sshd.port)) == 0:
                return
        time.sleep(0.02)
    raise AssertionError("sshd did not come back")


async def test_a_node_restart_reads_as_a_one_shot_poll_and_then_recovers(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config, sshd = cluster.config, cluster.sshds["gpu-a"]
    async with _leading(config) as cl:
        pool = cl.pool
        report, first = await _poll(cl, config)
        assert report.ok and pool.session_opens == 1
        _kill_tree(sshd.proc.pid)  # the listener, its connections and the session under them
        sshd.proc.wait()
        await _until(lambda: not _loop_pids(cluster), 5, "the session to end with its connection")
        # While the node is down: the same reason a one-shot probe gives.
        report, states = await _poll(cl, config)
        shot, shot_states = await _one_shot(config)
        assert not report.ok and report.error is not None and shot.error is not None
        assert (report.error.kind, report.error.reason) == (shot.error.kind, shot.error.reason) == (
            "refused", f"connection refused on {sshd.host}:{sshd.port}")
        assert _facts(states) == _facts(shot_states)
        _restart_sshd(sshd)
        report, again = await _poll(cl, config)
        assert report.ok and _facts(again) == _facts(first)
        assert pool.session_opens == 2 and pool.connects == 2


async def test_a_timed_out_poll_closes_its_session_and_the_next_one_recovers(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config = _with_timeout(cluster, 2)
    sim = cluster.sims["gpu-a"]
    async with _leading(config) as cl:
        pool = cl.pool
        report, first = await _poll(cl, config)
        assert report.ok and pool.session_opens == 1
        sim.set_hung_systemctl(True)
        started = time.monotonic()
        report, states = await _poll(cl, config)
        assert time.monotonic() - started < 5  # the node's timeout applies to the poll
        shot, shot_states = await _one_shot(config)
        node = config.nodes[0]
        assert report.error is not None and shot.error is not None
        assert (report.error.kind, report.error.reason) == (shot.error.kind, shot.error.reason) == (
            "timeout", f"no answer from {node.host}:{node.port} within 2s")
        assert _facts(states) == _facts(shot_states)
        sim.set_hung_systemctl(False)
        report, again = await _poll(cl, config)
        assert report.ok and _facts(again) == _facts(first)
        assert pool.session_opens == 2  # the timed-out one was closed: its late answer is never read


class _Flip:
    """A leadership the test hands over by hand."""

    def __init__(self) -> None:
        self._role: Role = "standby"
        self._lost: Callback | None = None

    @property
    def role(self) -> Role:
        return self._role

    @property
    def replica(self) -> str:
        return "test"

    async def start(self, on_elected: Callback, on_lost: Callback) -> None:
        self._role, self._lost = "leader", on_lost
        await on_elected()

    async def lose(self) -> None:
        if self._role == "leader" and self._lost is not None:
            self._role = "standby"
            await self._lost()

    async def stop(self) -> None:
        await self.lose()


async def test_a_replica_that_stops_leading_closes_its_sessions(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    sshd = cluster.sshds["gpu-a"]
    before = _sessions_started(sshd)
    async with runtime(cluster.config) as rt:
        sched = BotScheduler(watch_s=0.3)
        flip = _Flip()
        await sched.start(rt.with_ports(notifier=RecordingNotifier(), jobs=sched), watch=True, leadership=flip)
        try:
            await _until(lambda: rt.pool.runs >= 4, 20, "four watcher polls")
            assert rt.pool.sessions and rt.pool.session_opens == 1 and len(_loop_pids(cluster)) == 1
            await flip.lose()
            assert not rt.pool.sessions
            await _until(lambda: not _loop_pids(cluster), 10, "the node's loop to end")
            # A standby's stray poll is answered on a channel of its own and leaves nothing open.
            report, _ = await _poll(rt.cluster, rt.config)
            assert report.ok and rt.pool.session_opens == 1 and not _loop_pids(cluster)
            assert _sessions_started(sshd) - before == 2  # the session, then the one-shot poll
        finally:
            await sched.shutdown()


async def test_shutdown_closes_the_sessions(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    async with runtime(cluster.config) as rt:
        sched = BotScheduler(watch_s=0.3)
        await sched.start(rt.with_ports(notifier=RecordingNotifier(), jobs=sched), watch=True)
        await _until(lambda: rt.pool.runs >= 2, 20, "two watcher polls")
        assert len(_loop_pids(cluster)) == 1
        await sched.shutdown()
        assert not rt.pool.sessions
        await _until(lambda: not _loop_pids(cluster), 10, "the node's loop to end")



async def test_the_session_holds_one_channel_and_questions_keep_the_others(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config = cluster.config
    node = config.nodes[0]
    async with _leading(config) as cl:
        pool = cl.pool
        permits = pool._slot(node).channels
        report, _ = await _poll(cl, config)
        assert report.ok and permits._value == MAX_CHANNELS - 1  # the session's channel counts
        # A burst of questions (one more than the channels left) and a poll at once: all answered.
        results = await asyncio.gather(
            *(pool.run(node, "sleep 0.3; echo asked") for _ in range(MAX_CHANNELS)), _poll(cl, config))
        assert [r.stdout for r in results[:-1]] == ["asked\n"] * MAX_CHANNELS
        assert results[-1][0].ok and pool.session_opens == 1
        assert permits._value == MAX_CHANNELS - 1
        pool.end_sessions()
        await _until(lambda: permits._value == MAX_CHANNELS, 5, "the session's channel to be given back")


async def test_between_polls_the_nodes_loop_waits_in_read_and_costs_nothing(make_cluster: MakeCluster) -> None:
    cluster = await _ready(make_cluster)
    config = cluster.config
    async with _leading(config) as cl:
        report, _ = await _poll(cl, config)
        assert report.ok
        (pid,) = _loop_pids(cluster)

        def stat() -> list[str]:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()

        before = stat()
        await asyncio.sleep(1.5)
        after = stat()
        assert after[0] == "S" and after[11:13] == before[11:13], (before, after)  # asleep; utime, stime


@pytest.mark.parametrize(("force", "node_timeout"), [
    ("echo 'this account runs no commands'", 8.0),  # a shell that prints something else and exits
    ("echo 'welcome'; sleep 30", 1.5),  # something else, then nothing
])
async def test_a_node_that_answers_something_else_reads_as_a_one_shot_poll(
        client_key: ClientKey, ssh_user: str, tmp_path: Path, force: str, node_timeout: float) -> None:
    sshd = start_sshd(client_key, {"LC_ALL": "C"}, extra_config=f"ForceCommand {force}\n")
    try:
        (tmp_path / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
        config = BotConfig.model_validate({
            "nodes": [{"name": "gpu-a", "host": sshd.host, "port": sshd.port, "user": sshd.user,
                       "key_file": str(client_key.private), "known_hosts": str(tmp_path / "known_hosts"),
                       "timeout": node_timeout}],
            "services": [{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT}],
            "state": {"dir": str(tmp_path)},
        })
        async with _leading(config) as cl:
            pool = cl.pool
            for opened in (1, 2):  # each poll: a new session, since the last one was closed
                report, states = await _poll(cl, config)
                shot, shot_states = await _one_shot(config)
                assert not report.ok and report.error is not None and shot.error is not None
                assert (report.error.kind, report.error.reason) == (shot.error.kind, shot.error.reason)
                assert _facts(states) == _facts(shot_states) and states[0].state == "unreachable"
                assert pool.session_opens == opened and pool._slot(config.nodes[0]).session is None
    finally:
        sshd.stop()


class _Channel:
    """Stands for asyncssh's channel under a session: what was written, whether it was closed."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            raise BrokenPipeError
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


async def _session_on_a_channel() -> tuple[_Session, _Channel, asyncio.Semaphore]:
    """A probe-loop session on a stand-in channel, holding the one channel permit of its connection."""
    from services.node.probe import session_answer_end

    permit = asyncio.Semaphore(1)
    await permit.acquire()
    session = _Session("the probe loop", session_answer_end, permit)
    chan = _Channel()
    session.connection_made(chan)  # type: ignore[arg-type]
    return session, chan, permit


async def test_a_shell_that_speaks_and_exits_before_the_first_trigger_is_read_at_once() -> None:
    # The order the node-side test above meets only sometimes: the account's shell prints its refusal and
    # the channel ends before the first newline is written. The poll reads what it printed at once, as a
    # one-shot probe would, instead of waiting out the node's timeout for an answer that cannot come.
    session, chan, permit = await _session_on_a_channel()
    session.data_received(b"this account runs no commands\n", None)  # type: ignore[arg-type]
    session.exit_status_received(1)
    session.connection_lost(None)
    assert await asyncio.wait_for(session.answer(30), 2) is None
    assert bytes(session.out) == b"this account runs no commands\n" and session.exit_status == 1
    assert chan.written == [] and permit._value == 1  # nothing sent to it; its channel permit given back


async def test_a_shell_that_speaks_before_the_first_trigger_and_hangs_times_out_as_a_one_shot_would() -> None:
    # The other order of the node-side test's second case ("welcome", then nothing): its greeting arrives
    # before the first newline is written. A one-shot probe waits for the command to end and times out; so
    # does the poll, instead of reading the greeting at once as a broken answer ("probe: welcome"). It was
    # 1 in 4 runs of that test before.
    session, chan, permit = await _session_on_a_channel()
    session.data_received(b"welcome\n", None)  # type: ignore[arg-type]
    assert not session.closed
    with pytest.raises(TimeoutError):
        await session.answer(0.2)
    assert chan.written == []  # no trigger: nothing it prints can be framed as an answer
    # … and when it does end, what it printed (all of it) is read as a one-shot probe's output would be.
    session.data_received(b"and goodbye\n", None)  # type: ignore[arg-type]
    session.exit_status_received(0)
    session.connection_lost(None)
    assert await asyncio.wait_for(session.answer(30), 2) is None
    assert bytes(session.out) == b"welcome\nand goodbye\n" and permit._value == 1
