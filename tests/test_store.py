"""The state store on real SQLite files: dedupe, diffs, history, audit, locks, CAS, notices, two processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from services.models import ServiceState
from services.settings_diff import DiffItem, diff_snapshots
from services.store.schema import JOBSTORE_TABLE
from services.store.store import Store
from tests.pg import PgServer

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 2, 21, 13, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def state(**kw: Any) -> ServiceState:
    base: dict[str, Any] = {
        "service": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service", "state": "ready",
        "model": "moonshotai/Kimi-K2", "flags": {"tensor-parallel-size": "8", "enforce-eager": False},
        "env": {"VLLM_USE_V1": "1"}, "version": "0.11.0", "settings_source": "process",
    }
    base.update(kw)
    return ServiceState(**base)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every store test runs on a SQLite file and on a fresh database of a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'inferbot.sqlite3'}"
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url(server.database())


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    s = Store(url)
    yield s
    await s.close()


@pytest.fixture
async def store2(url: str) -> AsyncIterator[Store]:
    """A second, independent Store (own engine and connections) on the same file: another bot process."""
    s = Store(url)
    yield s
    await s.close()


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# --------------------------------------------------------------------------------------------------
# snapshots


async def test_snapshot_dedupe_diff_and_last_ready(store: Store) -> None:
    a1 = await store.snapshots.record(state(state="loading"), at(0))
    a2 = await store.snapshots.record(state(state="ready"), at(5))
    assert a2.id == a1.id  # same settings: no new row, just seen again
    assert (a2.first_seen_at, a2.last_seen_at, a2.was_ready, a2.state) == (at(0), at(5), True, "ready")
    assert a2.last_seen_at.tzinfo is UTC

    changed = state(state="loading", flags={"tensor-parallel-size": "4", "enforce-eager": False},
                    env={"VLLM_USE_V1": "1", "VLLM_TORCH_PROFILER_DIR": "/tmp/prof"})
    b1 = await store.snapshots.record(changed, at(10))
    b2 = await store.snapshots.record(changed, at(12))
    assert b2.id == b1.id != a1.id
    assert not b2.was_ready and b2.last_ready_at is None

    latest = await store.snapshots.latest("kimi", "gpu-a")
    assert [s.id for s in latest] == [b1.id, a1.id]
    assert latest[0].first_seen_at == at(10) and latest[0].last_seen_at == at(12)
    assert diff_snapshots(latest[1], latest[0]) == [
        DiffItem(kind="flag", key="tensor-parallel-size", old="8", new="4"),
        DiffItem(kind="env", key="VLLM_TORCH_PROFILER_DIR", old=None, new="/tmp/prof"),
    ]

    ready = await store.snapshots.last_ready("kimi", "gpu-a")
    assert ready is not None and ready.id == a1.id and ready.last_ready_at == at(5)
    # The settings answer can diff the live state against the last known-ready snapshot.
    assert [d.key for d in diff_snapshots(ready, changed)] == ["tensor-parallel-size", "VLLM_TORCH_PROFILER_DIR"]

    c = await store.snapshots.record(state(model="Qwen/Qwen3-235B", version="0.11.1"), at(20))
    latest = await store.snapshots.latest("kimi", "gpu-a", limit=5)
    assert [s.id for s in latest] == [c.id, b1.id, a1.id]
    assert [(d.kind, d.old, d.new) for d in diff_snapshots(latest[1], latest[0])][:2] == [
        ("model", "moonshotai/Kimi-K2", "Qwen/Qwen3-235B"), ("version", "0.11.0", "0.11.1")]
    assert (await store.snapshots.last_ready("kimi", "gpu-a")).id == c.id  # type: ignore[union-attr]
    # Back to the first settings: that is a change too (a new row), not the old row revived.
    d = await store.snapshots.record(state(state="loading"), at(30))
    assert d.id not in (a1.id, b1.id, c.id) and not d.was_ready
    assert await store.snapshots.mark_ready("kimi", "gpu-a", at(31))
    assert (await store.snapshots.last_ready("kimi", "gpu-a")).id == d.id  # type: ignore[union-attr]
    # Other targets are separate.
    assert await store.snapshots.latest("kimi", "gpu-b") == []
    assert await store.snapshots.last_ready("qwen", "gpu-a") is None


def test_diff_added_removed_and_unchanged() -> None:
    old = state(flags={"a": "1", "b": True, "c": ["x"]}, env={"E": "1"})
    new = state(flags={"b": True, "c": ["x", "y"], "d": "4"}, env={}, version=None)
    assert [(d.kind, d.key, d.old, d.new) for d in diff_snapshots(old, new)] == [
        ("version", "version", "0.11.0", None),
        ("flag", "a", "1", None),
        ("flag", "c", ["x"], ["x", "y"]),
        ("flag", "d", None, "4"),
        ("env", "E", "1", None),
    ]
    assert diff_snapshots(old, old) == []
    assert DiffItem(kind="flag", key="a", old="1").model_dump() == {
        "kind": "flag", "key": "a", "old": "1", "new": None}


# --------------------------------------------------------------------------------------------------
# load history, audit, cooldowns, watch


async def test_load_history_newest_first_and_idempotent(store: Store) -> None:
    assert await store.loads.durations("kimi", "gpu-a") == []
    assert await store.loads.last("kimi", "gpu-a") is None
    assert await store.loads.record("kimi", "gpu-a", "inv-2", at(100), at(130), "ready", 1800.0)
    assert await store.loads.record("kimi", "gpu-a", "inv-1", at(0), at(29), "ready", 1754.0)
    assert await store.loads.record("kimi", "gpu-a", "inv-3", at(200), None, "failed", 95.0)
    assert await store.loads.record("kimi", "gpu-a", "inv-4", at(300), at(331), "ready", 1862.0)
    assert await store.loads.record("kimi", "gpu-b", "inv-9", at(400), at(401), "ready", 60.0)
    # the same load again (e.g. after a bot restart): no second row
    assert not await store.loads.record("kimi", "gpu-a", "inv-4", at(300), at(331), "ready", 1862.0)
    assert await store.loads.durations("kimi", "gpu-a") == [1862.0, 1800.0, 1754.0]
    assert await store.loads.durations("kimi", "gpu-a", limit=2) == [1862.0, 1800.0]
    last = await store.loads.last("kimi", "gpu-a")
    assert last is not None and (last.invocation_id, last.outcome, last.ready_at) == ("inv-4", "ready", at(331))
    await store.loads.record("kimi", "gpu-a", "inv-5", at(400), None, "timeout", 3600.0)
    last = await store.loads.last("kimi", "gpu-a")
    assert last is not None and last.outcome == "timeout" and last.ready_at is None


async def test_audit_listing_filtered_by_service(store: Store) -> None:
    await store.audit.record("request", "U1", "C1", "kimi", "gpu-a", "restart requested", at=at(0), request_id="r1")
    await store.audit.record("refused", "U2", "C1", "qwen", "gpu-b", "not allowed", at=at(1))
    await store.audit.record("confirmed", "U3", "C1", "kimi", "gpu-a", "confirmed", at=at(2), request_id="r1")
    entry = await store.audit.record("startup", None, None, None, None, "bot started")
    assert entry.at.tzinfo is UTC and entry.id > 0
    kimi = await store.audit.recent("kimi")
    assert [(e.event, e.who, e.where, e.request_id) for e in kimi] == [
        ("confirmed", "U3", "C1", "r1"), ("request", "U1", "C1", "r1")]
    assert [e.event for e in await store.audit.recent()] == ["startup", "confirmed", "refused", "request"]
    assert [e.event for e in await store.audit.recent(limit=2)] == ["startup", "confirmed"]


async def test_cooldown_watch_and_misc(store: Store, url: str) -> None:
    assert await store.restarts.last_at("kimi", "gpu-a") is None
    await store.restarts.record("kimi", "gpu-a", at(0), "U1", forced=False)
    await store.restarts.record("kimi", "gpu-a", at(10), "U2", forced=True)
    await store.restarts.record("kimi", "gpu-b", at(20), "U2", forced=False)
    assert await store.restarts.last_at("kimi", "gpu-a") == at(10)
    rec = await store.restarts.last("kimi", "gpu-a")
    assert rec is not None and rec.by == "U2" and rec.forced

    assert await store.watches.get("kimi", "gpu-a") is None
    await store.watches.put("kimi", "gpu-a", 4242, at(0), 0, "activating")
    await store.watches.put("kimi", "gpu-a", 5151, at(3), 1, "active")
    w = await store.watches.get("kimi", "gpu-a")
    assert w is not None and (w.main_pid, w.started_at, w.n_restarts, w.active_state) == (5151, at(3), 1, "active")

    with pytest.raises(ValueError, match="timezone-aware"):
        await store.locks.holder("x", datetime(2026, 1, 1))
    assert store.jobstore_url() == url
    # a non-UTC aware datetime comes back as the same instant in UTC
    cet = at(0).astimezone(timezone(timedelta(hours=1)))
    await store.restarts.record("qwen", "gpu-a", cet, None, forced=False)
    got = await store.restarts.last_at("qwen", "gpu-a")
    assert got == at(0) and got.tzinfo is UTC


async def test_in_memory_url_and_closed_store() -> None:
    s = Store("sqlite://")
    await asyncio.gather(*(s.audit.record("e", None, None, "kimi", None, str(i)) for i in range(10)))
    assert len(await s.audit.recent("kimi")) == 10
    await s.close()
    with pytest.raises(RuntimeError, match="closed"):
        await s.audit.recent()


async def test_apscheduler_jobstore_shares_the_file(store: Store) -> None:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    await store.audit.record("startup", None, None, None, None, "bot started")
    jobstore = SQLAlchemyJobStore(url=store.jobstore_url(), tablename=JOBSTORE_TABLE)
    jobstore.start(None, "default")
    try:
        assert jobstore.get_all_jobs() == []
    finally:
        jobstore.shutdown()
    assert len(await store.audit.recent()) == 1


# --------------------------------------------------------------------------------------------------
# locks


async def test_lock_acquire_expiry_takeover_release(store: Store, store2: Store) -> None:
    assert await store.locks.holder("restart:kimi@gpu-a", at(0)) is None
    assert await store.locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(0))
    assert not await store2.locks.acquire("restart:kimi@gpu-a", "bot-2", 60, at(0.5))
    assert await store2.locks.holder("restart:kimi@gpu-a", at(0.5)) == "bot-1"
    assert await store.locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(0.9))  # renew: until 1.9
    assert await store.locks.holder("restart:kimi@gpu-a", at(1.5)) == "bot-1"
    assert not await store2.locks.acquire("restart:kimi@gpu-a", "bot-2", 60, at(1.5))
    # expired: nobody holds it, and someone else may take it over (survives a crashed holder)
    assert await store.locks.holder("restart:kimi@gpu-a", at(2)) is None
    assert await store2.locks.acquire("restart:kimi@gpu-a", "bot-2", 60, at(2))
    assert not await store.locks.release("restart:kimi@gpu-a", "bot-1")  # not ours any more
    assert await store.locks.holder("restart:kimi@gpu-a", at(2.5)) == "bot-2"
    assert await store2.locks.release("restart:kimi@gpu-a", "bot-2")
    assert await store.locks.holder("restart:kimi@gpu-a", at(2.5)) is None
    assert await store.locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(2.6))
    # other lock names are independent
    assert await store2.locks.acquire("restart:qwen@gpu-b", "bot-2", 60, at(2.6))


async def test_lock_record_and_clear(store: Store, store2: Store) -> None:
    assert await store.locks.get("restart:kimi@gpu-a", at(0)) is None
    assert await store.locks.clear("restart:kimi@gpu-a") is None
    assert await store.locks.acquire("restart:kimi@gpu-a", "r-1", 60, at(0))
    held = await store2.locks.get("restart:kimi@gpu-a", at(0.5))
    assert held is not None and held.owner == "r-1" and held.acquired_at == at(0)
    assert await store2.locks.get("restart:kimi@gpu-a", at(1.5)) is None  # expired is not held
    assert await store2.locks.clear("restart:kimi@gpu-a", owner="r-2") is None  # only if it is r-2's
    removed = await store2.locks.clear("restart:kimi@gpu-a")  # by hand: whoever holds it
    assert removed is not None and removed.owner == "r-1"
    assert await store.locks.get("restart:kimi@gpu-a", at(0.5)) is None
    assert await store.locks.acquire("restart:kimi@gpu-a", "r-3", 60, at(0.6))


async def test_lock_race_between_two_stores(store: Store, store2: Store) -> None:
    for round_ in range(10):
        name = f"race-{round_}"
        results = await asyncio.gather(
            store.locks.acquire(name, "bot-1", 30, at(0)), store2.locks.acquire(name, "bot-2", 30, at(0)),
            store.locks.acquire(name, "bot-3", 30, at(0)), store2.locks.acquire(name, "bot-4", 30, at(0)),
        )
        assert sum(results) == 1, (round_, results)
        winner = ["bot-1", "bot-2", "bot-3", "bot-4"][results.index(True)]
        assert await store2.locks.holder(name, at(0.1)) == winner
        # after expiry, concurrent takeovers: again exactly one
        takeovers = await asyncio.gather(
            store.locks.acquire(name, "bot-5", 30, at(1)), store2.locks.acquire(name, "bot-6", 30, at(1)),
        )
        assert sum(takeovers) == 1, (round_, takeovers)


# --------------------------------------------------------------------------------------------------
# restart requests


async def make_request(store: Store, request_id: str = "r1", ttl_min: float = 2) -> None:
    assert await store.requests.create(request_id, "kimi", "gpu-a", "vllm-kimi.service", "U1", "C1", "171.1",
                                       at(0), at(ttl_min), force=False, message_ts=None, kind="restart")


async def test_request_compare_and_set_under_concurrency(store: Store, store2: Store) -> None:
    await make_request(store)
    assert not await store.requests.create("r1", "kimi", "gpu-a", "u", "U1", "C1", None, at(0), at(2), False,
                                           kind="restart")
    await store.requests.set_message("r1", "C1", "171.2")
    clickers = [f"U{i}" for i in range(20)]
    results = await asyncio.gather(*(
        (store if i % 2 else store2).requests.transition("r1", {"pending"}, "confirmed", who, at(1))
        for i, who in enumerate(clickers)
    ))
    assert sum(results) == 1
    req = await store2.requests.get("r1")
    assert req is not None and req.state == "confirmed"
    assert req.confirmed_by == clickers[results.index(True)] == req.state_by and req.confirmed_at == at(1)
    assert (req.message_channel, req.message_ts, req.requested_by, req.force) == ("C1", "171.2", "U1", False)
    # a replayed click, a late cancel and a late expiry all lose
    assert not await store.requests.transition("r1", {"pending"}, "confirmed", "U5", at(1))
    assert not await store.requests.transition("r1", {"pending"}, "cancelled", "U5", at(1))
    assert not await store.requests.transition("r1", {"pending"}, "expired", None, at(3))
    # running is entered exactly once, even by two replicas
    results = await asyncio.gather(*(
        s.requests.transition("r1", {"confirmed"}, "running", "bot", at(1)) for s in (store, store2) * 5))
    assert sum(results) == 1
    assert await store.requests.transition("r1", {"running"}, "done", "bot", at(31))
    assert (await store.requests.get("r1")).state == "done"  # type: ignore[union-attr]
    assert await store.requests.unfinished() == []


async def test_request_expiry_cancel_and_rules(store: Store) -> None:
    await make_request(store, "r2", ttl_min=2)
    assert not await store.requests.transition("r2", {"pending"}, "confirmed", "U1", at(2))  # expired
    assert [r.id for r in await store.requests.unfinished()] == ["r2"]
    assert await store.requests.transition("r2", {"pending"}, "expired", None, at(2))
    assert not await store.requests.transition("r2", {"pending"}, "cancelled", "U1", at(2))
    await make_request(store, "r3")
    assert await store.requests.transition("r3", {"pending"}, "cancelled", "U9", at(1))
    req = await store.requests.get("r3")
    assert req is not None and (req.state, req.state_by, req.confirmed_by) == ("cancelled", "U9", None)
    with pytest.raises(ValueError):
        await store.requests.transition("r3", {"pending"}, "done", "U9", at(1))
    with pytest.raises(ValueError):
        await store.requests.transition("r3", {"pending"}, "exploded", "U9", at(1))
    assert await store.requests.get("nope") is None
    assert not await store.requests.transition("nope", {"pending"}, "cancelled", "U9", at(1))


async def test_request_survives_a_new_store(url: str) -> None:
    first = Store(url)
    await make_request(first, "r4")
    await first.close()
    second = Store(url)
    assert await second.requests.transition("r4", {"pending"}, "confirmed", "U2", at(1))
    assert [r.state for r in await second.requests.unfinished()] == ["confirmed"]
    await second.close()


# --------------------------------------------------------------------------------------------------
# follows and exactly-once notices


async def test_follows_lifecycle(store: Store, store2: Store) -> None:
    f = await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "vllm-kimi.service", None, at(0), "restart",
                                   "C1", "171.1", None, "r1")
    assert f.active and f.invocation_id is None and f.request_id == "r1"
    await store.follows.upsert("qwen@gpu-b", "qwen", "gpu-b", "vllm-qwen.service", "inv-q", at(1), "unplanned")
    f = await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "vllm-kimi.service", "inv-1", at(0),
                                   "restart", "C1", "171.1", None, "r1")
    assert f.invocation_id == "inv-1"
    assert await store2.follows.set_message("kimi@gpu-a", "171.5")
    assert [x.key for x in await store2.follows.active()] == ["kimi@gpu-a", "qwen@gpu-b"]
    got = await store2.follows.get("kimi@gpu-a")
    assert got is not None and got.progress_message_ts == "171.5" and got.started_at == at(0)

    finishes = await asyncio.gather(store.follows.finish("kimi@gpu-a", "ready"),
                                    store2.follows.finish("kimi@gpu-a", "failed"))
    assert sorted(finishes) == [False, True]
    assert [x.key for x in await store.follows.active()] == ["qwen@gpu-b"]
    # same invocation again: still finished; a new invocation under the same key is a new load
    f = await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-1", at(0), "restart")
    assert not f.active
    f = await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-2", at(40), "unplanned")
    assert f.active and f.outcome is None and f.reason == "unplanned"
    assert await store.follows.get("missing") is None


async def test_the_awaited_start_keeps_the_progress_message_of_its_load(store: Store, store2: Store) -> None:
    # The confirming replica records the follow before the restart command runs; the leader polls meanwhile
    # and posts the progress message; then the command's result names the new start. That is the same load:
    # the progress message and its claim stay with it, so no poll posts a second one.
    key = "kimi@gpu-a"
    await store.follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-1", at(0), "restart", "C1", "171.1")
    assert await store2.notices.claim(key, "progress")
    assert await store2.notices.mark_sent(key, "progress", "171.2")
    assert await store2.follows.set_message(key, "171.2")
    f = await store.follows.upsert(key, "kimi", "gpu-a", "u", "inv-2", at(0), "restart", "C1", "171.1",
                                   progress_message_ts=None)  # what the confirming replica knew
    assert f.invocation_id == "inv-2" and f.active and f.progress_message_ts == "171.2"
    assert await store2.notices.sent(key, "progress")
    assert not await store2.notices.claim(key, "progress")

    # A later restart of the same service is a new load: a new progress message.
    assert await store.follows.finish(key, "ready")
    f = await store.follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-2", at(50), "restart", "C1", "172.1")
    assert f.active and f.progress_message_ts is None
    assert await store.notices.claim(key, "progress")
    # ... and one that never started, restarted again, too (one awaited start replaced by another).
    assert await store.follows.finish(key, "failed")
    f = await store.follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-3", at(60), "restart", "C1", "173.1")
    assert f.active and f.progress_message_ts is None
    assert await store.notices.claim(key, "progress")


async def test_claim_notice_exactly_once_across_two_stores(store: Store, store2: Store) -> None:
    await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-1", at(0), "restart", "C1", "171.1")
    claims = await asyncio.gather(*(
        s.notices.claim("kimi@gpu-a", place) for s in (store, store2) * 5 for place in ("thread", "notify")))
    assert sum(claims) == 2  # one per place
    assert not await store.notices.sent("kimi@gpu-a", "thread")

    # posting in the thread failed: release, and a retry (by the other process) may claim again
    assert await store.notices.release("kimi@gpu-a", "thread")
    assert not await store.notices.release("kimi@gpu-a", "thread")
    assert await store2.notices.claim("kimi@gpu-a", "thread")
    assert not await store.notices.claim("kimi@gpu-a", "thread")
    assert await store2.notices.mark_sent("kimi@gpu-a", "thread", "171.9")
    assert await store.notices.sent("kimi@gpu-a", "thread")
    notice = await store.notices.get("kimi@gpu-a", "thread")
    assert notice is not None and notice.ts == "171.9" and notice.invocation_id == "inv-1"
    assert not await store.notices.release("kimi@gpu-a", "thread")  # a sent notice stays sent
    assert not await store.notices.claim("kimi@gpu-a", "thread")

    # the next load under the same follow key gets its own notices
    await store.follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-2", at(50), "unplanned")
    assert not await store.notices.sent("kimi@gpu-a", "thread")
    assert await store.notices.claim("kimi@gpu-a", "thread")


async def test_claim_before_invocation_known_is_carried_over(store: Store) -> None:
    await store.follows.upsert("f", "kimi", "gpu-a", "u", None, at(0), "restart")
    assert await store.notices.claim("f", "notify")
    await store.follows.upsert("f", "kimi", "gpu-a", "u", "inv-7", at(0), "restart")
    assert not await store.notices.claim("f", "notify")  # still the same load
    # a notice for a follow the store does not know is still exactly-once
    assert await store.notices.claim("unknown", "thread")
    assert not await store.notices.claim("unknown", "thread")


# --------------------------------------------------------------------------------------------------
# two bot processes


OTHER_BOT = """
    import asyncio, json, sys
    from datetime import UTC, datetime
    from services.models import ServiceState
    from services.store.store import Store

    async def main() -> None:
        url, rounds = sys.argv[1], int(sys.argv[2])
        store = Store(url)
        # what this bot process saw: a settings change and a load
        base = dict(service="kimi", node="gpu-a", unit="vllm-kimi.service", state="ready",
                    model="moonshotai/Kimi-K2", flags={"max-model-len": "131072"},
                    env={"HF_TOKEN": "[redacted]"}, version="0.11.0", settings_source="process")
        await store.snapshots.record(ServiceState(**base), datetime(2026, 2, 21, 13, 0, tzinfo=UTC))
        base["flags"] = {"max-model-len": "65536", "enable-expert-parallel": True}
        await store.snapshots.record(ServiceState(**base), datetime(2026, 2, 21, 14, 0, tzinfo=UTC))
        await store.loads.record("kimi", "gpu-a", "inv-1", datetime(2026, 2, 21, 13, 0, tzinfo=UTC),
                                 datetime(2026, 2, 21, 13, 30, tzinfo=UTC), "ready", 1802.0)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # "go": race the test process for the same locks
        now = datetime(2026, 2, 21, tzinfo=UTC)
        won = [i for i in range(rounds) if await store.locks.acquire(f"lock-{i}", "other-bot", 30, now)]
        await store.close()
        print(json.dumps(won), flush=True)

    asyncio.run(main())
