"""services/store/follows.py: the loads being followed for their notices — one per key and load, finished once,
and the progress message staying with its load.

``follows2`` / ``notices2``: the same tables through another database object (another replica).
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
def follows2(db2: Database) -> FollowsRepo:
    return FollowsRepo(db2)


@pytest.fixture
def notices(db: Database) -> NoticesRepo:
    return NoticesRepo(db)


@pytest.fixture
def notices2(db2: Database) -> NoticesRepo:
    return NoticesRepo(db2)


async def test_follows_lifecycle(follows: FollowsRepo, follows2: FollowsRepo) -> None:
    f = await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "vllm-kimi.service", None, at(0), "restart",
                             "C1", "171.1", None, "r1")
    assert f.active and f.invocation_id is None and f.request_id == "r1"
    await follows.upsert("qwen@gpu-b", "qwen", "gpu-b", "vllm-qwen.service", "inv-q", at(1), "unplanned")
    f = await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "vllm-kimi.service", "inv-1", at(0),
                             "restart", "C1", "171.1", None, "r1")
    assert f.invocation_id == "inv-1"
    assert await follows2.set_message("kimi@gpu-a", "171.5")
    assert [x.key for x in await follows2.active()] == ["kimi@gpu-a", "qwen@gpu-b"]
    got = await follows2.get("kimi@gpu-a")
    assert got is not None and got.progress_message_ts == "171.5" and got.started_at == at(0)

    finishes = await asyncio.gather(follows.finish("kimi@gpu-a", "ready"),
                              follows2.finish("kimi@gpu-a", "failed"))
    assert sorted(finishes) == [False, True]
    assert [x.key for x in await follows.active()] == ["qwen@gpu-b"]
    # same invocation again: still finished; a new invocation under the same key is a new load
    f = await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-1", at(0), "restart")
    assert not f.active
    f = await follows.upsert("kimi@gpu-a", "kimi", "gpu-a", "u", "inv-2", at(40), "unplanned")
    assert f.active and f.outcome is None and f.reason == "unplanned"
    assert await follows.get("missing") is None


async def test_the_awaited_start_keeps_the_progress_message_of_its_load(
        follows: FollowsRepo, follows2: FollowsRepo, notices: NoticesRepo, notices2: NoticesRepo) -> None:
    # The confirming replica records the follow before the restart command runs; the leader polls meanwhile
    # and posts the progress message; then the command's result names the new start. That is the same load:
    # the progress message and its claim stay with it, so no poll posts a second one.
    key = "kimi@gpu-a"
    await follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-1", at(0), "restart", "C1", "171.1")
    assert await notices2.claim(key, "progress")
    assert await notices2.mark_sent(key, "progress", "171.2")
    assert await follows2.set_message(key, "171.2")
    f = await follows.upsert(key, "kimi", "gpu-a", "u", "inv-2", at(0), "restart", "C1", "171.1",
                             progress_message_ts=None)  # what the confirming replica knew
    assert f.invocation_id == "inv-2" and f.active and f.progress_message_ts == "171.2"
    assert await notices2.sent(key, "progress")
    assert not await notices2.claim(key, "progress")

    # A later restart of the same service is a new load: a new progress message.
    assert await follows.finish(key, "ready")
    f = await follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-2", at(50), "restart", "C1", "172.1")
    assert f.active and f.progress_message_ts is None
    assert await notices.claim(key, "progress")
    # ... and one that never started, restarted again, too (one awaited start replaced by another).
    assert await follows.finish(key, "failed")
    f = await follows.upsert(key, "kimi", "gpu-a", "u", "before:inv-3", at(60), "restart", "C1", "173.1")
    assert f.active and f.progress_message_ts is None
    assert await notices.claim(key, "progress")
