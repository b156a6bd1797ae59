"""services/store/journal_cursors.py: where each node's journal stream got to, kept across a restart and a new
leader (SQLite and PostgreSQL)."""

from __future__ import annotations

from services.store.store import Store

CURSOR_A = "s=95ecb675f0954f69a59544906cc76ae4;i=28;b=d9a2c86e66744b2ea6a0cf0e299798d3;m=1fdadc8b8;t=661d958489f7f"
CURSOR_B = "s=95ecb675f0954f69a59544906cc76ae4;i=3e;b=d9a2c86e66744b2ea6a0cf0e299798d3;m=1fdbeb6c4;t=661d958598d8b"


async def test_a_cursor_survives_the_process_and_the_newest_wins(store: Store) -> None:
    assert await store.journal_cursors.get("gpu-a") is None
    await store.journal_cursors.put("gpu-a", CURSOR_A)
    await store.journal_cursors.put("gpu-a", CURSOR_B)
    await store.journal_cursors.put("gpu-b", CURSOR_A)
    assert await store.journal_cursors.get("gpu-a") == CURSOR_B
    await store.flush_writes()
    again = Store(store.url if not store.is_postgres else store.sqlalchemy_url)
    try:
        assert await again.journal_cursors.get("gpu-a") == CURSOR_B
        assert await again.journal_cursors.get("gpu-b") == CURSOR_A
        assert await again.journal_cursors.get("gpu-c") is None
    finally:
        await again.close()


async def test_a_lost_lead_drops_the_cursors_it_had_not_written(store: Store) -> None:
    await store.journal_cursors.put("gpu-a", CURSOR_A)
    await store.flush_writes()
    await store.journal_cursors.put("gpu-a", CURSOR_B)
    store.forget_watcher_memos(drop_pending=True)  # the lead went to another replica before the flush
    await store.flush_writes()
    # The older cursor: its entries after it are read again by the new leader, none is skipped.
    assert await store.journal_cursors.get("gpu-a") == CURSOR_A
