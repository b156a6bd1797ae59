"""State that several bot replicas share through the database: event de-duplication, rate limits, pacing.

Each replica used to keep these in its own memory, which is only right for one process: with two
replicas behind Socket Mode or a load balancer, the same event redelivered to the other replica would be
answered twice, a person could ask twice as fast, and a new scheduler leader would re-edit a progress
message at once. Here each is one short transaction against the state store, atomic on SQLite (``BEGIN
IMMEDIATE``) and PostgreSQL (``INSERT … ON CONFLICT DO NOTHING``, ``SELECT … FOR UPDATE``, conditional
``UPDATE``), so whichever replica gets there first wins and the others see it.
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Table, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from services.store.schema import audit_log, events_seen, progress_pacing, rate_hits
from services.store.store import Store

__all__ = [
    "EVENT_TTL_S",
    "RateVerdict",
    "audited",
    "claim_event",
    "claim_progress_edit",
    "forget_progress",
    "rate_check",
    "release_progress_edit",
]

EVENT_TTL_S = 3600.0
"""How long a seen event id is remembered (Slack redelivers within minutes)."""
_PRUNE_EVERY_S = 60.0
RATE_WINDOW_S = 60.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_pruned: weakref.WeakKeyDictionary[Store, float] = weakref.WeakKeyDictionary()


def _insert_ignore(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """INSERT unless the primary key exists (no error, no aborted transaction); True when inserted."""
    stmt: Insert
    if conn.dialect.name == "postgresql":
        stmt = postgresql.insert(table).values(**values).on_conflict_do_nothing()
    else:
        stmt = sqlite.insert(table).values(**values).on_conflict_do_nothing()
    # RETURNING rather than rowcount: psycopg reports -1 for an INSERT … ON CONFLICT through SQLAlchemy.
    pk = next(iter(table.primary_key.columns))
    return conn.execute(stmt.returning(pk)).first() is not None


async def claim_event(store: Store, event_id: str, now: datetime) -> bool:
    """True for the first replica to see ``event_id`` (within :data:`EVENT_TTL_S`), False for every other."""
    mono = time.monotonic()
    prune = mono - _pruned.get(store, -_PRUNE_EVERY_S) >= _PRUNE_EVERY_S
    if prune:
        _pruned[store] = mono

    def claim(conn: Connection) -> bool:
        if prune:
            conn.execute(delete(events_seen).where(events_seen.c.seen_at < now - timedelta(seconds=EVENT_TTL_S)))
        return _insert_ignore(conn, events_seen, {"event_id": event_id, "seen_at": now})

    return await store.run_write(claim)


@dataclass(frozen=True)
class RateVerdict:
    """May this person be answered now; if not, in how many seconds, and must they be told (once)."""

    allowed: bool
    retry_in: int = 0
    notify: bool = False


async def rate_check(store: Store, user: str, per_minute: int, now: float | None = None) -> RateVerdict:
    """At most ``per_minute`` answers per person in any 60 s, counted over every replica.

    The first refusal in a window is to be answered (``notify``), later ones silently dropped. ``now`` is
    epoch seconds (wall clock: replicas share no monotonic clock).
    """
    at = time.time() if now is None else now

    def check(conn: Connection) -> RateVerdict:
        _insert_ignore(conn, rate_hits, {"user_id": user, "hits": [], "told_at": None})
        row = conn.execute(select(rate_hits).where(rate_hits.c.user_id == user).with_for_update()).one()
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
        conn.execute(update(rate_hits).where(rate_hits.c.user_id == user).values(hits=hits, told_at=told))
        return verdict

    return await store.run_write(check)


async def claim_progress_edit(store: Store, key: str, phase: str | None, min_interval_s: float,
                              now: datetime) -> bool:
    """Claim the next edit of follow ``key``'s progress message: True when ``min_interval_s`` has passed
    since the last edit or the phase changed; one winner however many pollers (or leaders) race."""
    cutoff = now - timedelta(seconds=min_interval_s)

    def claim(conn: Connection) -> bool:
        _insert_ignore(conn, progress_pacing, {"follow_key": key, "edited_at": _EPOCH, "phase": None})
        c = progress_pacing.c
        result = conn.execute(update(progress_pacing)
                              .where(c.follow_key == key, (c.edited_at <= cutoff) | c.phase.is_distinct_from(phase))
                              .values(edited_at=now, phase=phase))
        return result.rowcount == 1

    return await store.run_write(claim)


async def release_progress_edit(store: Store, key: str) -> None:
    """The claimed edit did not reach Slack: the next poll may edit again at once."""
    def release(conn: Connection) -> None:
        conn.execute(update(progress_pacing).where(progress_pacing.c.follow_key == key).values(edited_at=_EPOCH))

    await store.run_write(release)


async def audited(store: Store, event: str, request_id: str) -> bool:
    """True when the audit log has ``event`` for restart request ``request_id``."""

    def find(conn: Connection) -> bool:
        return conn.execute(select(audit_log.c.id).where(audit_log.c.event == event,
                                                         audit_log.c.request_id == request_id).limit(1)).first() \
            is not None

    return await store.run_read(find)


async def forget_progress(store: Store, key: str) -> None:
    """A new load (or the end of one): its progress message starts unpaced."""
    def forget(conn: Connection) -> None:
        conn.execute(delete(progress_pacing).where(progress_pacing.c.follow_key == key))

    await store.run_write(forget)
