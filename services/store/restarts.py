"""Restarts inferbot executed, newest last: what a cooldown is measured from."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from services.store.engine import Repository, as_dict, aware, in_thread, insert_once, newest, reading
from services.store.ports import Restarts
from services.store.records import RestartRecord
from services.store.schema import restarts

__all__ = ["RestartsRepo"]


class RestartsRepo(Repository, Restarts):
    """:class:`~services.store.ports.Restarts` on the ``inferbot_restarts`` table."""

    @in_thread
    def record(self, service: str, node: str, at: datetime, by: str | None, forced: bool) -> None:
        insert_once(self.db, restarts, {"service": service, "node": node, "at": aware(at, "at"), "by": by,
                                       "forced": bool(forced)})

    @reading
    def last(self, conn: Connection, service: str, node: str) -> RestartRecord | None:
        row = newest(conn, restarts, service, node, restarts.c.at)
        return None if row is None else RestartRecord.model_validate(as_dict(row))

    async def last_at(self, service: str, node: str) -> datetime | None:
        record = await self.last(service, node)
        return None if record is None else record.at
