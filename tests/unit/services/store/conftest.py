"""The store's unit tests run on a SQLite file and on a fresh database of a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.store.store import Store
from tests.pg import PgServer


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
