"""services/store/engine.py: the worker thread, transactions and the schema check every repository relies on."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, insert, inspect, select

from services.store.engine import Database, Repository, in_thread, reading, writing
from services.store.schema import SCHEMA_HEAD, locks, metadata

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


class Probe(Repository):
    """A repository written the way the store's are."""

    @in_thread
    def thread(self) -> int:
        return threading.get_ident()

    @writing
    def add(self, conn: Connection, name: str, fail: bool = False) -> None:
        conn.execute(insert(locks).values(name=name, owner="probe", acquired_at=T0, expires_at=T0))
        if fail:
            raise RuntimeError("boom")

    @reading
    def names(self, conn: Connection) -> list[str]:
        return [str(n) for n in conn.execute(select(locks.c.name).order_by(locks.c.name)).scalars()]


async def test_work_runs_in_a_worker_thread_and_only_through_run(url: str) -> None:
    db = Database(url)
    trips: list[str] = []
    real = db.run

    async def counting(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        trips.append(fn.__name__)
        return await real(fn, *args, **kwargs)

    db.run = counting  # type: ignore[method-assign]
    probe = Probe(db)
    try:
        assert await probe.thread() != threading.get_ident()  # the event loop's thread is never blocked
        await probe.add("a")
        assert await probe.names() == ["a"]
        assert trips == ["thread", "add", "names"]  # one trip each, every one through Database.run
    finally:
        await db.close()


async def test_a_write_that_fails_commits_nothing(url: str) -> None:
    db = Database(url)
    probe = Probe(db)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            await probe.add("half", fail=True)
        assert await probe.names() == []
        await probe.add("whole")
        assert await probe.names() == ["whole"]
    finally:
        await db.close()


async def test_the_first_use_creates_the_schema_with_alembic(url: str) -> None:
    db = Database(url)
    try:
        assert db.schema_version is None
        assert await Probe(db).names() == []  # first use: migrated to this code's head
        assert db.schema_version == SCHEMA_HEAD
        assert await db.schema_status() == (SCHEMA_HEAD, SCHEMA_HEAD)
        with db.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
        assert set(metadata.tables) <= tables  # every table of schema.py, and nothing made another way
    finally:
        await db.close()


async def test_a_closed_database_refuses_work(url: str) -> None:
    db = Database(url)
    probe = Probe(db)
    await probe.add("a")
    await db.close()
    with pytest.raises(RuntimeError, match="closed"):
        await probe.names()
    with pytest.raises(RuntimeError, match="closed"):
        await db.prepare()
