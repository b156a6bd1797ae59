"""Silences for planned work (``silence kimi 2h``): one row per service, ended by time or by hand."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, select

from services.store.engine import Repository, as_dict, in_thread, reading, upsert, writing
from services.store.ports import Silences
from services.store.records import Silence
from services.store.schema import silences

__all__ = ["SilencesRepo"]

# The silences in force at ``now``, soonest to end first: asked by every status answer, built once.
_ACTIVE = select(silences).where(silences.c.until > bindparam("now", type_=silences.c.until.type)) \
    .order_by(silences.c.until)


class SilencesRepo(Repository, Silences):
    """:class:`~services.store.ports.Silences` on the ``inferbot_silences`` table."""

    @in_thread
    def put(self, silence: Silence) -> None:
        upsert(self.db, silences, {"service": silence.service, "node": silence.node},
                       {"until": silence.until, "reason": silence.reason, "by": silence.by, "at": silence.at})

    @writing
    def end(self, conn: Connection, service: str, node: str) -> Silence | None:
        where = (silences.c.service == service, silences.c.node == node)
        row = conn.execute(select(silences).where(*where)).first()
        if row is None:
            return None
        conn.execute(delete(silences).where(*where))
        return Silence.model_validate(as_dict(row))

    @reading
    def active(self, conn: Connection, now: datetime) -> list[Silence]:
        rows = conn.execute(_ACTIVE, {"now": now}).all()
        return [Silence.model_validate(as_dict(r)) for r in rows]

    async def active_for(self, service: str, node: str, now: datetime) -> Silence | None:
        return next((s for s in await self.active(now) if (s.service, s.node) == (service, node)), None)
