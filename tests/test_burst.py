"""Bursts of questions (issue 22, item 4): a busy bot never makes a healthy node "unreachable".

Real sshd and the simulated Kimi node. What the node did is counted on the node's side: sshd logs each exec
request it serves ("Starting session: command", LogLevel VERBOSE), and a silent port counts the connections
it accepted. Identical questions asked together are answered by one SSH command; waiting inside the bot (for
one of the node's channels, the exec gate, a connection someone else is making) is not the node's time; a bot
with too many questions waiting says it is busy; a dead or hung node still times out with its own timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from config.models import BotConfig, Node
from handlers.context import Asker
from handlers.home import read_dashboard
from handlers.status import STATUS_PROBE
from services.cluster import Cluster
from services.node.probe import ProbeOptions
from services.node.ssh import MAX_CHANNELS, NodePool
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import Sshd, free_port
from tests.test_e2e_settings import kimi

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

BURST = 120


def execs(sshd: Sshd) -> int:
    """Exec requests the node's sshd served (it logs each session it starts at LogLevel VERBOSE)."""
    return sshd.log().count("Starting session: command")


async def ready(make_cluster: MakeCluster, node_timeout: float = 8.0) -> SimCluster:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    node = cluster.config.nodes[0].model_copy(update={"timeout": node_timeout})
    cluster.config = cluster.config.model_copy(update={"nodes": [node]})
    return cluster


def slow_tool(sim: SimNode, tool: str, seconds: float) -> None:
    """Make the node's ``tool`` (one of its fake commands) take ``seconds`` longer: a probe that calls it is slow."""
    real = sim.bin / tool
    real.rename(sim.bin / f"{tool}.real")
    real.write_text(f'#!/bin/sh\nsleep {seconds}\nexec "$(dirname "$0")/{tool}.real" "$@"\n')
    real.chmod(0o755)


@contextlib.asynccontextmanager
async def holding_channels(pool: NodePool, node: Node, seconds: float) -> AsyncIterator[list[asyncio.Task[object]]]:
    """Every channel of ``node`` taken by a command that runs ``seconds`` (distinct, slow questions)."""
    tasks: list[asyncio.Task[object]] = [
        asyncio.create_task(pool.run(node, f"sleep {seconds}; echo held {i}", limit_s=seconds + 30))
        for i in range(MAX_CHANNELS)]
    deadline = time.monotonic() + 10
    while pool._slot(node).channels._value > 0:
        assert time.monotonic() < deadline, "the channels were not all taken"
        await asyncio.sleep(0.01)
    try:
        yield tasks
    finally:
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_burst_of_identical_status_questions_is_one_ssh_command_and_all_are_answered(
        make_cluster: MakeCluster) -> None:
    cluster = await ready(make_cluster)
    sshd = cluster.sshds["gpu-a"]
    async with runtime(cluster.config) as rt:
        before = execs(sshd)
        replies = await asyncio.gather(*(answer("status kimi", rt.context(Asker(surface="json")))
                                         for _ in range(BURST)))
        after = execs(sshd)
    texts = [render_text(r) for r in replies]
    assert all(r.ok for r in replies)
    assert not [t for t in texts if "unreachable" in t or "no answer" in t]
    states = {s["state"] for r in replies for s in r.data["services"]}
    assert states == {"ready"}
    # One probe on the node for all of them (seen: 1); each question is routed before it asks, so on a very busy
    # machine the last ones could reach the node after the first probe ended and ask once more.
    assert 1 <= after - before <= 2, after - before


async def test_each_question_gets_its_own_records(make_cluster: MakeCluster) -> None:
    """Two questions answered by one probe: what one handler adds to its records is not in the other's."""
    cluster = await ready(make_cluster)
    config = cluster.config
    async with runtime(config) as rt:
        node = config.nodes[0]
        before = execs(cluster.sshds["gpu-a"])
        (r1, s1, _), (r2, s2, _) = await asyncio.gather(
            rt.cluster.probe_node(node, config.services, STATUS_PROBE),
            rt.cluster.probe_node(node, config.services, STATUS_PROBE))
        assert execs(cluster.sshds["gpu-a"]) - before == 1
        assert s1[0].state == s2[0].state == "ready" and s1[0].flags == s2[0].flags
        s1[0].warnings.append("only in the first answer")  # what handlers do (record_snapshots)
        s1[0].flags["tensor-parallel-size"] = "1"
        assert "only in the first answer" not in s2[0].warnings
        assert s2[0].flags["tensor-parallel-size"] == "8"
        assert r1 is not r2 and r1.model_dump() == r2.model_dump()


async def test_only_the_same_question_is_shared_and_never_across_a_restart(make_cluster: MakeCluster) -> None:
    cluster = await ready(make_cluster)
    config, sshd = cluster.config, cluster.sshds["gpu-a"]
    node = config.nodes[0]
    async with runtime(config) as rt:
        cl = rt.cluster
        before = execs(sshd)
        other = ProbeOptions(metrics_samples=2, metrics_interval_s=1.0, journal_lines=10)
        done = await asyncio.gather(*(cl.probe_node(node, config.services, STATUS_PROBE) for _ in range(5)),
                                    *(cl.probe_node(node, config.services, other) for _ in range(5)),
                                    cl.probe_node(node, [], STATUS_PROBE))  # discovery: another question
        assert all(report.ok for report, _, _ in done)
        assert execs(sshd) - before == 3  # one per distinct question

        # A question asked while a probe is out shares it, unless this bot ran a command on the node since.
        before = execs(sshd)
        first = asyncio.create_task(cl.probe_node(node, config.services, STATUS_PROBE))
        await asyncio.sleep(0.3)
        late = asyncio.create_task(cl.probe_node(node, config.services, STATUS_PROBE))
        await asyncio.sleep(0.1)
        await rt.pool.run(node, "true")  # e.g. the restart command
        after_action = asyncio.create_task(cl.probe_node(node, config.services, STATUS_PROBE))
        await asyncio.gather(first, late, after_action)
        assert execs(sshd) - before == 3  # first (shared by late), the command, after_action's own


