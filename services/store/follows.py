"""Loads being followed for readiness notices: one row per ``service@node``, reused by its next load."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, insert, select, update
from sqlalchemy.exc import IntegrityError

from services.store.engine import Repository, as_dict, aware, in_thread, reading, update_row, utcnow, writing
from services.store.ports import Follows
from services.store.records import AWAITING_START, Follow, FollowReason
from services.store.schema import follows, notices

__all__ = ["FollowsRepo"]


def _follow(row: Row[Any]) -> Follow:
    data = as_dict(row)
    data["key"] = data.pop("follow_key")
    return Follow.model_validate(data)


class FollowsRepo(Repository, Follows):
    """:class:`~services.store.ports.Follows` on the ``inferbot_follows`` table (carrying claims of
    ``inferbot_notices`` over to the load's real invocation id)."""

    @in_thread
    def upsert(self, key: str, service: str, node: str, unit: str, invocation_id: str | None,
               started_at: datetime, reason: FollowReason, thread_channel: str | None = None,
               thread_ts: str | None = None, progress_message_ts: str | None = None,
               request_id: str | None = None) -> Follow:
        if reason not in ("restart", "unplanned", "change"):
            raise ValueError(f"unknown follow reason {reason!r}")
        values: dict[str, Any] = {
            "service": service, "node": node, "unit": unit, "invocation_id": invocation_id or None,
            "started_at": aware(started_at, "started_at"), "reason": reason,
            "thread_channel": thread_channel, "thread_ts": thread_ts,
            "progress_message_ts": progress_message_ts, "request_id": request_id,
        }
        for attempt in range(2):
            try:
                with self.db.write() as conn:
                    return _upsert(conn, key, values, utcnow())
            except IntegrityError:  # another process inserted the same key first: update it now
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @in_thread
    def set_message(self, key: str, progress_message_ts: str) -> bool:
        return update_row(self.db, follows, {"follow_key": key},
                                  {"progress_message_ts": progress_message_ts, "updated_at": utcnow()})

    @reading
    def get(self, conn: Connection, key: str) -> Follow | None:
        row = conn.execute(select(follows).where(follows.c.follow_key == key)).first()
        return None if row is None else _follow(row)

    @reading
    def active(self, conn: Connection) -> list[Follow]:
        rows = conn.execute(select(follows).where(follows.c.finished_at.is_(None))
                            .order_by(follows.c.started_at, follows.c.follow_key)).all()
        return [_follow(r) for r in rows]

    @writing
    def finish(self, conn: Connection, key: str, outcome: str, at: datetime | None = None) -> bool:
        at = utcnow() if at is None else aware(at, "at")
        return conn.execute(
            update(follows).where(follows.c.follow_key == key, follows.c.finished_at.is_(None))
            .values(finished_at=at, outcome=outcome, updated_at=at)
        ).rowcount == 1


def _upsert(conn: Connection, key: str, values: dict[str, Any], now: datetime) -> Follow:
    old = conn.execute(select(follows).where(follows.c.follow_key == key)).first()
    if old is None:
        conn.execute(insert(follows).values(follow_key=key, updated_at=now, **values))
    else:
        row = dict(values, updated_at=now)
        new_inv = values["invocation_id"]
        if old.invocation_id and new_inv and new_inv != old.invocation_id:
            row.update(finished_at=None, outcome=None)  # a new load under the same key
            if old.invocation_id.startswith(AWAITING_START) and not new_inv.startswith(AWAITING_START):
                # The awaited start arrived: the same load. Whoever polled meanwhile may have posted its
                # progress message; its claim and ts stay with the load, or the next poll would post a
                # second one (two replicas, or the confirming one still running the command while the
                # leader already follows).
                _carry_claims(conn, key, old.invocation_id, new_inv)
                if row["progress_message_ts"] is None:
                    row["progress_message_ts"] = old.progress_message_ts
        elif old.invocation_id and not new_inv:
            row["invocation_id"] = old.invocation_id  # never forget a known invocation
        elif not old.invocation_id and new_inv:
            _carry_claims(conn, key, "", new_inv)
        conn.execute(update(follows).where(follows.c.follow_key == key).values(**row))
    return _follow(conn.execute(select(follows).where(follows.c.follow_key == key)).one())


def _carry_claims(conn: Connection, key: str, old_inv: str, new_inv: str) -> None:
    """Notice claims made for the load under its old invocation id belong to its real one."""
    conn.execute(update(notices).where(notices.c.follow_key == key, notices.c.invocation_id == old_inv)
                 .values(invocation_id=new_inv))
