"""The store's unit tests run on a SQLite file and on a fresh database of a real PostgreSQL server.

A repository's own tests build it on a :class:`~services.store.engine.Database` of its own (``db``; the
leader's rows through a ``queue``), as :class:`~services.store.store.Store` does; ``db2`` is a second,
independent one on the same database (own engine and connections): another bot process or replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.models import ServiceState
from services.store.engine import Database
from services.store.store import Store
from services.store.write_queue import WriteQueue
from tests.pg import PgServer

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
    """A new state database: a SQLite file, or a database of the test PostgreSQL server."""
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
    """A second, independent Store (own engine and connections) on the same database: another bot process."""
    s = Store(url)
    yield s
    await s.close()


@pytest.fixture
async def db(url: str) -> AsyncIterator[Database]:
    """The state database a repository under test is built on."""
    d = Database(url)
    yield d
    await d.close()


@pytest.fixture
async def db2(url: str) -> AsyncIterator[Database]:
    """A second, independent Database on the same database: another bot process."""
    d = Database(url)
    yield d
    await d.close()


@pytest.fixture
async def queue(db: Database) -> AsyncIterator[WriteQueue]:
    """The scheduler leader's write queue on ``db``; what is still queued is written at the end, as closing does."""
    q = WriteQueue(db)
    yield q
    await q.flush()
