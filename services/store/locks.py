"""Named locks with an owner and an expiry: a conditional ``UPDATE`` or an ``INSERT`` against the name."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from services.store.engine import Repository, as_dict, aware, in_thread, reading, writing
from services.store.ports import Locks
from services.store.records import LockRecord
from services.store.schema import locks

__all__ = ["LocksRepo"]


class LocksRepo(Repository, Locks):
    """:class:`~services.store.ports.Locks` on the ``inferbot_locks`` table."""

    @in_thread
    def acquire(self, name: str, owner: str, ttl_s: float, now: datetime) -> bool:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        now = aware(now, "now")
        expires = datetime.fromtimestamp(now.timestamp() + ttl_s, UTC)
        # 1. take over an expired lock (or renew our own): one conditional UPDATE, row-locked.
        with self.db.write() as conn:
            taken = conn.execute(
                update(locks).where(locks.c.name == name, (locks.c.expires_at <= now) | (locks.c.owner == owner))
                .values(owner=owner, acquired_at=now, expires_at=expires)
            ).rowcount
        if taken == 1:
            return True
        # 2. no row (or a live one held by someone else): INSERT; the primary key decides the race.
        try:
            with self.db.write() as conn:
                conn.execute(insert(locks).values(name=name, owner=owner, acquired_at=now, expires_at=expires))
        except IntegrityError:
            return False
        return True

    @writing
    def release(self, conn: Connection, name: str, owner: str) -> bool:
        return conn.execute(delete(locks).where(locks.c.name == name, locks.c.owner == owner)).rowcount == 1

    @reading
    def holder(self, conn: Connection, name: str, now: datetime) -> str | None:
        owner = conn.execute(select(locks.c.owner).where(locks.c.name == name, locks.c.expires_at > aware(now, "now"))
                             ).scalar_one_or_none()
        return None if owner is None else str(owner)

    @reading
    def get(self, conn: Connection, name: str, now: datetime) -> LockRecord | None:
        row = conn.execute(select(locks).where(locks.c.name == name, locks.c.expires_at > aware(now, "now"))).first()
        return None if row is None else LockRecord.model_validate(as_dict(row))

    @writing
    def clear(self, conn: Connection, name: str, owner: str | None = None) -> LockRecord | None:
        row = conn.execute(select(locks).where(locks.c.name == name)).first()
        if row is None or (owner is not None and row.owner != owner):
            return None
        conn.execute(delete(locks).where(locks.c.name == name, locks.c.owner == row.owner))
        return LockRecord.model_validate(as_dict(row))