async def test_waiting_for_a_channel_longer_than_the_node_timeout_is_not_unreachable(
        make_cluster: MakeCluster) -> None:
    """Distinct questions (nothing to share) queue for the node's channels for longer than its timeout."""
    cluster = await ready(make_cluster, node_timeout=2.0)
    config, sshd = cluster.config, cluster.sshds["gpu-a"]
    node = config.nodes[0]
    questions = [ProbeOptions(metrics_samples=2, metrics_interval_s=1.0, journal_lines=10 + i)
                 for i in range(3 * MAX_CHANNELS)]  # three rounds of ~1.5 s on 8 channels: > 2 s + 1 s
    async with runtime(config) as rt:
        before = execs(sshd)
        done = await asyncio.gather(*(rt.cluster.probe_node(node, config.services, q) for q in questions))
        assert [(r.ok, r.error) for r, _, _ in done] == [(True, None)] * len(questions)
        assert {st[0].state for _, st, _ in done} == {"ready"}
        assert execs(sshd) - before == len(questions)


async def test_a_busy_bot_says_so_and_does_not_blame_the_node(make_cluster: MakeCluster) -> None:
    cluster = await ready(make_cluster, node_timeout=1.0)
    config = cluster.config
    node = config.nodes[0]
    async with runtime(config) as rt:
        rt.pool.wait_s = 0.5  # (a question waits at least its own limit: 1 s + the 1 s between samples)
        async with holding_channels(rt.pool, node, 6.0):
            reply = await answer("status kimi", rt.context(Asker(surface="json")))
        text = render_text(reply)
    [svc] = reply.data["services"]
    [report] = reply.data["nodes"]
    assert report["error"]["kind"] == "busy"
    assert svc["reason"].startswith("inferbot is busy: 1 question is waiting for gpu-a")
    assert "unreachable" not in text and "check that the node is up" not in text
    assert "inferbot is busy" in text and "try again in a moment" in text
    assert reply.data["unreachable"] == [] and reply.data["busy"] == ["gpu-a"]


async def test_the_home_tab_of_a_busy_bot_lists_no_unreachable_node(make_cluster: MakeCluster) -> None:
    cluster = await ready(make_cluster, node_timeout=1.0)
    node = cluster.config.nodes[0]
    async with runtime(cluster.config) as rt:
        rt.pool.wait_s = 0.5
        async with holding_channels(rt.pool, node, 6.0):
            dash = await read_dashboard(rt.context(Asker(surface="slack")))
    assert dash.unreachable == []
    [card] = dash.services
    assert card.state_words.startswith("inferbot is busy: 1 question is waiting for gpu-a")


async def test_a_hung_node_still_times_out_with_its_own_timeout_once_for_a_burst(make_cluster: MakeCluster) -> None:
    cluster = await ready(make_cluster, node_timeout=1.5)
    cluster.sims["gpu-a"].set_hung_systemctl(True)
    config, sshd = cluster.config, cluster.sshds["gpu-a"]
    async with runtime(config) as rt:
        before = execs(sshd)
        replies = await asyncio.gather(*(answer("status kimi", rt.context(Asker(surface="json")))
                                         for _ in range(20)))
        after = execs(sshd)
    for r in replies:
        [report] = r.data["nodes"]
        assert report["error"]["kind"] == "timeout"
        assert "no answer from" in report["error"]["reason"] and "within 2.5s" in report["error"]["reason"]
    assert after - before == 1


async def test_callers_waiting_for_a_connection_that_fails_share_its_answer(tmp_path: Path) -> None:
    """A port that accepts and never speaks: ten different questions make one connection attempt, not ten in a
    row (each for the node's whole timeout), and each says what the node did: no answer within its timeout."""
    accepted: list[socket.socket] = []
    server = socket.create_server(("127.0.0.1", free_port()))
    server.setblocking(False)
    loop = asyncio.get_running_loop()

    async def accept() -> None:
        while True:
            conn, _ = await loop.sock_accept(server)
            accepted.append(conn)

    acceptor = asyncio.create_task(accept())
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    node = Node(name="gpu-x", host="127.0.0.1", port=server.getsockname()[1], user="nobody",
                known_hosts=str(known_hosts), timeout=1.0)
    config = BotConfig(nodes=[node], services=[])
    pool = NodePool()
    try:
        cluster = Cluster(config, pool)
        questions = [ProbeOptions(journal_lines=i) for i in range(10)]
        done = await asyncio.gather(*(cluster.probe_node(node, [], q) for q in questions))
    finally:
        acceptor.cancel()
        await pool.close()
        for c in accepted:
            c.close()
        server.close()
    assert [r.error.kind if r.error else None for r, _, _ in done] == ["timeout"] * 10
    assert all("within 1s" in r.error.reason for r, _, _ in done if r.error)
    assert len(accepted) == 1
