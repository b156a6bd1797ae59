"""Exactly-once notice claims: an ``INSERT`` against (follow key, place, the follow's current load)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from services.store.engine import Repository, as_dict, aware, in_thread, reading, utcnow, writing
from services.store.ports import Notices
from services.store.records import Notice
from services.store.schema import follows, notices

__all__ = ["NoticesRepo"]


def _invocation(conn: Connection, follow_key: str) -> str:
    """The follow's current load ("" when its invocation id is not known yet, or there is no follow)."""
    inv = conn.execute(select(follows.c.invocation_id).where(follows.c.follow_key == follow_key)).scalar_one_or_none()
    return str(inv) if inv else ""


class NoticesRepo(Repository, Notices):
    """:class:`~services.store.ports.Notices` on the ``inferbot_notices`` table."""

    @in_thread
    def claim(self, follow_key: str, place: str) -> bool:
        try:
            with self.db.write() as conn:
                conn.execute(insert(notices).values(follow_key=follow_key, place=place,
                                                    invocation_id=_invocation(conn, follow_key), claimed_at=utcnow()))
        except IntegrityError:
            return False
        return True

    @writing
    def mark_sent(self, conn: Connection, follow_key: str, place: str, ts: str | None,
                  at: datetime | None = None) -> bool:
        at = utcnow() if at is None else aware(at, "at")
        inv = _invocation(conn, follow_key)
        return conn.execute(
            update(notices).where(notices.c.follow_key == follow_key, notices.c.place == place,
                                  notices.c.invocation_id == inv)
            .values(sent_at=at, ts=ts)
        ).rowcount == 1

    async def sent(self, follow_key: str, place: str) -> bool:
        notice = await self.get(follow_key, place)
        return notice is not None and notice.sent_at is not None

    @reading
    def get(self, conn: Connection, follow_key: str, place: str) -> Notice | None:
        inv = _invocation(conn, follow_key)
        row = conn.execute(select(notices).where(notices.c.follow_key == follow_key, notices.c.place == place,
                                                 notices.c.invocation_id == inv)).first()
        return None if row is None else Notice.model_validate(as_dict(row))

    @writing
    def release(self, conn: Connection, follow_key: str, place: str) -> bool:
        inv = _invocation(conn, follow_key)
        return conn.execute(
            delete(notices).where(notices.c.follow_key == follow_key, notices.c.place == place,
                                  notices.c.invocation_id == inv, notices.c.sent_at.is_(None))
        ).rowcount == 1
