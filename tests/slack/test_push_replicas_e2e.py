"""Push across a leader change (issue 26): two real ``inferbot serve --http`` replicas on one real PostgreSQL.

Every poll is an hour apart: after the follow's and the watcher's first looks, a notice can only come from a
journal stream. The leader follows the node's journal, is SIGKILLed mid-load, the standby takes over and
resumes the stream from the cursor the old leader kept in the shared store: the ✅ of the load is posted
once per place, soon after vLLM's "Application startup complete.", and a crash after it is said once, soon
after systemd's exit line, by the new leader alone.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import aiohttp

from services.sim.scenarios import KIMI_UNIT, fast_profile, kimi_node, kimi_unit
from services.store.store import Store
from tests.conftest import MakeCluster, SimCluster
from tests.pg import PgServer
from tests.slack.conftest import event_body, mention
from tests.slack.fake_slack import FakeSlack
from tests.slack.test_replicas_e2e import (
    ALICE,
    ASKED_AT,
    BOB,
    NOTIFY,
    OPS,
    Replica,
    leader_and_standby,
    posts,
    texts,
    until,
    write_config,
)
from tests.sshd import free_port
from tests.test_push import PUSHED_WITHIN_S, journal_times


def _posted_at(fake: FakeSlack, channel: str, word: str) -> list[float]:
    """When (epoch seconds) the fake Slack got each post of ``word`` in ``channel`` (it keeps monotonic times)."""
    epoch = time.time() - time.monotonic()
    return [epoch + float(c.at) for c in fake.calls_to("chat.postMessage")
            if c.body.get("channel") == channel and word in str(c.body.get("text", ""))]


async def _until_the_cursor_is_kept(pg_server: PgServer, db: str) -> None:
    """Wait (up to 30 s) until the old leader has handed over a line of this load: its journal cursor is kept."""
    watcher = Store(pg_server.url(db))
    try:
        for _ in range(300):
            if await watcher.journal_cursors.get("gpu-a"):
                break
            await asyncio.sleep(0.1)
        assert await watcher.journal_cursors.get("gpu-a")
    finally:
        await watcher.close()


async def test_a_new_leader_resumes_the_stream_and_says_each_thing_once(make_cluster: MakeCluster,
                                                                         pg_server: PgServer,
                                                                         tmp_path: Path) -> None:
    scenario = kimi_node(fast=True, port=free_port())
    # About 12 s of weights: time to kill the leader and for the standby to take over mid-load.
    scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, restart_sec=5,
                                  profile=fast_profile(seconds_per_shard=0.1))
    cluster: SimCluster = await make_cluster({"gpu-a": scenario})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 60)
    db = pg_server.database()
    cfg = write_config(cluster, pg_server, db, tmp_path,
                       '[watch]\npoll = "1h"\ninterval = "1h"\nsafety_interval = "1h"\nmax_load = "120s"\n')
    fake = await FakeSlack().start()
    replicas: list[Replica] = []
    try:
        async with aiohttp.ClientSession() as session:
            a, b = await leader_and_standby(session, cfg, fake, tmp_path, replicas)
            await asyncio.sleep(2.0)  # the leader's first watcher look and its stream (RestartSec is 5 s)

            assert await a.post_event(session, event_body(
                mention("restart kimi", user=ALICE, channel=OPS, ts=ASKED_AT))) == 200
            await until(lambda: any("restart_confirm" in str(p.get("blocks")) for p in posts(fake, OPS)), 30,
                        "the confirmation")
            body = next(p for p in posts(fake, OPS) if "restart_confirm" in str(p.get("blocks")))
            rid = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"][0]["value"]
            started = time.time()
            assert await a.click(session, fake, BOB, rid) == 200
            await until(lambda: bool(journal_times(sim, "Completed |", after=started)), 30, "the load")
            await until(lambda: any("kimi on gpu-a:" in t for t in texts(fake, OPS, ASKED_AT)), 30, "progress")
            await _until_the_cursor_is_kept(pg_server, db)
            assert sim.state(KIMI_UNIT).sim_state == "loading", sim.state(KIMI_UNIT)
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(10)
            await b.wait_role(session, "leader", 15)

            await until(lambda: bool(_posted_at(fake, NOTIFY, "is ready")), 90, "the ready notice")
            (line_at,) = journal_times(sim, "Application startup complete.", after=started)
            assert all(line_at <= at < line_at + PUSHED_WITHIN_S for at in _posted_at(fake, NOTIFY, "is ready"))

            # A crash after the takeover: said once, by the new leader, at systemd's exit line.
            crashed = time.time()
            await sim.crash(KIMI_UNIT)
            await until(lambda: bool(_posted_at(fake, NOTIFY, "restarted (not by inferbot)")), 30, "the crash")
            (exited,) = journal_times(sim, "Main process exited", after=crashed)
            (said,) = _posted_at(fake, NOTIFY, "restarted (not by inferbot)")
            assert exited <= said < exited + PUSHED_WITHIN_S
            await until(lambda: len(_posted_at(fake, NOTIFY, "is ready")) >= 2, 60, "ready after the crash")
            await asyncio.sleep(2.0)
        assert len([t for t in texts(fake, OPS, ASKED_AT) if "is ready" in t]) == 1
        assert len(_posted_at(fake, NOTIFY, "is ready")) == 2  # the restart's load, then the crash's
        assert len(_posted_at(fake, NOTIFY, "restarted (not by inferbot)")) == 1
        assert not [t for t in texts(fake, NOTIFY) if "failed" in t]
    finally:
        for r in replicas:
            r.stop()
        await fake.stop()
