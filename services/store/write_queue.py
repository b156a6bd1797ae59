"""The scheduler leader's writes, batched, and what it remembers of its own rows.

Only the scheduler leader writes the watcher's baselines, the health watcher's memos and the metric samples.
While it leads, what it last read or wrote is what the database holds (or will, after the next flush), so
the repositories of those rows keep a memo of them here and need no database trip to look; and their
writes wait up to :data:`WATCHER_FLUSH_S` to go to the database together, in one transaction for the whole
fleet. Readers of those rows flush first; closing the store flushes too. Gaining or losing the lead forgets
the memos (:meth:`WriteQueue.forget`); a lost lead also drops the queued upserts (not the samples).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar

from sqlalchemy import Connection, Table, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from services.store.engine import Database, insert_once, upsert

__all__ = ["WATCHER_FLUSH_S", "WriteQueue"]

WATCHER_FLUSH_S = 1.0
"""How long the watcher's writes (metric samples, its baselines and the health watcher's memos) wait to be
written together: one transaction a second for the whole fleet instead of one per write."""

K = TypeVar("K")
V = TypeVar("V")
Upserts = dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Table, dict[str, Any]]]
log = logging.getLogger("inferbot.store")


class WriteQueue:
    """Batched inserts and upserts of the leader's rows, and the memos that are forgotten with the lead."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Rows waiting for the next flush: inserts in order, upserts by (table, key) (the newest values win).
        self._inserts: list[tuple[Table, dict[str, Any]]] = []
        self._upserts: Upserts = {}
        self._memos: list[dict[Any, Any]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock: asyncio.Lock | None = None

    def memo(self, memo: dict[K, V]) -> dict[K, V]:
        """Register ``memo`` (what a repository remembers of the leader's rows) to be cleared by :meth:`forget`."""
        self._memos.append(memo)
        return memo

    def forget(self, drop_pending: bool = False) -> None:
        """Forget every memo (leadership changed hands).

        ``drop_pending``: also drop the queued upserts (a replica that lost the lead must not write them
        over the new leader's); queued inserts (samples: measurements, not state) are kept.
        """
        for memo in self._memos:
            memo.clear()
        if drop_pending:
            self._upserts.clear()

    def insert_later(self, table: Table, values: dict[str, Any]) -> None:
        """INSERT ``values`` into ``table`` with the next flush (a row already there is skipped then)."""
        self._inserts.append((table, values))
        self._schedule()

    def upsert_later(self, table: Table, key: dict[str, Any], values: dict[str, Any]) -> None:
        """UPDATE-or-INSERT the row ``key`` of ``table`` with the next flush (the newest values win)."""
        self._check_open()
        self._upserts[(table.name, tuple(sorted(key.items())))] = (table, {**key, **values})
        self._schedule()

    def _check_open(self) -> None:
        if self.db.closed:
            raise RuntimeError("the store is closed")

    def _schedule(self) -> None:
        """Make sure a flush is due within WATCHER_FLUSH_S (called with something just queued)."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(WATCHER_FLUSH_S, self._flush_soon)

    def _flush_soon(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self.flush())
        self._tasks.add(task)
        task.add_done_callback(self._flush_done)

    def _flush_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("writing the watcher's samples and memos failed; retried with the next ones",
                        exc_info=task.exception())

    async def flush(self) -> None:
        """Write what is queued now, in one transaction (readers of these rows call this first)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # in order: a later flush never overtakes an earlier one
            inserts, self._inserts = self._inserts, []
            upserts, self._upserts = self._upserts, {}
            if not inserts and not upserts:
                return
            try:
                await self.db.run(self._write_batch, inserts, list(upserts.values()))
            except BaseException:
                # Keep them for the next flush (newer upserts of the same row, queued meanwhile, win).
                self._inserts[:0] = inserts
                self._upserts = {**upserts, **self._upserts}
                raise

    def _write_batch(self, inserts: list[tuple[Table, dict[str, Any]]],
                     upserts: list[tuple[Table, dict[str, Any]]]) -> None:
        try:
            with self.db.write() as conn:
                _insert_many(conn, inserts)
                _upsert_many(conn, upserts)
        except IntegrityError:
            # Another process stored a sample at the same moment (or inserted a row first): one at a time,
            # each in its own transaction, skipping what is already there.
            for table, values in inserts:
                insert_once(self.db, table, values)
            for table, row in upserts:
                key = {c.name: row[c.name] for c in table.primary_key.columns}
                upsert(self.db, table, key, {k: v for k, v in row.items() if k not in key})


def _insert_many(conn: Connection, inserts: list[tuple[Table, dict[str, Any]]]) -> None:
    # One statement per table, executed for many rows: a statement per row cost as much as the transaction
    # it saved.
    tables: dict[str, tuple[Table, list[dict[str, Any]]]] = {}
    for table, values in inserts:
        tables.setdefault(table.name, (table, []))[1].append(values)
    for table, rows in tables.values():
        conn.execute(insert(table), rows)


def _upsert_many(conn: Connection, upserts: list[tuple[Table, dict[str, Any]]]) -> None:
    groups: dict[tuple[str, tuple[str, ...]], tuple[Table, list[dict[str, Any]]]] = {}
    for table, row in upserts:
        groups.setdefault((table.name, tuple(row)), (table, []))[1].append(row)
    for (_name, columns), (table, rows) in groups.items():
        key_cols = [c.name for c in table.primary_key.columns]
        first = key_cols[0]
        there = {tuple(r) for r in conn.execute(
            select(*(table.c[k] for k in key_cols)).where(table.c[first].in_({r[first] for r in rows})))}
        old = [r for r in rows if tuple(r[k] for k in key_cols) in there]
        new = [r for r in rows if tuple(r[k] for k in key_cols) not in there]
        if old:
            value_cols = [c for c in columns if c not in key_cols]
            query = update(table).where(*(table.c[k] == bindparam(f"key_{k}") for k in key_cols))
            conn.execute(query.values({c: bindparam(c) for c in value_cols}),
                         [{**{f"key_{k}": r[k] for k in key_cols}, **{c: r[c] for c in value_cols}} for r in old])
        if new:
            conn.execute(insert(table), new)
