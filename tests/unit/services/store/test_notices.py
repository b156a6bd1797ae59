"""services/store/notices.py: a notice is claimed once per place and load — released when its post failed, sent
for good once posted, and claimed anew for the next load.

``notices2``: the same table through another database object (another process), racing for the claims.
"""

from __future__ import annotations

import asyncio

import pytest

from services.store.engine import Database
from services.store.follows import FollowsRepo
from services.store.notices import NoticesRepo
from tests.unit.services.store.conftest import at


@pytest.fixture
def follows(db: Database) -> FollowsRepo:
    return FollowsRepo(db)


@pytest.fixture
def notices(db: Database) -> NoticesRepo:
    return NoticesRepo(db)


@pytest.fixture
def notices2(db2: Database) -> NoticesRepo:
    return NoticesRepo(db2)


async def test_claim_notice_exactly_once_across_two_stores(follows: FollowsRepo, notices: NoticesRepo,
                                                          notices2: NoticesRepo) -> None:
    await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-1", at(0), "restart", "C1", "171.1")
    claims = await asyncio.gather(*(
        s.claim("kimi@gpu-a", place) for s in (notices, notices2) * 5 for place in ("thread", "notify")))
    assert sum(claims) == 2  # one per place
    assert not await notices.sent("kimi@gpu-a", "thread")

    # posting in the thread failed: release, and a retry (by the other process) may claim again
    assert await notices.release("kimi@gpu-a", "thread")
    assert not await notices.release("kimi@gpu-a", "thread")
    assert await notices2.claim("kimi@gpu-a", "thread")
    assert not await notices.claim("kimi@gpu-a", "thread")
    assert await notices2.mark_sent("kimi@gpu-a", "thread", "171.9")
    assert await notices.sent("kimi@gpu-a", "thread")
    notice = await notices.get("kimi@gpu-a", "thread")
    assert notice is not None and notice.ts == "171.9" and notice.invocation_id == "inv-1"
    assert not await notices.release("kimi@gpu-a", "thread")  # a sent notice stays sent
    assert not await notices.claim("kimi@gpu-a", "thread")

    # the next load under the same follow key gets its own notices
    await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-2", at(50), "unplanned")
    assert not await notices.sent("kimi@gpu-a", "thread")
    assert await notices.claim("kimi@gpu-a", "thread")


async def test_claim_before_invocation_known_is_carried_over(follows: FollowsRepo, notices: NoticesRepo) -> None:
    await follows.upsert("f", "kimi", "gpu-a", "u", None, at(0), "restart")
    assert await notices.claim("f", "notify")
    await follows.upsert("f", "kimi", "gpu-a", "u", "inv-7", at(0), "restart")
    assert not await notices.claim("f", "notify")  # still the same load
    # a notice for a follow the store does not know is still exactly-once
    assert await notices.claim("unknown", "thread")
    assert not await notices.claim("unknown", "thread")
