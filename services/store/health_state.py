"""Durable state of the health watcher and of silences: two tables next to the store's own.

The health watcher (``handlers/health_watch.py``) remembers per service what it saw last (the start it
is about, whether that start was ever ready, when the generation counter last moved, which notice
episodes are open); a silence (``silence kimi 2h``) is one row per service. Both live in the state
database, so a bot that is restarted carries on where it was and never posts a notice twice.

Their tables are declared in ``services/store/schema.py`` and created by Alembic (migration 0003).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, select

from services.store.records import HealthMemo, Silence
from services.store.schema import health_memos, silences
from services.store.store import Store

__all__ = ["HealthMemo", "Silence", "active_silence", "active_silences", "clear_silence", "get_memo",
           "set_memo", "set_silence"]

def _key(service: str, node: str) -> dict[str, Any]:
    return {"service": service, "node": node}


async def _upsert(store: Store, table: Table, service: str, node: str, values: dict[str, Any]) -> None:
    def run() -> None:
        store._upsert(table, _key(service, node), values)

    await store._run(run)


EPISODE_FIELDS = ("invocation", "unhealthy_since", "unhealthy_reason", "unhealthy_silenced", "hung_since",
                  "hung_silenced", "stop_checked", "stop_error", "stop_place")
"""Memo fields that change only when a health episode starts or ends; counters (PIDs, polls, token totals)
ride the batched write."""


async def get_memo(store: Store, service: str, node: str) -> HealthMemo | None:
    """The health watcher's memo of service@node, if it looked before.

    Read from the database once; after that from what this process last read or wrote (only the scheduler
    leader writes memos: ``Store.forget_watcher_memos`` when that changes).
    """
    key = (service, node)
    if key not in store.health_memos:
        def run() -> dict[str, Any] | None:
            with store._read() as conn:
                row = conn.execute(select(health_memos.c.data).where(health_memos.c.service == service,
                                                                      health_memos.c.node == node)).first()
            return None if row is None else dict(row[0])

        found = await store._run(run)
        store.health_memos.setdefault(key, found)
    data = store.health_memos[key]
    return None if data is None else HealthMemo.model_validate(data)


async def set_memo(store: Store, service: str, node: str, memo: HealthMemo, now: datetime) -> None:
    """Replace the memo of service@node: at once for this process, in the database with the store's next
    flush of the watcher's writes (within ``WATCHER_FLUSH_S``), and not at all when nothing changed."""
    data = memo.model_dump(mode="json")
    key = (service, node)
    if store.health_memos.get(key) == data:
        return
    before = store.health_memos.get(key) or {}
    await store.queue_upsert(health_memos, _key(service, node), {"data": data, "updated_at": now})
    store.health_memos[key] = data
    if any(before.get(f) != data.get(f) for f in EPISODE_FIELDS):
        # An episode opened or closed (its notice claimed or posted): written now, so a leader that dies
        # within the batching second cannot leave its successor to open the same episode again.
        await store.flush_writes()


async def set_silence(store: Store, silence: Silence) -> None:
    """Silence (or re-silence, replacing the old end) one service."""
    await _upsert(store, silences, silence.service, silence.node,
                  {"until": silence.until, "reason": silence.reason, "by": silence.by, "at": silence.at})


async def clear_silence(store: Store, service: str, node: str) -> Silence | None:
    """End the silence of service@node now; returns the row removed (None: there was none)."""
    def run() -> Silence | None:
        with store._write() as conn:
            row = conn.execute(select(silences).where(silences.c.service == service,
                                                      silences.c.node == node)).first()
            if row is None:
                return None
            conn.execute(delete(silences).where(silences.c.service == service, silences.c.node == node))
        return Silence.model_validate(dict(row._mapping))

    return await store._run(run)


async def active_silences(store: Store, now: datetime) -> list[Silence]:
    """Every silence that has not ended at ``now``, soonest end first."""
    def run() -> list[Silence]:
        with store._read() as conn:
            rows = conn.execute(select(silences).where(silences.c.until > now).order_by(silences.c.until)).all()
        return [Silence.model_validate(dict(r._mapping)) for r in rows]

    return await store._run(run)


async def active_silence(store: Store, service: str, node: str, now: datetime) -> Silence | None:
    """The silence of service@node in force at ``now``, if any."""
    return next((s for s in await active_silences(store, now) if (s.service, s.node) == (service, node)), None)
