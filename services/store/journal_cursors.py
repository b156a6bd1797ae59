"""Where each node's journal stream has got to: read once, then kept by the leader, written in batches."""

from __future__ import annotations

from sqlalchemy import Connection, select

from services.store.engine import Repository, reading, utcnow
from services.store.ports import JournalCursors
from services.store.schema import journal_cursors
from services.store.write_queue import WriteQueue

__all__ = ["JournalCursorsRepo"]


class JournalCursorsRepo(Repository, JournalCursors):
    """:class:`~services.store.ports.JournalCursors` on the ``inferbot_journal_cursors`` table, through the
    leader's :class:`~services.store.write_queue.WriteQueue` (an entry read twice is harmless: every look it
    causes is a look, and every notice is claimed once)."""

    def __init__(self, queue: WriteQueue) -> None:
        super().__init__(queue.db)
        self.queue = queue
        self._memo: dict[str, str | None] = queue.memo({})

    async def get(self, node: str) -> str | None:
        if node not in self._memo:
            self._memo.setdefault(node, await self._read(node))
        return self._memo[node]

    @reading
    def _read(self, conn: Connection, node: str) -> str | None:
        row = conn.execute(select(journal_cursors.c.cursor).where(journal_cursors.c.node == node)).first()
        return None if row is None else str(row[0])

    async def put(self, node: str, cursor: str) -> None:
        if self._memo.get(node) == cursor:
            return
        self.queue.upsert_later(journal_cursors, {"node": node}, {"cursor": cursor, "updated_at": utcnow()})
        self._memo[node] = cursor