"""
ROUNDS = 60


@pytest.fixture(scope="module", autouse=True)
def other_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Another bot process on a shared SQLite file, started as the module starts (a Python start-up
    costs most of a second: it imports while the other tests run); killed at the end if still there."""
    url = f"sqlite:///{tmp_path_factory.mktemp('procs') / 'inferbot.sqlite3'}"
    proc = run_python(OTHER_BOT, url, str(ROUNDS))
    yield url, proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


async def test_two_bot_processes_share_the_store(other_bot: tuple[str, subprocess.Popen[str]]) -> None:
    url, proc = other_bot
    store = Store(url)
    try:
        await store.audit.recent()  # this process has the file open too
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == "ready", proc.communicate()[1]

        # snapshots written by the other process, diffed by this one
        latest = await store.snapshots.latest("kimi", "gpu-a")
        assert len(latest) == 2 and latest[0].first_seen_at == datetime(2026, 2, 21, 14, 0, tzinfo=UTC)
        assert latest[1].env == {"HF_TOKEN": "[redacted]"}
        assert [(d.kind, d.key, d.old, d.new) for d in diff_snapshots(latest[1], latest[0])] == [
            ("flag", "enable-expert-parallel", None, True), ("flag", "max-model-len", "131072", "65536")]
        assert await store.loads.durations("kimi", "gpu-a") == [1802.0]

        # both processes race for the same locks: each lock has exactly one winner
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        now = datetime(2026, 2, 21, tzinfo=UTC)
        mine = {i for i in range(ROUNDS) if await store.locks.acquire(f"lock-{i}", "this-bot", 30, now)}
        out, err = await asyncio.to_thread(proc.communicate, timeout=20)
        assert proc.returncode == 0, err
        theirs = set(json.loads(out))
        assert mine | theirs == set(range(ROUNDS)) and not mine & theirs
        for i in (0, ROUNDS - 1):
            assert await store.locks.holder(f"lock-{i}", now) == ("this-bot" if i in mine else "other-bot")
    finally:
        await store.close()
