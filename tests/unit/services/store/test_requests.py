"""services/store/requests.py and migration 0004: confirmable requests — compare-and-set under concurrency,
expiry and the rules of their states, surviving a restart of the bot — and every one has a kind, old ones
included.

Before 0004 a benchmark request was told from a restart's by its id (``b-…``); the upgrade gives every
request in the database its kind from that, so one that is in flight while the bot is upgraded is expired or
settled by its own kind's flow afterwards.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bot.app import runtime
from bot.scheduler import BotScheduler
from config.models import BotConfig
from handlers.notify import RecordingNotifier
from services.store import schema
from services.store.engine import Database
from services.store.migrate import run_alembic
from services.store.ports import Requests
from services.store.requests import RequestsRepo
from services.store.schema import SCHEMA_HEAD
from services.store.store import Store
from tests.unit.services.store.conftest import at

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_each_request_keeps_its_kind(store: Store) -> None:
    for rid, kind in (("r-1", "restart"), ("b-2", "bench"), ("t-3", "restart")):
        assert await store.requests.create(rid, "kimi", "gpu-a", "vllm-kimi.service", "U1", "C1", None, T0,
                                           T0 + timedelta(minutes=2), False, kind=kind)  # type: ignore[arg-type]
    assert not await store.requests.create("b-2", "kimi", "gpu-a", "u", "U1", "C1", None, T0, T0, False,
                                           kind="restart")  # the id is taken: the first request stays
    got = await store.requests.get("b-2")
    assert got is not None and (got.kind, got.state) == ("bench", "pending")
    assert await store.requests.transition("b-2", {"pending"}, "confirmed", "U2", T0)
    assert [(r.id, r.kind, r.state) for r in await store.requests.unfinished()] == [
        ("b-2", "bench", "confirmed"), ("r-1", "restart", "pending"), ("t-3", "restart", "pending")]
    with pytest.raises(ValueError, match="unknown request kind"):
        await store.requests.create("x-4", "kimi", "gpu-a", "u", None, None, None, T0, T0, False,
                                    kind="reboot")  # type: ignore[arg-type]
    assert await store.requests.get("x-4") is None


@pytest.fixture
def requests(db: Database) -> RequestsRepo:
    return RequestsRepo(db)


@pytest.fixture
def requests2(db2: Database) -> RequestsRepo:
    """The same table through another database object: another bot process or replica."""
    return RequestsRepo(db2)


async def make_request(requests: Requests, request_id: str = "r1", ttl_min: float = 2) -> None:
    assert await requests.create(request_id, "kimi", "gpu-a", "vllm-kimi.service", "U1", "C1", "171.1",
                                 at(0), at(ttl_min), force=False, message_ts=None, kind="restart")


async def test_request_compare_and_set_under_concurrency(requests: RequestsRepo, requests2: RequestsRepo) -> None:
    await make_request(requests)
    assert not await requests.create("r1", "kimi", "gpu-a", "u", "U1", "C1", None, at(0), at(2), False,
                                     kind="restart")
    await requests.set_message("r1", "C1", "171.2")
    clickers = [f"U{i}" for i in range(20)]
    results = await asyncio.gather(*(
        (requests if i % 2 else requests2).transition("r1", {"pending"}, "confirmed", who, at(1))
        for i, who in enumerate(clickers)
    ))
    assert sum(results) == 1
    req = await requests2.get("r1")
    assert req is not None and req.state == "confirmed"
    assert req.confirmed_by == clickers[results.index(True)] == req.state_by and req.confirmed_at == at(1)
    assert (req.message_channel, req.message_ts, req.requested_by, req.force) == ("C1", "171.2", "U1", False)
    # a replayed click, a late cancel and a late expiry all lose
    assert not await requests.transition("r1", {"pending"}, "confirmed", "U5", at(1))
    assert not await requests.transition("r1", {"pending"}, "cancelled", "U5", at(1))
    assert not await requests.transition("r1", {"pending"}, "expired", None, at(3))
    # running is entered exactly once, even by two replicas
    results = await asyncio.gather(*(
        s.transition("r1", {"confirmed"}, "running", "bot", at(1)) for s in (requests, requests2) * 5))
    assert sum(results) == 1
    assert await requests.transition("r1", {"running"}, "done", "bot", at(31))
    assert (await requests.get("r1")).state == "done"  # type: ignore[union-attr]
    assert await requests.unfinished() == []


async def test_request_expiry_cancel_and_rules(requests: RequestsRepo) -> None:
    await make_request(requests, "r2", ttl_min=2)
    assert not await requests.transition("r2", {"pending"}, "confirmed", "U1", at(2))  # expired
    assert [r.id for r in await requests.unfinished()] == ["r2"]
    assert await requests.transition("r2", {"pending"}, "expired", None, at(2))
    assert not await requests.transition("r2", {"pending"}, "cancelled", "U1", at(2))
    await make_request(requests, "r3")
    assert await requests.transition("r3", {"pending"}, "cancelled", "U9", at(1))
    req = await requests.get("r3")
    assert req is not None and (req.state, req.state_by, req.confirmed_by) == ("cancelled", "U9", None)
    with pytest.raises(ValueError):
        await requests.transition("r3", {"pending"}, "done", "U9", at(1))
    with pytest.raises(ValueError):
        await requests.transition("r3", {"pending"}, "exploded", "U9", at(1))
    assert await requests.get("nope") is None
    assert not await requests.transition("nope", {"pending"}, "cancelled", "U9", at(1))


async def test_request_survives_a_new_store(url: str) -> None:
    first = Store(url)
    await make_request(first.requests, "r4")
    await first.close()
    second = Store(url)
    assert await second.requests.transition("r4", {"pending"}, "confirmed", "U2", at(1))
    assert [r.state for r in await second.requests.unfinished()] == ["confirmed"]
    await second.close()


# -- an upgrade with requests in flight --------------------------------------------------------------

OLD_REQUESTS = sa.table("inferbot_requests",
                        *(sa.column(c.name, c.type) for c in schema.requests.columns if c.name != "kind"))
"""The request table as schema 0003 had it (no kind)."""


def _old_database(url: str, now: datetime) -> None:
    """A database an inferbot of schema 0003 left: a bench request pending and one running, a restart
    request pending, and one done."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        run_alembic(conn, "upgrade", "0003")
    long_ago = now - timedelta(hours=2)
    rows = [("b-00000000000a", "pending", long_ago), ("r-00000000000b", "pending", long_ago),
            ("b-00000000000c", "running", long_ago), ("t-00000000000d", "done", long_ago)]
    with engine.begin() as conn:
        for rid, state, at in rows:
            conn.execute(sa.insert(OLD_REQUESTS).values(
                id=rid, service="kimi", node="gpu-a", unit="vllm-kimi.service", requested_by="U0ALICE",
                channel="C0OPS", created_at=at, expires_at=at + timedelta(minutes=2), force=False, state=state,
                state_by="U0BOB" if state != "pending" else None, state_at=at))
    engine.dispose()


