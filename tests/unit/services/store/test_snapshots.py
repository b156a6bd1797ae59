"""services/store/snapshots.py: the settings a service ran with, one row per change, the last known-ready one.

On a SQLite file and a real PostgreSQL; the repository on its own database.
"""

from __future__ import annotations

from datetime import UTC

import pytest

from services.settings_diff import DiffItem, diff_snapshots
from services.store.engine import Database
from services.store.snapshots import SnapshotsRepo
from tests.unit.services.store.conftest import at, state


@pytest.fixture
def snapshots(db: Database) -> SnapshotsRepo:
    return SnapshotsRepo(db)


async def test_snapshot_dedupe_diff_and_last_ready(snapshots: SnapshotsRepo) -> None:
    a1 = await snapshots.record(state(state="loading"), at(0))
    a2 = await snapshots.record(state(state="ready"), at(5))
    assert a2.id == a1.id  # same settings: no new row, just seen again
    assert (a2.first_seen_at, a2.last_seen_at, a2.was_ready, a2.state) == (at(0), at(5), True, "ready")
    assert a2.last_seen_at.tzinfo is UTC

    changed = state(state="loading", flags={"tensor-parallel-size": "4", "enforce-eager": False},
                    env={"VLLM_USE_V1": "1", "VLLM_TORCH_PROFILER_DIR": "/tmp/prof"})
    b1 = await snapshots.record(changed, at(10))
    b2 = await snapshots.record(changed, at(12))
    assert b2.id == b1.id != a1.id
    assert not b2.was_ready and b2.last_ready_at is None

    latest = await snapshots.latest("kimi", "gpu-a")
    assert [s.id for s in latest] == [b1.id, a1.id]
    assert latest[0].first_seen_at == at(10) and latest[0].last_seen_at == at(12)
    assert diff_snapshots(latest[1], latest[0]) == [
        DiffItem(kind="flag", key="tensor-parallel-size", old="8", new="4"),
        DiffItem(kind="env", key="VLLM_TORCH_PROFILER_DIR", old=None, new="/tmp/prof"),
    ]

    ready = await snapshots.last_ready("kimi", "gpu-a")
    assert ready is not None and ready.id == a1.id and ready.last_ready_at == at(5)
    # The settings answer can diff the live state against the last known-ready snapshot.
    assert [d.key for d in diff_snapshots(ready, changed)] == ["tensor-parallel-size", "VLLM_TORCH_PROFILER_DIR"]

    c = await snapshots.record(state(model="Qwen/Qwen3-235B", version="0.11.1"), at(20))
    latest = await snapshots.latest("kimi", "gpu-a", limit=5)
    assert [s.id for s in latest] == [c.id, b1.id, a1.id]
    assert [(d.kind, d.old, d.new) for d in diff_snapshots(latest[1], latest[0])][:2] == [
        ("model", "moonshotai/Kimi-K2", "Qwen/Qwen3-235B"), ("version", "0.11.0", "0.11.1")]
    assert (await snapshots.last_ready("kimi", "gpu-a")).id == c.id  # type: ignore[union-attr]
    # Back to the first settings: that is a change too (a new row), not the old row revived.
    d = await snapshots.record(state(state="loading"), at(30))
    assert d.id not in (a1.id, b1.id, c.id) and not d.was_ready
    assert await snapshots.mark_ready("kimi", "gpu-a", at(31))
    assert (await snapshots.last_ready("kimi", "gpu-a")).id == d.id  # type: ignore[union-attr]
    # Other targets are separate.
    assert await snapshots.latest("kimi", "gpu-b") == []
    assert await snapshots.last_ready("qwen", "gpu-a") is None
