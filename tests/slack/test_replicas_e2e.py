"""Two real ``inferbot serve --http`` replicas on one real PostgreSQL, a fake Slack and a simulated node.

What a user would notice: an event delivered to both replicas is answered once; two people (or one, twice)
clicking Confirm on different replicas restart once; the leader is SIGKILLed in the middle of the load it
follows and the other replica takes over, keeps editing the **same** progress message and posts exactly one
✅ per place; the audit log says ``restart.executed`` once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, fast_profile, kimi_node, kimi_unit
from services.store.records import Follow
from services.store.store import Store
from tests.conftest import MakeCluster, SimCluster
from tests.pg import PASSWORD, PgServer
from tests.slack.conftest import SIGNING_SECRET, event_body, mention, sign
from tests.slack.fake_slack import FakeSlack
from tests.sshd import free_port
from tests.test_e2e_faults import _toml

ALICE, BOB = "U0ALICE", "U0BOB"
OPS = "C0OPS"
NOTIFY = "C0NOTIFY"
ASKED_AT = "1700000700.000100"
ROOT = Path(__file__).resolve().parents[2]


def serve(cfg: Path, port: int, fake: FakeSlack, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-replica-test", "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "INFERBOT_SLACK_API_URL": fake.api_url, "INFERBOT_LOG_LEVEL": "INFO", "INFERBOT_DB_PASSWORD": PASSWORD}
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--http", "--host", "127.0.0.1", "--port", str(port),
         "--config", str(cfg)],
        cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
    )


async def until(pred: Any, within: float, what: str) -> float:
    start = time.monotonic()
    while not pred():
        if time.monotonic() - start > within:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


class Replica:
    def __init__(self, name: str, cfg: Path, fake: FakeSlack, tmp: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"{name}.log"
        self.proc = serve(cfg, self.port, fake, self.log)

    async def role(self, session: aiohttp.ClientSession) -> str | None:
        try:
            async with session.get(self.url + "/healthz", timeout=aiohttp.ClientTimeout(total=2)) as r:
                text = await r.text()
                return text.removeprefix("ok ").strip() if r.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def wait_role(self, session: aiohttp.ClientSession, role: str, within: float) -> float:
        start = time.monotonic()
        while time.monotonic() - start < within:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            if await self.role(session) == role:
                return time.monotonic() - start
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.name} is not {role} after {within} s: {self.log.read_text()[-2000:]}")

    async def post_event(self, session: aiohttp.ClientSession, body: dict[str, Any]) -> int:
        raw = json.dumps(body)
        async with session.post(self.url + "/slack/events", data=raw,
                                headers={"Content-Type": "application/json", **sign(raw)}) as r:
            return r.status

    async def click(self, session: aiohttp.ClientSession, fake: FakeSlack, user: str, rid: str) -> int:
        payload = {"type": "block_actions", "user": {"id": user}, "team": {"id": "T0TEAM"}, "api_app_id": "A0APP",
                   "channel": {"id": OPS},
                   "container": {"type": "message", "message_ts": "1700000701.000100", "channel_id": OPS},
                   "response_url": fake.response_url(f"click-{self.name}"), "trigger_id": "1.2.3",
                   "actions": [{"action_id": "restart_confirm", "block_id": "b1", "type": "button", "value": rid,
                                "action_ts": "1700000702.000000"}]}
        form = urlencode({"payload": json.dumps(payload)})
        async with session.post(self.url + "/slack/events", data=form, headers={
                "Content-Type": "application/x-www-form-urlencoded", **sign(form)}) as r:
            return r.status

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def posts(fake: FakeSlack, channel: str, thread_ts: str | None = None) -> list[dict[str, Any]]:
    return [c.body for c in fake.calls_to("chat.postMessage") if c.body.get("channel") == channel
            and (thread_ts is None or c.body.get("thread_ts") == thread_ts)]


def texts(fake: FakeSlack, channel: str, thread_ts: str | None = None) -> list[str]:
    return [str(b.get("text", "")) for b in posts(fake, channel, thread_ts)]


def write_config(cluster: SimCluster, pg_server: PgServer, db: str, tmp: Path, watch: str) -> Path:
    """The replicas' shared config: the cluster, the PostgreSQL store ([state] url: no password), Alice and Bob
    allowed to restart without a cooldown, the notify channel, and ``watch`` as the [watch] table's lines."""
    cfg = tmp / "inferbot.toml"
    cfg.write_text(_toml(cluster) + f'url = "{pg_server.config_url(db)}"\n'
                   f'[access]\nrestart_users = ["{ALICE}", "{BOB}"]\ncooldown = 0\n'
                   f'[notify]\nchannel = "{NOTIFY}"\n' + watch)
    return cfg


