"""services/store/home_views.py: the App Home dashboards people opened — which are due a republish, paced, and
claimed by one replica. ``b`` is the same table through another database object (another replica)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from services.store.engine import Database
from services.store.home_views import HomeViewsRepo

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_open_views_and_pacing_are_shared_by_replicas(db: Database, db2: Database) -> None:
    a, b = HomeViewsRepo(db), HomeViewsRepo(db2)
    long_ago = T0 - timedelta(hours=12)
    assert await a.due(T0, 30, long_ago) == []
    await a.opened("U1", T0)
    await a.opened("U2", T0 - timedelta(days=2))  # opened long ago: not "open" any more
    assert await b.due(T0, 30, long_ago) == ["U1"]  # stale (never published), seen by the other
    # Two replicas claim the same publish at the same moment: exactly one wins.
    wins = await asyncio.gather(a.claim_publish("U1", T0, 30), b.claim_publish("U1", T0, 30))
    assert sorted(wins) == [False, True]
    assert await a.due(T0, 30, long_ago) == []  # published, not stale
    assert await a.mark_dirty(long_ago) == 1  # only U1 counts as open
    assert await a.due(T0 + timedelta(seconds=10), 30, long_ago) == []  # stale but paced
    assert not await b.claim_publish("U1", T0 + timedelta(seconds=10), 30)
    assert await b.claim_publish("U1", T0 + timedelta(seconds=10), 30, force=True)  # Refresh
    assert await a.due(T0 + timedelta(seconds=41), 30, long_ago) == []  # not stale any more
    await a.mark_dirty(long_ago)
    assert await a.due(T0 + timedelta(seconds=41), 30, long_ago) == ["U1"]
    await a.publish_failed("U1")
    assert await a.due(T0 + timedelta(seconds=11), 30, long_ago) == ["U1"]  # failed: due again
