"""services/store/shared_state.py: what replicas share through the database — an event answered once, a rate
limit counting every replica's answers, progress edits paced for all. ``b`` is another replica's view."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from services.store.engine import Database
from services.store.shared_state import SharedStateRepo

NOW = datetime(2026, 12, 2, 22, 0, tzinfo=UTC)


async def test_event_dedupe_rate_limit_and_pacing_across_replicas(db: Database, db2: Database) -> None:
    a, b = SharedStateRepo(db), SharedStateRepo(db2)
    claims = await asyncio.gather(*(s.claim_event("Ev42", NOW) for s in (a, b) * 4))
    assert sum(claims) == 1

    verdicts = await asyncio.gather(*(s.rate_check("U1", 3, now=1000.0) for s in (a, b, a, b, a)))
    assert sum(v.allowed for v in verdicts) == 3  # the limit counts both replicas' answers
    refused = [v for v in verdicts if not v.allowed]
    assert sum(v.notify for v in refused) == 1 and all(v.retry_in == 60 for v in refused)
    assert (await b.rate_check("U1", 3, now=1061.0)).allowed
    assert (await a.rate_check("U2", 3, now=1000.5)).allowed  # another person

    k = "kimi@gpu-a"
    assert await a.claim_progress_edit(k, "weights", 15, NOW)
    assert not await b.claim_progress_edit(k, "weights", 15, NOW)  # paced for both replicas
    assert await b.claim_progress_edit(k, "graphs", 15, NOW)  # a new phase: at once
    edits = await asyncio.gather(*(s.claim_progress_edit(k, "graphs", 15, NOW.replace(minute=1))
                                   for s in (a, b) * 3))
    assert sum(edits) == 1
    await a.release_progress_edit(k)
    assert await b.claim_progress_edit(k, "graphs", 15, NOW.replace(minute=1))
    await a.forget_progress(k)
    assert await a.claim_progress_edit(k, "graphs", 15, NOW.replace(minute=1))
