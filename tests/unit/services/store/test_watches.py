"""services/store/watches.py: the unplanned-restart watcher's baseline per unit, kept by the leader."""

from __future__ import annotations

import pytest

from services.store.watches import WatchesRepo
from services.store.write_queue import WriteQueue
from tests.unit.services.store.conftest import at


@pytest.fixture
def watches(queue: WriteQueue) -> WatchesRepo:
    return WatchesRepo(queue)


async def test_the_watchers_baseline_is_kept_per_unit(watches: WatchesRepo) -> None:
    assert await watches.get("kimi", "gpu-a") is None
    await watches.put("kimi", "gpu-a", 4242, at(0), 0, "activating")
    await watches.put("kimi", "gpu-a", 5151, at(3), 1, "active")
    w = await watches.get("kimi", "gpu-a")
    assert w is not None and (w.main_pid, w.started_at, w.n_restarts, w.active_state) == (5151, at(3), 1, "active")
