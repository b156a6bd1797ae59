"""The health watcher's memo and the silences in the store: on a SQLite file and in memory, across reopen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.store.records import HealthMemo, Silence
from services.store.store import Store

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


@pytest.mark.parametrize("where", ["file", "memory"])
async def test_memo_and_silences_round_trip(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}" if where == "file" else "sqlite://"
    store = Store(url)
    try:
        assert await store.health_memos.get("kimi", "gpu-a") is None
        memo = HealthMemo(invocation="abc", ready_seen=True, gen_total=12.5, unhealthy_since=T0)
        await store.health_memos.put("kimi", "gpu-a", memo, T0)
        memo.bad_polls = 3
        await store.health_memos.put("kimi", "gpu-a", memo, T0)
        assert await store.health_memos.get("kimi", "gpu-a") == memo
        s = Silence(service="kimi", node="gpu-a", until=T0 + timedelta(hours=2), reason="planned", by="U0ALICE",
                    at=T0)
        await store.silences.put(s)
        assert await store.silences.active_for("kimi", "gpu-a", T0) == s
        assert await store.silences.active_for("qwen", "gpu-a", T0) is None
        assert await store.silences.active(T0 + timedelta(hours=2)) == []  # it ends by itself
        longer = s.model_copy(update={"until": T0 + timedelta(hours=3)})
        await store.silences.put(longer)  # silencing again replaces the end
        assert [x.until for x in await store.silences.active(T0)] == [longer.until]
        assert await store.silences.end("kimi", "gpu-a") == longer
        assert await store.silences.end("kimi", "gpu-a") is None
    finally:
        await store.close()
    if where == "file":  # what survives a restart of the bot
        again = Store(url)
        try:
            got = await again.health_memos.get("kimi", "gpu-a")
            assert got is not None and got.bad_polls == 3 and got.unhealthy_since == T0
        finally:
            await again.close()
