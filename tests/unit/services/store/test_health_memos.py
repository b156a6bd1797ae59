"""services/store/health_memos.py: the health watcher's memory of each unit, kept by the leader and outliving
a restart of the bot."""

from __future__ import annotations

from datetime import UTC, datetime

from services.store.engine import Database
from services.store.health_memos import HealthMemosRepo
from services.store.records import HealthMemo
from services.store.write_queue import WriteQueue

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_memo_round_trip_and_what_survives_a_restart_of_the_bot(url: str) -> None:
    db = Database(url)
    queue = WriteQueue(db)
    memos = HealthMemosRepo(queue)
    try:
        assert await memos.get("kimi", "gpu-a") is None
        memo = HealthMemo(invocation="abc", ready_seen=True, gen_total=12.5, unhealthy_since=T0)
        await memos.put("kimi", "gpu-a", memo, T0)
        memo.bad_polls = 3
        await memos.put("kimi", "gpu-a", memo, T0)
        assert await memos.get("kimi", "gpu-a") == memo
    finally:
        await queue.flush()
        await db.close()
    again = Database(url)  # what survives a restart of the bot
    try:
        got = await HealthMemosRepo(WriteQueue(again)).get("kimi", "gpu-a")
        assert got is not None and got.bad_polls == 3 and got.unhealthy_since == T0
    finally:
        await again.close()
