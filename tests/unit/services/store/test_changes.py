"""services/store/changes.py: settings changes are numbered in order, and every move of a change or of one node's
step is a compare-and-set that exactly one of several racing callers wins (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from services.store.store import Store

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_numbers_order_and_steps(store: Store) -> None:
    first = await store.changes.create("c-1", "change", "kimi", ["gpu-a", "gpu-b"], None, "U1", T0)
    second = await store.changes.create("c-2", "revert", "kimi", ["gpu-a"], None, "terminal:alice", T0)
    other = await store.changes.create("c-3", "change", "qwen", ["gpu-b"], {"set_flags": {"x": "1"}}, "U1", T0)
    assert (first.number, second.number, other.number) == (1, 2, 3)
    assert [(s.node, s.position, s.state) for s in first.steps] == [("gpu-a", 0, "waiting"), ("gpu-b", 1, "waiting")]
    assert [c.id for c in await store.changes.recent("kimi")] == ["c-2", "c-1"]
    found = await store.changes.numbered(3)
    assert found is not None and found.spec == {"set_flags": {"x": "1"}}
    with pytest.raises(ValueError):
        await store.changes.move("c-1", {"proposed"}, "running", T0, {"state": "kept"})  # not a field that moves


async def test_one_caller_wins_each_move(store: Store) -> None:
    await store.changes.create("c-1", "change", "kimi", ["gpu-a"], None, "U1", T0)
    won = await asyncio.gather(*(store.changes.move("c-1", {"proposed"}, "running", T0) for _ in range(5)))
    assert sum(won) == 1
    assert [c.id for c in await store.changes.running("kimi")] == ["c-1"]
    won = await asyncio.gather(*(store.changes.move_step("c-1", "gpu-a", {"waiting"}, "applying", T0,
                                                         {"previous": {}, "load_started_at": T0}) for _ in range(5)))
    assert sum(won) == 1
    # Taking over a step a stopped process left: only if it has not moved since it was read.
    later = T0 + timedelta(minutes=10)
    assert not await store.changes.move_step("c-1", "gpu-a", {"applying"}, "loading", later, if_at=later)
    assert await store.changes.move_step("c-1", "gpu-a", {"applying"}, "loading", later, if_at=T0)
    ch = await store.changes.get("c-1")
    assert ch is not None and ch.steps[0].state == "loading" and ch.steps[0].previous == {}
    assert await store.changes.move("c-1", {"running"}, "kept", later, {"outcome": "kept"})
    ch = await store.changes.get("c-1")
    assert ch is not None and ch.finished_at == later and await store.changes.running("kimi") == []
