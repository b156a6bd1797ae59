"""services/store/locks.py: named locks with an owner and an expiry — taken over when expired, one winner in a race.

``locks2`` is the same table through another database object (its own engine and connections): another bot
process or replica.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from services.store.engine import Database
from services.store.locks import LocksRepo
from tests.unit.services.store.conftest import at


@pytest.fixture
def locks(db: Database) -> LocksRepo:
    return LocksRepo(db)


@pytest.fixture
def locks2(db2: Database) -> LocksRepo:
    return LocksRepo(db2)


async def test_lock_acquire_expiry_takeover_release(locks: LocksRepo, locks2: LocksRepo) -> None:
    assert await locks.holder("restart:kimi@gpu-a", at(0)) is None
    assert await locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(0))
    assert not await locks2.acquire("restart:kimi@gpu-a", "bot-2", 60, at(0.5))
    assert await locks2.holder("restart:kimi@gpu-a", at(0.5)) == "bot-1"
    assert await locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(0.9))  # renew: until 1.9
    assert await locks.holder("restart:kimi@gpu-a", at(1.5)) == "bot-1"
    assert not await locks2.acquire("restart:kimi@gpu-a", "bot-2", 60, at(1.5))
    # expired: nobody holds it, and someone else may take it over (survives a crashed holder)
    assert await locks.holder("restart:kimi@gpu-a", at(2)) is None
    assert await locks2.acquire("restart:kimi@gpu-a", "bot-2", 60, at(2))
    assert not await locks.release("restart:kimi@gpu-a", "bot-1")  # not ours any more
    assert await locks.holder("restart:kimi@gpu-a", at(2.5)) == "bot-2"
    assert await locks2.release("restart:kimi@gpu-a", "bot-2")
    assert await locks.holder("restart:kimi@gpu-a", at(2.5)) is None
    assert await locks.acquire("restart:kimi@gpu-a", "bot-1", 60, at(2.6))
    # other lock names are independent
    assert await locks2.acquire("restart:qwen@gpu-b", "bot-2", 60, at(2.6))


async def test_lock_record_and_clear(locks: LocksRepo, locks2: LocksRepo) -> None:
    assert await locks.get("restart:kimi@gpu-a", at(0)) is None
    assert await locks.clear("restart:kimi@gpu-a") is None
    assert await locks.acquire("restart:kimi@gpu-a", "r-1", 60, at(0))
    held = await locks2.get("restart:kimi@gpu-a", at(0.5))
    assert held is not None and held.owner == "r-1" and held.acquired_at == at(0)
    assert await locks2.get("restart:kimi@gpu-a", at(1.5)) is None  # expired is not held
    assert await locks2.clear("restart:kimi@gpu-a", owner="r-2") is None  # only if it is r-2's
    removed = await locks2.clear("restart:kimi@gpu-a")  # by hand: whoever holds it
    assert removed is not None and removed.owner == "r-1"
    assert await locks.get("restart:kimi@gpu-a", at(0.5)) is None
    assert await locks.acquire("restart:kimi@gpu-a", "r-3", 60, at(0.6))


async def test_lock_race_between_two_stores(locks: LocksRepo, locks2: LocksRepo) -> None:
    for round_ in range(10):
        name = f"race-{round_}"
        results = await asyncio.gather(
            locks.acquire(name, "bot-1", 30, at(0)), locks2.acquire(name, "bot-2", 30, at(0)),
            locks.acquire(name, "bot-3", 30, at(0)), locks2.acquire(name, "bot-4", 30, at(0)),
        )
        assert sum(results) == 1, (round_, results)
        winner = ["bot-1", "bot-2", "bot-3", "bot-4"][results.index(True)]
        assert await locks2.holder(name, at(0.1)) == winner
        # after expiry, concurrent takeovers: again exactly one
        takeovers = await asyncio.gather(
            locks.acquire(name, "bot-5", 30, at(1)), locks2.acquire(name, "bot-6", 30, at(1)),
        )
        assert sum(takeovers) == 1, (round_, takeovers)


async def test_a_naive_time_is_refused(locks: LocksRepo) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await locks.holder("x", datetime(2026, 1, 1))
