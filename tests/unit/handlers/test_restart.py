"""handlers/restart.py as a kind: a restart request a stopped bot left confirmed or running ends once.

Its load's follow ends it (``handlers/follow.py``); a request whose follow ended while no process heard it,
or that never got as far as recording one, is ended by the settle job of the next bot: exactly once, with
its lock released. The guarded restart itself is tested end to end in tests/test_restart.py.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from config.models import BotConfig
from handlers.confirmable.kind import CONFIRM
from handlers.follow import follow_key, lock_name
from services.sim.scenarios import KIMI_UNIT
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.test_restart import ALICE, BOB, NOTIFY, OPS, THREAD, Bot, bot, kimi_cluster, notices, set_profile, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

LONG_AGO = datetime.now(UTC) - timedelta(hours=2)
KEY = follow_key("kimi", "gpu-a")
LOCK = lock_name("kimi", "gpu-a")


async def _left_running(store: Store, rid: str, executed: bool = False) -> None:
    await store.requests.create(rid, "kimi", "gpu-a", KIMI_UNIT, ALICE, OPS, THREAD, LONG_AGO,
                                LONG_AGO + timedelta(minutes=2), False, kind="restart")
    await store.requests.transition(rid, {"pending"}, "confirmed", BOB, LONG_AGO)
    await store.requests.transition(rid, {"confirmed"}, "running", BOB, LONG_AGO)
    if executed:
        await store.audit.record("restart.executed", BOB, OPS, "kimi", "gpu-a", "`systemctl restart`; exit 0",
                                 at=LONG_AGO, request_id=rid)


async def _states(b: Bot, *rids: str) -> dict[str, str]:
    assert b.rt.store is not None
    return {r.id: r.state for r in [await b.rt.store.requests.get(rid) for rid in rids] if r is not None}


async def _interrupted(b: Bot) -> dict[str | None, str]:
    assert b.rt.store is not None
    return {e.request_id: e.detail for e in await b.rt.store.audit.recent("kimi", 100)
            if e.event == "restart.interrupted"}


async def test_a_restart_left_by_a_stopped_bot_ends_once(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    store = Store(BotConfig.model_validate(cluster.config.model_dump()).state.database_url())
    try:
        # r-heard-not: its load was followed to the end, but the process stopped before the request heard it.
        await _left_running(store, "r-heard-not", executed=True)
        await store.follows.upsert(KEY, "kimi", "gpu-a", KIMI_UNIT, "inv-1", LONG_AGO, "restart",
                                   thread_channel=OPS, thread_ts=THREAD, request_id="r-heard-not")
        await store.follows.finish(KEY, "ready", at=LONG_AGO + timedelta(minutes=30))
        await store.locks.acquire(LOCK, "r-heard-not", 3600 * 4, LONG_AGO)
        # r-never: the process stopped between its confirmation and the follow it records before running.
        await _left_running(store, "r-never")
        # r-ran: its command ran, but no follow of its load is on record.
        await _left_running(store, "r-ran", executed=True)
    finally:
        await store.close()
    async with bot(cluster.config) as b:
        deadline = time.monotonic() + 20
        while await _states(b, "r-heard-not", "r-never", "r-ran") != {
                "r-heard-not": "done", "r-never": "failed", "r-ran": "failed"}:
            assert time.monotonic() < deadline, await _states(b, "r-heard-not", "r-never", "r-ran")
            await asyncio.sleep(0.1)
        assert await _interrupted(b) == {
            "r-never": "the restart never started: the bot stopped before running it",
            "r-ran": "the bot stopped after the restart ran, before its load was followed"}
        assert b.rt.store is not None and await b.rt.store.locks.holder(LOCK, datetime.now(UTC)) is None
        assert b.restarts_run() == []
    async with bot(cluster.config) as again:  # nothing is ended twice
        await asyncio.sleep(2.5)
        assert len(await _interrupted(again)) == 2


async def test_a_restart_in_flight_is_left_to_its_follow(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.15)  # ~18 s of weights: seen running by the leader
    async with bot(cluster.config) as b:
        reply = await b.ask("restart kimi")
        rid = str(reply.data["request_id"])
        assert (await b.click(CONFIRM, rid, BOB)).executed
        await until(lambda: f"restart:{rid}" in b.scheduler.job_ids(), 15, "the settle job of the request")
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 45, "the ready notice")
        assert (await _states(b, rid)) == {rid: "done"}
        assert await _interrupted(b) == {}
