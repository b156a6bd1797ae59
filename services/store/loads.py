"""Load history: how each load of a service ended (ETAs, charts), and when each of its phases was first seen."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from services.store.engine import (
    MEMO_S,
    Database,
    Repository,
    as_dict,
    aware,
    in_thread,
    insert_once,
    newest,
    reading,
    upsert,
    utcnow,
)
from services.store.ports import Loads
from services.store.records import LoadOutcome, LoadRecord
from services.store.schema import load_phases, loads

__all__ = ["LoadsRepo"]


class LoadsRepo(Repository, Loads):
    """:class:`~services.store.ports.Loads` on ``inferbot_loads`` and ``inferbot_load_phases``.

    Durations are remembered for :data:`MEMO_S` (history only grows when a load ends, which forgets them),
    and a phase once recorded by this process is not written again.
    """

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._durations: dict[tuple[str, str, int], tuple[float, list[float]]] = {}
        self._phases_seen: set[tuple[str, str, str, str]] = set()

    async def record(self, service: str, node: str, invocation_id: str, started_at: datetime,
                     ready_at: datetime | None, outcome: LoadOutcome, duration_s: float) -> bool:
        if outcome not in ("ready", "failed", "timeout"):
            raise ValueError(f"unknown load outcome {outcome!r}")
        self._durations = {k: v for k, v in self._durations.items() if k[:2] != (service, node)}
        started_at = aware(started_at, "started_at")
        key = {"service": service, "node": node, "invocation_id": invocation_id or f"start:{started_at.isoformat()}"}
        values: dict[str, Any] = {
            "started_at": started_at, "ready_at": None if ready_at is None else aware(ready_at, "ready_at"),
            "outcome": outcome, "duration_s": float(duration_s), "recorded_at": utcnow(),
        }
        return await self.db.run(upsert, self.db, loads, key, values)

    @in_thread
    def durations(self, service: str, node: str, limit: int = 10) -> list[float]:
        return self._durations_of(service, node, limit)

    async def durations_many(self, keys: list[tuple[str, str]], limit: int = 10) -> list[list[float]]:
        mono = time.monotonic()
        missing = [(s, n) for s, n in keys if mono - self._durations.get((s, n, limit), (-MEMO_S, []))[0] >= MEMO_S]
        if missing:
            found = await self.db.run(lambda: [self._durations_of(s, n, limit) for s, n in missing])
            for (s, n), durations in zip(missing, found, strict=True):
                self._durations[(s, n, limit)] = (mono, durations)
        return [list(self._durations[(s, n, limit)][1]) for s, n in keys]

    def _durations_of(self, service: str, node: str, limit: int) -> list[float]:
        with self.db.read() as conn:
            rows = conn.execute(
                select(loads.c.duration_s)
                .where(loads.c.service == service, loads.c.node == node, loads.c.outcome == "ready")
                .order_by(loads.c.started_at.desc(), loads.c.id.desc()).limit(limit)
            ).scalars().all()
        return [float(r) for r in rows]

    @reading
    def last(self, conn: Connection, service: str, node: str) -> LoadRecord | None:
        row = newest(conn, loads, service, node, loads.c.started_at)
        return None if row is None else LoadRecord.model_validate(as_dict(row))

    async def record_phase(self, service: str, node: str, invocation_id: str, phase: str, at: datetime) -> bool:
        key = (service, node, invocation_id, phase)
        if key in self._phases_seen:
            return False
        inserted = await self.db.run(insert_once, self.db, load_phases, {
            "service": service, "node": node, "invocation_id": invocation_id, "phase": phase,
            "first_seen_at": aware(at, "at")})
        self._phases_seen.add(key)
        return inserted

    @reading
    def recent(self, conn: Connection, service: str, node: str,
               limit: int = 10) -> list[tuple[LoadRecord, dict[str, datetime]]]:
        rows = conn.execute(select(loads).where(loads.c.service == service, loads.c.node == node)
                            .order_by(loads.c.started_at.desc(), loads.c.id.desc()).limit(limit)).all()
        records = [LoadRecord.model_validate(as_dict(r)) for r in reversed(rows)]
        phases: dict[str, dict[str, datetime]] = {}
        if records:
            for p in conn.execute(select(load_phases).where(
                    load_phases.c.service == service, load_phases.c.node == node,
                    load_phases.c.invocation_id.in_([r.invocation_id for r in records]))).all():
                phases.setdefault(str(p.invocation_id), {})[str(p.phase)] = p.first_seen_at
        return [(r, phases.get(r.invocation_id, {})) for r in records]
