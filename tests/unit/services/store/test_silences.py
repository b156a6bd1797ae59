"""services/store/silences.py: a silence per service and node, ending by itself; silencing again replaces the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.store.engine import Database
from services.store.records import Silence
from services.store.silences import SilencesRepo

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


@pytest.fixture
def silences(db: Database) -> SilencesRepo:
    return SilencesRepo(db)


async def test_silences_round_trip(silences: SilencesRepo) -> None:
    s = Silence(service="kimi", node="gpu-a", until=T0 + timedelta(hours=2), reason="planned", by="U0ALICE",
                at=T0)
    await silences.put(s)
    assert await silences.active_for("kimi", "gpu-a", T0) == s
    assert await silences.active_for("qwen", "gpu-a", T0) is None
    assert await silences.active(T0 + timedelta(hours=2)) == []  # it ends by itself
    longer = s.model_copy(update={"until": T0 + timedelta(hours=3)})
    await silences.put(longer)  # silencing again replaces the end
    assert [x.until for x in await silences.active(T0)] == [longer.until]
    assert await silences.end("kimi", "gpu-a") == longer
    assert await silences.end("kimi", "gpu-a") is None
