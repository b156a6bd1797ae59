"""State that several bot replicas share through the database: event de-duplication, rate limits, pacing.

Each replica used to keep these in its own memory, which is only right for one process: with two
replicas behind Socket Mode or a load balancer, the same event redelivered to the other replica would be
answered twice, a person could ask twice as fast, and a new scheduler leader would re-edit a progress
message at once. Here each is one short transaction against the state store, atomic on SQLite (``BEGIN
IMMEDIATE``) and PostgreSQL (``INSERT … ON CONFLICT DO NOTHING``, ``SELECT … FOR UPDATE``, conditional
``UPDATE``), so whichever replica gets there first wins and the others see it.
"""

from __future__ import annotations

import functools
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Table, bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import ReturningInsert

from services.store.engine import Database, Repository, writing
from services.store.ports import SharedState
from services.store.records import RateVerdict
from services.store.schema import events_seen, progress_pacing, rate_hits

__all__ = ["EVENT_TTL_S", "RATE_WINDOW_S", "SharedStateRepo"]

EVENT_TTL_S = 3600.0
"""How long a seen event id is remembered (Slack redelivers within minutes)."""
_PRUNE_EVERY_S = 60.0
RATE_WINDOW_S = 60.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.cache
def _insert_ignore_stmt(dialect: str, table: Table) -> ReturningInsert[Any]:
    """The INSERT … ON CONFLICT DO NOTHING RETURNING for ``table``, its values bound at execution: built once
    per process, so a question's event claim and rate limit do not rebuild (and re-key) it each time."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING rather than rowcount: psycopg reports -1 for an INSERT … ON CONFLICT through SQLAlchemy.
    pk = next(iter(table.primary_key.columns))
    return insert(table).on_conflict_do_nothing().returning(pk)


def _insert_ignore(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """INSERT unless the primary key exists (no error, no aborted transaction); True when inserted."""
    return conn.execute(_insert_ignore_stmt(conn.dialect.name, table), values).first() is not None


# A person's rate-limit row, locked; and its new hits (the SET columns come from the parameters' names).
_RATE_ROW = select(rate_hits).where(rate_hits.c.user_id == bindparam("user")).with_for_update()
_RATE_SET = update(rate_hits).where(rate_hits.c.user_id == bindparam("user"))


class SharedStateRepo(Repository, SharedState):
    """:class:`~services.store.ports.SharedState` on ``inferbot_events_seen``, ``inferbot_rate_hits`` and
    ``inferbot_progress_pacing``."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._pruned_at = -_PRUNE_EVERY_S  # monotonic time this process last pruned old event ids

    async def claim_event(self, event_id: str, now: datetime) -> bool:
        mono = time.monotonic()
        prune = mono - self._pruned_at >= _PRUNE_EVERY_S
        if prune:
            self._pruned_at = mono
        return await self._claim_event(event_id, now, prune)

    @writing
    def _claim_event(self, conn: Connection, event_id: str, now: datetime, prune: bool) -> bool:
        if prune:
            conn.execute(delete(events_seen).where(events_seen.c.seen_at < now - timedelta(seconds=EVENT_TTL_S)))
        return _insert_ignore(conn, events_seen, {"event_id": event_id, "seen_at": now})

    async def rate_check(self, user: str, per_minute: int, now: float | None = None) -> RateVerdict:
        return await self._rate_check(user, per_minute, time.time() if now is None else now)

    @writing
    def _rate_check(self, conn: Connection, user: str, per_minute: int, at: float) -> RateVerdict:
        _insert_ignore(conn, rate_hits, {"user_id": user, "hits": [], "told_at": None})
        row = conn.execute(_RATE_ROW, {"user": user}).one()
        hits = [float(h) for h in row.hits if float(h) > at - RATE_WINDOW_S]
        told = row.told_at
        if len(hits) < per_minute:
            hits.append(at)
            verdict = RateVerdict(True)
            told = None
        else:
            retry_in = max(1, math.ceil(hits[0] + RATE_WINDOW_S - at))
            notify = told is None or told <= at - RATE_WINDOW_S
            if notify:
                told = at
            verdict = RateVerdict(False, retry_in, notify)
        conn.execute(_RATE_SET, {"user": user, "hits": hits, "told_at": told})
        return verdict

    @writing
    def claim_progress_edit(self, conn: Connection, key: str, phase: str | None, min_interval_s: float,
                            now: datetime) -> bool:
        cutoff = now - timedelta(seconds=min_interval_s)
        _insert_ignore(conn, progress_pacing, {"follow_key": key, "edited_at": _EPOCH, "phase": None})
        c = progress_pacing.c
        result = conn.execute(update(progress_pacing)
                              .where(c.follow_key == key, (c.edited_at <= cutoff) | c.phase.is_distinct_from(phase))
                              .values(edited_at=now, phase=phase))
        return result.rowcount == 1

    @writing
    def release_progress_edit(self, conn: Connection, key: str) -> None:
        conn.execute(update(progress_pacing).where(progress_pacing.c.follow_key == key).values(edited_at=_EPOCH))

    @writing
    def forget_progress(self, conn: Connection, key: str) -> None:
        conn.execute(delete(progress_pacing).where(progress_pacing.c.follow_key == key))
