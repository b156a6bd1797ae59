"""The health watcher's memory per service between two looks (``records.HealthMemo`` as JSON).

Only the scheduler leader writes memos: read from the database once, then from what this process last read
or wrote; written with the leader's next batch (:mod:`services.store.write_queue`), or at once when a health
episode opened or closed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from services.store.engine import Repository, reading
from services.store.ports import HealthMemos
from services.store.records import HealthMemo
from services.store.schema import health_memos
from services.store.write_queue import WriteQueue

__all__ = ["EPISODE_FIELDS", "HealthMemosRepo"]

EPISODE_FIELDS = ("invocation", "unhealthy_since", "unhealthy_reason", "unhealthy_silenced", "hung_since",
                  "hung_silenced", "stop_checked", "stop_error", "stop_place")
"""Memo fields that change only when a health episode starts or ends; counters (PIDs, polls, token totals)
ride the batched write."""


class HealthMemosRepo(Repository, HealthMemos):
    """:class:`~services.store.ports.HealthMemos` on the ``inferbot_health_watch`` table, through the leader's
    :class:`~services.store.write_queue.WriteQueue`."""

    def __init__(self, queue: WriteQueue) -> None:
        super().__init__(queue.db)
        self.queue = queue
        self._memo: dict[tuple[str, str], dict[str, Any] | None] = queue.memo({})

    async def get(self, service: str, node: str) -> HealthMemo | None:
        key = (service, node)
        if key not in self._memo:
            self._memo.setdefault(key, await self._read(service, node))
        data = self._memo[key]
        return None if data is None else HealthMemo.model_validate(data)

    @reading
    def _read(self, conn: Connection, service: str, node: str) -> dict[str, Any] | None:
        row = conn.execute(select(health_memos.c.data).where(health_memos.c.service == service,
                                                              health_memos.c.node == node)).first()
        return None if row is None else dict(row[0])

    async def put(self, service: str, node: str, memo: HealthMemo, now: datetime) -> None:
        data = memo.model_dump(mode="json")
        key = (service, node)
        if self._memo.get(key) == data:
            return
        before = self._memo.get(key) or {}
        self.queue.upsert_later(health_memos, {"service": service, "node": node}, {"data": data, "updated_at": now})
        self._memo[key] = data
        if any(before.get(f) != data.get(f) for f in EPISODE_FIELDS):
            # An episode opened or closed (its notice claimed or posted): written now, so a leader that dies
            # within the batching second cannot leave its successor to open the same episode again.
            await self.queue.flush()