async def leader_and_standby(session: aiohttp.ClientSession, cfg: Path, fake: FakeSlack, tmp: Path,
                             replicas: list[Replica]) -> tuple[Replica, Replica]:
    """Start replica a, wait for it to lead, then replica b, and wait for it to stand by (both in ``replicas``)."""
    a = Replica("a", cfg, fake, tmp)
    replicas.append(a)
    await a.wait_role(session, "leader", 40)
    b = Replica("b", cfg, fake, tmp)
    replicas.append(b)
    await b.wait_role(session, "standby", 40)
    return a, b


async def _one_answer_to_an_event_delivered_twice(session: aiohttp.ClientSession, fake: FakeSlack, a: Replica,
                                                  b: Replica) -> None:
    """The same event delivered to both replicas (Slack retried on the other one): one answer."""
    same = event_body(mention("help", user=ALICE, channel=OPS, ts="1700000600.000100"))
    assert await asyncio.gather(a.post_event(session, same), b.post_event(session, same)) == [200, 200]
    await until(lambda: texts(fake, OPS, "1700000600.000100"), 20, "the help answer")
    await asyncio.sleep(1.0)
    assert len(posts(fake, OPS, "1700000600.000100")) == 1


def _confirmation(fake: FakeSlack) -> dict[str, Any] | None:
    return next((b for b in posts(fake, OPS) if "restart_confirm" in json.dumps(b.get("blocks", []))), None)


async def _one_restart_confirmed_on_both(session: aiohttp.ClientSession, fake: FakeSlack, a: Replica, b: Replica,
                                         sim: SimNode, pid_before: int) -> None:
    """A restart asked on the leader, confirmed on both replicas at once: one restart, and its load begins."""
    assert await a.post_event(session, event_body(
        mention("restart kimi", user=ALICE, channel=OPS, ts=ASKED_AT))) == 200
    await until(lambda: _confirmation(fake) is not None, 30, "the confirmation")
    body = _confirmation(fake)
    assert body is not None
    rid = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"][0]["value"]
    assert await asyncio.gather(a.click(session, fake, ALICE, rid), b.click(session, fake, BOB, rid)) \
        == [200, 200]
    await until(lambda: sim.state(KIMI_UNIT).main_pid not in (0, pid_before), 30, "the restart")
    await sim.wait_for(KIMI_UNIT, "loading", 30)


def _progress(fake: FakeSlack) -> list[dict[str, Any]]:
    return [p for p in posts(fake, OPS, ASKED_AT) if "kimi on gpu-a:" in str(p.get("text", ""))]


def _edits(fake: FakeSlack) -> list[dict[str, Any]]:
    return [c.body for c in fake.calls_to("chat.update") if "kimi on gpu-a:" in str(c.body.get("text", ""))]


async def _until_audited(pg_server: PgServer, db: str, event: str) -> None:
    """Wait (up to 30 s) until the shared store's audit log has ``event``."""
    watcher = Store(pg_server.url(db))
    try:
        for _ in range(300):
            if event in [e.event for e in await watcher.audit.recent(limit=50)]:
                break
            await asyncio.sleep(0.1)
    finally:
        await watcher.close()


