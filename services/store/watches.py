"""The unplanned-restart watcher's baseline per unit: read once, then kept by the leader, written in batches."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from services.store.engine import Repository, as_dict, aware, reading, utcnow
from services.store.ports import Watches
from services.store.records import WatchState
from services.store.schema import watches
from services.store.write_queue import WriteQueue

__all__ = ["WatchesRepo"]


class WatchesRepo(Repository, Watches):
    """:class:`~services.store.ports.Watches` on the ``inferbot_watch`` table, through the leader's
    :class:`~services.store.write_queue.WriteQueue`."""

    def __init__(self, queue: WriteQueue) -> None:
        super().__init__(queue.db)
        self.queue = queue
        self._memo: dict[tuple[str, str], WatchState | None] = queue.memo({})

    async def get(self, service: str, node: str) -> WatchState | None:
        key = (service, node)
        if key in self._memo:
            return self._memo[key]
        found = await self._read(service, node)
        self._memo.setdefault(key, found)
        return self._memo[key]

    @reading
    def _read(self, conn: Connection, service: str, node: str) -> WatchState | None:
        row = conn.execute(select(watches).where(watches.c.service == service, watches.c.node == node)).first()
        return None if row is None else WatchState.model_validate(as_dict(row))

    async def put(self, service: str, node: str, main_pid: int, started_at: datetime | None, n_restarts: int,
                  active_state: str) -> None:
        values = {"main_pid": int(main_pid),
                  "started_at": None if started_at is None else aware(started_at, "started_at"),
                  "n_restarts": int(n_restarts), "active_state": active_state, "updated_at": utcnow()}
        key = {"service": service, "node": node}
        before = self._memo.get((service, node))
        self.queue.upsert_later(watches, key, values)
        self._memo[(service, node)] = WatchState(**key, **values)
        if before is not None and (before.main_pid, before.n_restarts, before.active_state) != \
                (values["main_pid"], values["n_restarts"], values["active_state"]):
            # A restart or a state change: written now, so a leader that dies within the batching second
            # cannot hand its successor a baseline from before the restart it already reported.
            await self.queue.flush()
