"""services/store/loads.py: the load history a notice's "last time" and an ETA come from — newest first, once
per load however often it is recorded."""

from __future__ import annotations

import pytest

from services.store.engine import Database
from services.store.loads import LoadsRepo
from tests.unit.services.store.conftest import at


@pytest.fixture
def loads(db: Database) -> LoadsRepo:
    return LoadsRepo(db)


async def test_load_history_newest_first_and_idempotent(loads: LoadsRepo) -> None:
    assert await loads.durations("kimi", "gpu-a") == []
    assert await loads.last("kimi", "gpu-a") is None
    assert await loads.record("kimi", "gpu-a", "inv-2", at(100), at(130), "ready", 1800.0)
    assert await loads.record("kimi", "gpu-a", "inv-1", at(0), at(29), "ready", 1754.0)
    assert await loads.record("kimi", "gpu-a", "inv-3", at(200), None, "failed", 95.0)
    assert await loads.record("kimi", "gpu-a", "inv-4", at(300), at(331), "ready", 1862.0)
    assert await loads.record("kimi", "gpu-b", "inv-9", at(400), at(401), "ready", 60.0)
    # the same load again (e.g. after a bot restart): no second row
    assert not await loads.record("kimi", "gpu-a", "inv-4", at(300), at(331), "ready", 1862.0)
    assert await loads.durations("kimi", "gpu-a") == [1862.0, 1800.0, 1754.0]
    assert await loads.durations("kimi", "gpu-a", limit=2) == [1862.0, 1800.0]
    last = await loads.last("kimi", "gpu-a")
    assert last is not None and (last.invocation_id, last.outcome, last.ready_at) == ("inv-4", "ready", at(331))
    await loads.record("kimi", "gpu-a", "inv-5", at(400), None, "timeout", 3600.0)
    last = await loads.last("kimi", "gpu-a")
    assert last is not None and last.outcome == "timeout" and last.ready_at is None