async def _audit_and_follow(pg_server: PgServer, db: str) -> tuple[list[str], Follow | None]:
    store = Store(pg_server.url(db))
    try:
        events = [e.event for e in await store.audit.recent(limit=200)]
        follow = await store.follows.get("kimi@gpu-a")
    finally:
        await store.close()
    return events, follow


async def test_two_replicas_exactly_once_through_a_leader_kill(make_cluster: MakeCluster, pg_server: PgServer,
                                                               tmp_path: Path) -> None:
    scenario = kimi_node(fast=True, port=free_port())
    # About 12 s of weights: time to kill the leader and for the standby to take over mid-load.
    scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, profile=fast_profile(seconds_per_shard=0.1))
    cluster: SimCluster = await make_cluster({"gpu-a": scenario})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 60)
    pid_before = sim.state(KIMI_UNIT).main_pid
    db = pg_server.database()
    cfg = write_config(cluster, pg_server, db, tmp_path,
                       '[watch]\npoll = "0.3s"\ninterval = "30s"\nmax_load = "120s"\n')
    fake = await FakeSlack().start()
    replicas: list[Replica] = []
    try:
        async with aiohttp.ClientSession() as session:
            a, b = await leader_and_standby(session, cfg, fake, tmp_path, replicas)
            # 1. the same event delivered to both replicas (Slack retried on the other one): one answer
            await _one_answer_to_an_event_delivered_twice(session, fake, a, b)
            # 2. a restart asked on the leader, confirmed on both replicas at once: one restart
            await _one_restart_confirmed_on_both(session, fake, a, b, sim, pid_before)
            # 3. the leader posts the one progress message, then is SIGKILLed mid-load
            await until(lambda: _progress(fake), 30, "the progress message")
            # Mid-load, not mid-command: the winner has run the restart and written it to the audit log.
            # (The follow is on record before the command runs, so the leader may already be following.)
            await _until_audited(pg_server, db, "restart.executed")
            assert sim.state(KIMI_UNIT).sim_state == "loading", sim.state(KIMI_UNIT)
            assert not any("is ready" in t for t in texts(fake, NOTIFY))
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(10)
            killed = time.monotonic()
            edits_before = len(_edits(fake))
            took = await b.wait_role(session, "leader", 15)
            assert time.monotonic() - killed < 15, took

            await until(lambda: any("is ready" in t for t in texts(fake, NOTIFY))
                        and any("is ready" in t for t in texts(fake, OPS, ASKED_AT)), 90, "the ready notices")
            await asyncio.sleep(1.5)  # a few more polls: nothing more may be posted
        thread_ready = [t for t in texts(fake, OPS, ASKED_AT) if "is ready" in t]
        channel_ready = [t for t in texts(fake, NOTIFY) if "is ready" in t]
        assert len(thread_ready) == 1 and len(channel_ready) == 1, (thread_ready, channel_ready)
        assert thread_ready[0].startswith("✅ kimi on gpu-a is ready — loaded in")
        assert len(_progress(fake)) == 1  # one progress message for the whole load, across the failover
        events, follow = await _audit_and_follow(pg_server, db)
        assert follow is not None and follow.progress_message_ts and follow.outcome == "ready"
        after = _edits(fake)[edits_before:]
        assert after, "the new leader never edited the progress message"
        assert {e["ts"] for e in _edits(fake)} == {follow.progress_message_ts}  # the same message, before and after
        assert "load finished after" in str(after[-1].get("text"))  # ...up to the last edit
        assert sim.state(KIMI_UNIT).n_restarts == 0  # systemd saw one restart by hand, no crash loop
        assert events.count("restart.executed") == 1, events
        assert events.count("restart.confirmed") == 1, events
    finally:
        for r in replicas:
            r.stop()
        await fake.stop()
