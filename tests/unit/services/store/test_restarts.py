"""services/store/restarts.py: the restarts inferbot ran, newest last — what a cooldown is measured from."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from services.store.engine import Database
from services.store.restarts import RestartsRepo
from tests.unit.services.store.conftest import at


@pytest.fixture
def restarts(db: Database) -> RestartsRepo:
    return RestartsRepo(db)


async def test_cooldown_is_measured_from_the_last_restart(restarts: RestartsRepo) -> None:
    assert await restarts.last_at("kimi", "gpu-a") is None
    await restarts.record("kimi", "gpu-a", at(0), "U1", forced=False)
    await restarts.record("kimi", "gpu-a", at(10), "U2", forced=True)
    await restarts.record("kimi", "gpu-b", at(20), "U2", forced=False)
    assert await restarts.last_at("kimi", "gpu-a") == at(10)
    rec = await restarts.last("kimi", "gpu-a")
    assert rec is not None and rec.by == "U2" and rec.forced
    # a non-UTC aware datetime comes back as the same instant in UTC
    cet = at(0).astimezone(timezone(timedelta(hours=1)))
    await restarts.record("qwen", "gpu-a", cet, None, forced=False)
    got = await restarts.last_at("qwen", "gpu-a")
    assert got == at(0) and got.tzinfo is UTC
