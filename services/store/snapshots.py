"""Settings snapshots: what each service ran with, one row per different set of settings.

Every answer records what each service runs with; unchanged settings that this process recorded a moment ago
need no database trip (only ``last_seen_at`` would move), so a memo keeps, per service@node, a short digest of
what was recorded, when, the snapshot's id and its last ready snapshot.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from services.models import ServiceState
from services.store.engine import MEMO_S, Database, Repository, as_dict, aware, in_thread, reading, writing
from services.store.ports import Snapshots
from services.store.records import SettingsSnapshot
from services.store.schema import snapshots

__all__ = ["SnapshotsRepo"]

Recorded = tuple[int, SettingsSnapshot | None]


def _settings_digest(st: ServiceState) -> bytes:
    """What a snapshot row is about (the settings and whether they are seen ready now), as a short hash: the
    memo keeps one per service instead of the settings' JSON."""
    text = json.dumps([st.unit, st.model, st.flags, st.env, st.version, st.state == "ready"], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class SnapshotsRepo(Repository, Snapshots):
    """:class:`~services.store.ports.Snapshots` on the ``inferbot_snapshots`` table."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        # service@node → (settings digest, when (monotonic), the snapshot's id, its last ready snapshot).
        self._memo: dict[tuple[str, str], tuple[bytes, float, int, SettingsSnapshot | None]] = {}

    @in_thread
    def record(self, state: ServiceState, now: datetime) -> SettingsSnapshot:
        with self.db.write() as conn:
            snap_id = self._record_id(conn, state, aware(now, "now"))
        with self.db.read() as conn:
            row = conn.execute(select(snapshots).where(snapshots.c.id == snap_id)).one()
        return SettingsSnapshot.model_validate(as_dict(row))

    async def record_many(self, states: list[ServiceState], now: datetime) -> list[Recorded]:
        now = aware(now, "now")
        mono = time.monotonic()
        out: list[Recorded | None] = [None] * len(states)
        todo: list[tuple[int, ServiceState, bytes]] = []
        for i, st in enumerate(states):
            digest = _settings_digest(st)
            memo = self._memo.get((st.service, st.node))
            if memo is not None and memo[0] == digest and mono - memo[1] < MEMO_S:
                out[i] = (memo[2], memo[3])
            else:
                todo.append((i, st, digest))
        if todo:
            recorded = await self._record_each([st for _, st, _ in todo], now)
            for (i, st, digest), result in zip(todo, recorded, strict=True):
                out[i] = result
                self._memo[(st.service, st.node)] = (digest, mono, result[0], result[1])
        return [r for r in out if r is not None]

    @in_thread
    def _record_each(self, states: list[ServiceState], now: datetime) -> list[Recorded]:
        # One write transaction for the batch (a batch is up to 64 services, as the nodes answer), not one each.
        with self.db.write() as conn:
            snaps = [self._record_id(conn, st, now) for st in states]
        return [(snap, None if st.state == "ready" else self._last_ready(st.service, st.node))
                for snap, st in zip(snaps, states, strict=True)]

    def _record_id(self, conn: Connection, st: ServiceState, now: datetime) -> int:
        flags = dict(st.flags)
        env = dict(st.env)
        ready = st.state == "ready"
        newest = conn.execute(
            select(snapshots).where(snapshots.c.service == st.service, snapshots.c.node == st.node)
            .order_by(snapshots.c.id.desc()).limit(1)
        ).first()
        if newest is not None and (newest.model == st.model and newest.version == st.version
                                   and newest.flags == flags and newest.env == env):
            values: dict[str, Any] = {"last_seen_at": max(newest.last_seen_at, now), "state": st.state,
                                      "unit": st.unit}
            if ready:
                values["was_ready"] = True
                values["last_ready_at"] = max(newest.last_ready_at or now, now)
            conn.execute(update(snapshots).where(snapshots.c.id == newest.id).values(**values))
            return int(newest.id)
        result = conn.execute(insert(snapshots).values(
            service=st.service, node=st.node, unit=st.unit, first_seen_at=now, last_seen_at=now,
            model=st.model, flags=flags, env=env, version=st.version, state=st.state,
            was_ready=ready, last_ready_at=now if ready else None,
        ))
        assert result.inserted_primary_key is not None
        return int(result.inserted_primary_key[0])

    @writing
    def mark_ready(self, conn: Connection, service: str, node: str, at: datetime) -> bool:
        newest = select(func.max(snapshots.c.id)).where(
            snapshots.c.service == service, snapshots.c.node == node).scalar_subquery()
        result = conn.execute(update(snapshots).where(snapshots.c.id == newest)
                              .values(was_ready=True, last_ready_at=aware(at, "at")))
        return result.rowcount == 1

    @reading
    def latest(self, conn: Connection, service: str, node: str, limit: int = 2) -> list[SettingsSnapshot]:
        rows = conn.execute(select(snapshots).where(snapshots.c.service == service, snapshots.c.node == node)
                            .order_by(snapshots.c.id.desc()).limit(limit)).all()
        return [SettingsSnapshot.model_validate(as_dict(r)) for r in rows]

    @in_thread
    def last_ready(self, service: str, node: str) -> SettingsSnapshot | None:
        return self._last_ready(service, node)

    def _last_ready(self, service: str, node: str) -> SettingsSnapshot | None:
        with self.db.read() as conn:
            row = conn.execute(
                select(snapshots).where(snapshots.c.service == service, snapshots.c.node == node,
                                        snapshots.c.was_ready.is_(True))
                .order_by(snapshots.c.id.desc()).limit(1)
            ).first()
        return None if row is None else SettingsSnapshot.model_validate(as_dict(row))