def _config(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BotConfig:
    parsed = make_url(url)
    if parsed.password:  # the config names no password: it comes from the environment
        monkeypatch.setenv("INFERBOT_DB_PASSWORD", str(parsed.password))
        parsed = parsed._replace(password=None, drivername="postgresql")
    return BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.2"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "state": {"dir": str(tmp_path), "url": parsed.render_as_string(hide_password=False)},
        "watch": {"enabled": False},
    })


async def test_an_upgrade_gives_requests_their_kind_and_those_in_flight_settle(
        url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _old_database(url, datetime.now(UTC))
    store = Store(url)
    try:
        assert await store.prepare() == SCHEMA_HEAD  # 0004 and every revision after it
        kinds = {r.id: r.kind for r in await store.requests.unfinished()}
        assert kinds == {"b-00000000000a": "bench", "r-00000000000b": "restart", "b-00000000000c": "bench"}
        done = await store.requests.get("t-00000000000d")
        assert done is not None and done.kind == "restart"
    finally:
        await store.close()

    # A bot of this version starts on it: each request is expired or settled by its own kind's flow.
    async with runtime(_config(url, tmp_path, monkeypatch)) as rt:
        sched = BotScheduler()
        await sched.start(rt.with_ports(notifier=RecordingNotifier(), jobs=sched), watch=False)
        try:
            assert rt.store is not None
            deadline = time.monotonic() + 20
            while await rt.store.requests.unfinished():
                assert time.monotonic() < deadline, "the requests in flight were not settled"
                await asyncio.sleep(0.1)
            states = {rid: (await rt.store.requests.get(rid)).state  # type: ignore[union-attr]
                      for rid in ("b-00000000000a", "r-00000000000b", "b-00000000000c")}
            events = {(e.request_id, e.event) for e in await rt.store.audit.recent("kimi", 50)}
        finally:
            await sched.shutdown()
    assert states == {"b-00000000000a": "expired", "r-00000000000b": "expired", "b-00000000000c": "failed"}
    assert events == {("b-00000000000a", "bench.expired"), ("r-00000000000b", "restart.expired"),
                      ("b-00000000000c", "bench.interrupted")}
