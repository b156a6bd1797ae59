"""The bot's durable state: snapshots, load history, audit log, locks, restart requests, follows, watches.

The records it returns live in :mod:`services.store.records` (re-exported here), its tables in
:mod:`services.store.schema`, their versions in ``services/store/migrations`` (Alembic).

One SQLAlchemy Core engine (synchronous); every public method is ``async`` and runs its database work in
a worker thread (``asyncio.to_thread``) so handlers never block the event loop. Tables are created on
first use. Any SQLAlchemy URL works (PostgreSQL for shared deployments); SQLite (the default, one file
in the state directory) is opened in WAL mode with a ``busy_timeout``, and every write transaction is a
``BEGIN IMMEDIATE`` one, so two bot processes (or replicas) may share the file safely.

Everything that must be correct when two processes race is a single atomic statement guarded by the
database: locks (conditional ``UPDATE`` / ``INSERT`` against a primary key), restart-request transitions
(compare-and-set ``UPDATE … WHERE state IN (…)``) and notice claims (``INSERT`` against a unique key).

All datetimes are timezone-aware UTC, in and out (naive datetimes are refused with ``ValueError``).
APScheduler's ``SQLAlchemyJobStore`` may live in the same database (:meth:`Store.jobstore_url`, table
:data:`JOBSTORE_TABLE`); the store's own tables are prefixed ``inferbot_``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Table,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from services.models import ServiceState
from services.store.records import (
    AWAITING_START,
    REQUEST_TRANSITIONS,
    AuditEntry,
    BenchRun,
    Follow,
    FollowReason,
    LoadOutcome,
    LoadRecord,
    LockRecord,
    MetricPoint,
    Notice,
    RequestState,
    RestartRecord,
    RestartRequest,
    SettingsSnapshot,
    SmokeCheck,
    WatchState,
)
from services.store.schema import (
    JOBSTORE_TABLE,
    SCHEMA_HEAD,
    VERSION_TABLE,
    audit_log,
    bench_runs,
    follows,
    home_views,
    load_phases,
    loads,
    locks,
    metric_samples,
    notices,
    requests,
    restarts,
    smoke_checks,
    snapshots,
    watches,
)

__all__ = [
    "JOBSTORE_TABLE",
    "REQUEST_TRANSITIONS",
    "AuditEntry",
    "BenchRun",
    "Follow",
    "LoadOutcome",
    "LoadRecord",
    "LockRecord",
    "MetricPoint",
    "Notice",
    "RequestState",
    "RestartRecord",
    "RestartRequest",
    "SettingsSnapshot",
    "SmokeCheck",
    "Store",
    "WatchState",
]

BUSY_TIMEOUT_S = 10.0
"""How long a SQLite connection waits for another process's write lock before giving up."""

P = ParamSpec("P")
T = TypeVar("T")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime, name: str) -> datetime:
    """``value`` in UTC; a naive datetime is a caller bug."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got {value!r}")
    return value.astimezone(UTC)


def _row(row: Row[Any]) -> dict[str, Any]:
    return dict(row._mapping)


def _follow(row: Row[Any]) -> Follow:
    data = _row(row)
    data["key"] = data.pop("follow_key")
    return Follow.model_validate(data)


# --------------------------------------------------------------------------------------------------
# The store


MEMO_S = 30.0
"""How long this process trusts what it last wrote or read for a service@node (snapshots, load history)."""


def _settings_digest(st: ServiceState) -> bytes:
    """What a snapshot row is about (the settings and whether they are seen ready now), as a short hash: the
    memo keeps one per service, and the settings' JSON (~2 KB a service) was 1 MB of the bot at 512 services."""
    text = json.dumps([st.unit, st.model, st.flags, st.env, st.version, st.state == "ready"], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


WATCHER_FLUSH_S = 1.0
"""How long the watcher's writes (metric samples, its baselines and the health watcher's memos) wait to be
written together: one transaction a second for the whole fleet instead of one per write (a lone INSERT costs
~0.4 ms of CPU, twenty in one transaction ~0.02 ms each)."""

SAMPLE_RAW_S = 24 * 3600
"""Metric samples are kept as taken for this long, then folded into buckets."""
SAMPLE_BUCKET_S = 300
"""The width of those buckets (5 minutes)."""
SAMPLE_KEEP_S = 7 * 24 * 3600
"""Metric samples older than this are dropped."""
COMPACT_EVERY_S = 600.0
"""How often (per process) recording a sample also folds and expires old ones."""


def _counter_rate(before: float | None, after: float | None, dt_s: float) -> float | None:
    # A counter that went down was reset (the server restarted): no honest rate for this interval.
    if before is None or after is None or dt_s <= 0 or after < before:
        return None
    return (after - before) / dt_s


def _rate(prev: Mapping[str, Any], values: dict[str, Any]) -> None:
    """Set the token rates of the sample ``values`` from the previous sample of the same process."""
    if values["process_start"] is None or prev["process_start"] is None or prev["process_start"] == values[
            "process_start"]:
        dt = (values["at"] - prev["at"]).total_seconds()
        values["generation_tps"] = _counter_rate(prev["generation_total"], values["generation_total"], dt)
        values["prompt_tps"] = _counter_rate(prev["prompt_total"], values["prompt_total"], dt)


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


class Store:
    """The bot's state database. Construct with a SQLAlchemy URL; no I/O happens until first use.

    A :class:`~sqlalchemy.engine.URL` object may carry a password (``services.store.db_url``): it is used to
    connect and never shown (:attr:`url` prints ``***``). The schema is upgraded with Alembic on first use
    (``services.store.migrate``); a schema newer than this code raises ``services.store.migrate.SchemaTooNew``.
    """

    def __init__(self, url: str | URL, *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        parsed = make_url(url)
        self._url_obj = parsed
        self._url = url if isinstance(url, str) and not parsed.password else parsed.render_as_string()
        self.schema_version: str | None = None  # set once the schema is checked and upgraded
        self._sqlite = parsed.get_backend_name() == "sqlite"
        database = parsed.database or ""
        self._memory = self._sqlite and (database in ("", ":memory:") or database.startswith("file::memory:"))
        # An in-memory SQLite database exists once per connection: share one and serialise access.
        self._serial: threading.Lock | None = threading.Lock() if self._memory else None
        self._busy_timeout_s = busy_timeout_s
        self._engine = self._make_engine()
        self._init_lock = threading.Lock()
        self._initialised = False
        self._closed = False
        # Every answer records what each service runs with; unchanged settings recorded by this process
        # a moment ago need no database trip (only last_seen_at would move). Keyed by service@node.
        # service@node → (settings digest, when, the snapshot's id, its last ready snapshot if it differs).
        self._snapshot_memo: dict[tuple[str, str], tuple[bytes, float, int, SettingsSnapshot | None]] = {}
        self._durations_memo: dict[tuple[str, str, int], tuple[float, list[float]]] = {}
        self._compacted_at = -COMPACT_EVERY_S  # monotonic time of the last fold of old samples
        self._phases_seen: set[tuple[str, str, str, str]] = set()
        # The watcher's own rows are written only by the scheduler leader: while this process leads, what it
        # last read or wrote is what the database holds (or will, after the next flush), so its looks need
        # no database trip. Cleared when leadership is gained or lost (forget_watcher_memos).
        self._watch_memo: dict[tuple[str, str], WatchState | None] = {}
        self.health_memos: dict[tuple[str, str], dict[str, Any] | None] = {}  # services.store.health_state's
        self._last_sample: dict[tuple[str, str], dict[str, Any]] = {}  # the newest sample recorded, per target
        # Writes waiting for the next flush: samples in order, upserts by (table, key) (the newest values win).
        self._pending_samples: list[dict[str, Any]] = []
        self._pending_upserts: dict[tuple[str, tuple[tuple[str, Any], ...]], tuple[Table, dict[str, Any]]] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flush_tasks: set[asyncio.Task[None]] = set()
        self._flush_lock: asyncio.Lock | None = None

    # ---- plumbing --------------------------------------------------------------------------------

    def _make_engine(self) -> Engine:
        if not self._sqlite:
            # pre-ping: a connection the server (or a failover) dropped is replaced, not handed out.
            # keepalives / tcp_user_timeout: a query to a database that went silent (partition) fails
            # within ~10 s instead of holding a worker thread for the kernel's retransmission timeout.
            return create_engine(self._url_obj, pool_pre_ping=True, pool_size=8, max_overflow=16,
                                 connect_args={"connect_timeout": 5, "application_name": "inferbot",
                                               "keepalives": 1, "keepalives_idle": 4, "keepalives_interval": 2,
                                               "keepalives_count": 2, "tcp_user_timeout": 8000})
        connect_args: dict[str, Any] = {"check_same_thread": False, "timeout": self._busy_timeout_s}
        if self._memory:
            engine = create_engine(self._url, connect_args=connect_args, poolclass=StaticPool)
        else:
            engine = create_engine(self._url, connect_args=connect_args, pool_size=8, max_overflow=16)
        busy_ms = int(self._busy_timeout_s * 1000)
        memory = self._memory

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
            # Let SQLAlchemy's "begin" event (below) emit BEGIN itself, instead of pysqlite's
            # implicit deferred BEGIN before the first write.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
                cursor.execute("PRAGMA foreign_keys = ON")
                if not memory:
                    _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"), self._busy_timeout_s)
                    cursor.execute("PRAGMA synchronous = NORMAL")
            finally:
                cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # Write transactions take SQLite's write lock up front: a deferred transaction that reads and
            # then writes can fail with SQLITE_BUSY (no waiting) when another process wrote in between.
            if conn.get_execution_options().get("inferbot_read_only"):
                conn.exec_driver_sql("BEGIN")
            else:
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    def _ensure_schema(self) -> None:
        if self._initialised:
            return
        with self._init_lock:
            if self._initialised:
                return
            if self._schema_is_head():
                # The usual case: nothing to migrate, so neither Alembic nor a write lock is needed.
                self.schema_version = SCHEMA_HEAD
                self._initialised = True
                return
            from services.store.migrate import upgrade  # the migrations import this module's tables

            with self._engine.begin() as conn:  # BEGIN IMMEDIATE on SQLite: one migrating process at a time
                self.schema_version = upgrade(conn, self.describe())
            self._initialised = True

    def check_schema(self) -> None:
        """Read the schema version now, in the calling thread, when that changes nothing (the usual case).

        For a store opened in the background (``bot.app.open_store_soon``): when the database is at
        :data:`SCHEMA_HEAD`, its first use needs no database trip to check. A SQLite file that does not
        exist yet is not created here, and anything but the head version (or an error reading it) is left
        to the first use, which upgrades or refuses exactly as it would have.
        """
        if self._sqlite and (self._memory or not os.path.exists(self._url_obj.database or "")):
            return
        with self._init_lock:
            if self._initialised or self._closed:
                return
            try:
                head = self._schema_is_head()
            except Exception:  # the first use meets it again, and reports it where it always did
                logging.getLogger("inferbot.store").debug("reading the schema version in advance failed",
                                                          exc_info=True)
                return
            if head:
                self.schema_version = SCHEMA_HEAD
                self._initialised = True

    def _schema_is_head(self) -> bool:
        """True when the database's schema version is :data:`SCHEMA_HEAD` (one read, no Alembic).

        Anything else (no version table yet, an older or a newer version, several rows) takes the
        Alembic path, which upgrades under the migration lock or refuses a newer schema, as before.
        A version read as head was committed by whoever migrated, so no lock is needed to trust it.
        """
        try:
            with self._engine.connect() as raw:
                conn = raw.execution_options(inferbot_read_only=True)
                with conn.begin():
                    found = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
        except (OperationalError, ProgrammingError):  # no version table: a new (or pre-Alembic) database
            return False
        return found == [SCHEMA_HEAD]

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on success."""
        with self._guard(), self._engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """A read-only transaction (deferred on SQLite, never waits for writers in WAL mode)."""
        with self._guard(), self._engine.connect() as raw:
            conn = raw.execution_options(inferbot_read_only=True)
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        if self._closed:
            raise RuntimeError("the store is closed")
        self._ensure_schema()
        if self._serial is None:
            yield
        else:
            with self._serial:
                yield

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def jobstore_url(self) -> str:
        """The database URL for APScheduler's ``SQLAlchemyJobStore`` (use table :data:`JOBSTORE_TABLE`).

        It holds the password, if any: hand it to SQLAlchemy only, never print it.
        """
        return self._url_obj.render_as_string(hide_password=False)

    @property
    def sqlalchemy_url(self) -> URL:
        """The URL to connect with (password included; its ``str`` hides it)."""
        return self._url_obj

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database: it exists in this process only."""
        return self._memory

    @property
    def is_postgres(self) -> bool:
        """True when the state lives in PostgreSQL (replicas possible), False for SQLite."""
        return self._url_obj.get_backend_name() == "postgresql"

    def describe(self) -> str:
        """Where the state lives, for people (never the password)."""
        from services.store.db_url import describe

        return describe(self._url_obj)

    async def prepare(self) -> str:
        """Connect, check and upgrade the schema now (instead of on first use); returns the schema version."""
        if self._closed:
            raise RuntimeError("the store is closed")
        await self._run(self._ensure_schema)
        assert self.schema_version is not None
        return self.schema_version

    async def schema_status(self) -> tuple[str | None, str]:
        """(the database's schema version or None, the newest this code knows), upgrading nothing."""
        from services.store.migrate import current_version, head_version

        def status() -> tuple[str | None, str]:
            with self._engine.connect() as conn:
                return current_version(conn), head_version()

        return await self._run(status)

    async def run_write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in a write transaction (``BEGIN IMMEDIATE`` on SQLite) in a worker thread."""
        def write() -> T:
            with self._write() as conn:
                return fn(conn)

        return await self._run(write)

    async def run_read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in a read-only transaction in a worker thread."""
        def read() -> T:
            with self._read() as conn:
                return fn(conn)

        return await self._run(read)

    @property
    def url(self) -> str:
        """The SQLAlchemy URL this store was opened with."""
        return self._url

    async def close(self) -> None:
        """Write what is pending, close all connections; the store can't be used afterwards."""
        if self._closed:
            return
        try:
            await self.flush_writes()
        finally:
            self._closed = True
            await asyncio.to_thread(self._engine.dispose)

    # ---- the watcher's batched writes ------------------------------------------------------------

    def _queue_write(self) -> None:
        """Make sure a flush is due within WATCHER_FLUSH_S (called with something just queued)."""
        if self._flush_timer is None:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(WATCHER_FLUSH_S, self._flush_soon)

    def _flush_soon(self) -> None:
        self._flush_timer = None
        task = asyncio.ensure_future(self.flush_writes())
        self._flush_tasks.add(task)
        task.add_done_callback(self._flush_done)

    def _flush_done(self, task: asyncio.Task[None]) -> None:
        self._flush_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logging.getLogger("inferbot.store").warning(
                "writing the watcher's samples and memos failed; retried with the next ones",
                exc_info=task.exception())

    async def queue_upsert(self, table: Table, key: dict[str, Any], values: dict[str, Any]) -> None:
        """UPDATE-or-INSERT the row ``key`` of ``table`` with the next flush (the newest values win)."""
        if self._closed:
            raise RuntimeError("the store is closed")
        self._pending_upserts[(table.name, tuple(sorted(key.items())))] = (table, {**key, **values})
        self._queue_write()

    async def flush_writes(self) -> None:
        """Write the queued samples and upserts now, in one transaction (readers of them call this first)."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._flush_lock is None:
            self._flush_lock = asyncio.Lock()
        async with self._flush_lock:  # in order: a later flush never overtakes an earlier one
            samples, self._pending_samples = self._pending_samples, []
            upserts, self._pending_upserts = self._pending_upserts, {}
            if not samples and not upserts:
                return
            try:
                await self._run(self._write_batch, samples, list(upserts.values()))
            except BaseException:
                # Keep them for the next flush (newer upserts of the same row, queued meanwhile, win).
                self._pending_samples[:0] = samples
                self._pending_upserts = {**upserts, **self._pending_upserts}
                raise

    def _write_batch(self, samples: list[dict[str, Any]], upserts: list[tuple[Table, dict[str, Any]]]) -> None:
        keys = {t.name: [c.name for c in t.primary_key.columns] for t, _ in upserts}
        # One statement per table and shape, executed for many rows: a statement per row cost as much as
        # the transaction it saved.
        groups: dict[tuple[str, tuple[str, ...]], tuple[Table, list[dict[str, Any]]]] = {}
        for table, row in upserts:
            groups.setdefault((table.name, tuple(row)), (table, []))[1].append(row)
        try:
            with self._write() as conn:
                if samples:
                    conn.execute(insert(metric_samples), samples)
                for (name, columns), (table, rows) in groups.items():
                    key_cols = keys[name]
                    first = key_cols[0]
                    there = {tuple(r) for r in conn.execute(
                        select(*(table.c[k] for k in key_cols)).where(table.c[first].in_({r[first] for r in rows})))}
                    old = [r for r in rows if tuple(r[k] for k in key_cols) in there]
                    new = [r for r in rows if tuple(r[k] for k in key_cols) not in there]
                    if old:
                        value_cols = [c for c in columns if c not in key_cols]
                        query = update(table).where(*(table.c[k] == bindparam(f"key_{k}") for k in key_cols))
                        conn.execute(query.values({c: bindparam(c) for c in value_cols}),
                                     [{**{f"key_{k}": r[k] for k in key_cols}, **{c: r[c] for c in value_cols}}
                                      for r in old])
                    if new:
                        conn.execute(insert(table), new)
        except IntegrityError:
            # Another process stored a sample at the same moment (or inserted a row first): one at a time,
            # each in its own transaction, skipping what is already there.
            for values in samples:
                try:
                    with self._write() as conn:
                        conn.execute(insert(metric_samples).values(**values))
                except IntegrityError:
                    pass
            for table, row in upserts:
                key = {k: row[k] for k in keys[table.name]}
                self._upsert(table, key, {k: v for k, v in row.items() if k not in key})

    def forget_watcher_memos(self, drop_pending: bool = False) -> None:
        """Forget what this process remembers of the watcher's rows (leadership changed hands).

        ``drop_pending``: also drop the queued baselines and memos (a replica that lost the lead must not
        write them over the new leader's); queued samples are kept (they are measurements, not state).
        """
        self._watch_memo.clear()
        self.health_memos.clear()
        self._last_sample.clear()
        if drop_pending:
            self._pending_upserts.clear()

    # ---- snapshots -------------------------------------------------------------------------------

    async def record_snapshot(self, state: ServiceState, now: datetime) -> SettingsSnapshot:
        """Remember the settings ``state`` runs with; returns the snapshot row they belong to.

        A new row is stored only when (model, flags, env, version) differ from the newest snapshot of
        that service@node; otherwise the newest row's ``last_seen_at`` (and state/unit) is bumped. A
        "ready" state marks the row ``was_ready``. ``env`` must already be redacted: it is stored as given.
        """
        return await self._run(self._record_snapshot, state, _aware(now, "now"))

    def _record_snapshot(self, st: ServiceState, now: datetime) -> SettingsSnapshot:
        snap_id = self._record_snapshot_id(st, now)
        with self._read() as conn:
            row = conn.execute(select(snapshots).where(snapshots.c.id == snap_id)).one()
        return SettingsSnapshot.model_validate(_row(row))

    def _record_snapshot_id(self, st: ServiceState, now: datetime) -> int:
        flags = dict(st.flags)
        env = dict(st.env)
        ready = st.state == "ready"
        with self._write() as conn:
            newest = conn.execute(
                select(snapshots).where(snapshots.c.service == st.service, snapshots.c.node == st.node)
                .order_by(snapshots.c.id.desc()).limit(1)
            ).first()
            if newest is not None and (
                newest.model == st.model and newest.version == st.version
                and newest.flags == flags and newest.env == env
            ):
                values: dict[str, Any] = {"last_seen_at": max(newest.last_seen_at, now), "state": st.state,
                                          "unit": st.unit}
                if ready:
                    values["was_ready"] = True
                    values["last_ready_at"] = max(newest.last_ready_at or now, now)
                conn.execute(update(snapshots).where(snapshots.c.id == newest.id).values(**values))
                snap_id = int(newest.id)
            else:
                result = conn.execute(insert(snapshots).values(
                    service=st.service, node=st.node, unit=st.unit, first_seen_at=now, last_seen_at=now,
                    model=st.model, flags=flags, env=env, version=st.version, state=st.state,
                    was_ready=ready, last_ready_at=now if ready else None,
                ))
                assert result.inserted_primary_key is not None
                snap_id = int(result.inserted_primary_key[0])
        return snap_id

    async def record_snapshots(
        self, states: list[ServiceState], now: datetime
    ) -> list[tuple[int, SettingsSnapshot | None]]:
        """``record_snapshot`` for each state: the id of its snapshot, and the last ready snapshot of those
        not ready now (None for the ready ones, or when there is none).

        One trip to the database thread for all the given states (an answer records each batch of nodes as it
        comes, ``handlers.live.service_cards``; the bot records on every question). Only ids are
        kept and returned, not the snapshots: the caller compares ids, and at 512 services the snapshots were
        ~5 MB of the answer's peak (read back, decoded, validated, remembered).
        """
        now = _aware(now, "now")
        mono = time.monotonic()
        out: list[tuple[int, SettingsSnapshot | None] | None] = [None] * len(states)
        todo: list[tuple[int, ServiceState, bytes]] = []
        for i, st in enumerate(states):
            digest = _settings_digest(st)
            memo = self._snapshot_memo.get((st.service, st.node))
            if memo is not None and memo[0] == digest and mono - memo[1] < MEMO_S:
                out[i] = (memo[2], memo[3])
            else:
                todo.append((i, st, digest))
        if todo:
            recorded = await self._run(self._record_snapshots, [st for _, st, _ in todo], now)
            for (i, st, digest), result in zip(todo, recorded, strict=True):
                out[i] = result
                self._snapshot_memo[(st.service, st.node)] = (digest, mono, result[0], result[1])
        return [r for r in out if r is not None]

    def _record_snapshots(
        self, states: list[ServiceState], now: datetime
    ) -> list[tuple[int, SettingsSnapshot | None]]:
        out: list[tuple[int, SettingsSnapshot | None]] = []
        for st in states:
            snap = self._record_snapshot_id(st, now)
            ready = None if st.state == "ready" else self._last_ready_snapshot(st.service, st.node)
            out.append((snap, ready))
        return out

    async def load_durations_many(self, keys: list[tuple[str, str]], limit: int = 10) -> list[list[float]]:
        """``load_durations`` for several (service, node) pairs in one trip to the database thread.

        Remembered for a short while: load history only grows when a load ends.
        """
        mono = time.monotonic()
        missing = [(s, n) for s, n in keys
                   if mono - self._durations_memo.get((s, n, limit), (-MEMO_S, []))[0] >= MEMO_S]
        if missing:
            found = await self._run(lambda: [self._load_durations(s, n, limit) for s, n in missing])
            for (s, n), durations in zip(missing, found, strict=True):
                self._durations_memo[(s, n, limit)] = (mono, durations)
        return [list(self._durations_memo[(s, n, limit)][1]) for s, n in keys]

    async def mark_ready_snapshot(self, service: str, node: str, at: datetime) -> bool:
        """Mark the newest snapshot of service@node as seen ready (False when there is none)."""
        return await self._run(self._mark_ready, service, node, _aware(at, "at"))

    def _mark_ready(self, service: str, node: str, at: datetime) -> bool:
        with self._write() as conn:
            newest = select(func.max(snapshots.c.id)).where(
                snapshots.c.service == service, snapshots.c.node == node).scalar_subquery()
            result = conn.execute(update(snapshots).where(snapshots.c.id == newest)
                                  .values(was_ready=True, last_ready_at=at))
            return result.rowcount == 1

    async def latest_snapshots(self, service: str, node: str, limit: int = 2) -> list[SettingsSnapshot]:
        """The newest ``limit`` different snapshots of service@node, newest first."""
        return await self._run(self._latest_snapshots, service, node, limit)

    def _latest_snapshots(self, service: str, node: str, limit: int) -> list[SettingsSnapshot]:
        with self._read() as conn:
            rows = conn.execute(
                select(snapshots).where(snapshots.c.service == service, snapshots.c.node == node)
                .order_by(snapshots.c.id.desc()).limit(limit)
            ).all()
        return [SettingsSnapshot.model_validate(_row(r)) for r in rows]

    async def last_ready_snapshot(self, service: str, node: str) -> SettingsSnapshot | None:
        """The newest snapshot of service@node whose settings were once seen ready, if any."""
        return await self._run(self._last_ready_snapshot, service, node)

    def _last_ready_snapshot(self, service: str, node: str) -> SettingsSnapshot | None:
        with self._read() as conn:
            row = conn.execute(
                select(snapshots).where(snapshots.c.service == service, snapshots.c.node == node,
                                        snapshots.c.was_ready.is_(True))
                .order_by(snapshots.c.id.desc()).limit(1)
            ).first()
        return None if row is None else SettingsSnapshot.model_validate(_row(row))

    # ---- load history ----------------------------------------------------------------------------

    async def record_load(
        self,
        service: str,
        node: str,
        invocation_id: str,
        started_at: datetime,
        ready_at: datetime | None,
        outcome: LoadOutcome,
        duration_s: float,
    ) -> bool:
        """Record how one load ended; idempotent per (service, node, invocation_id).

        Recording the same load again overwrites it with the new values; returns True when the load was
        not recorded before. An empty ``invocation_id`` is replaced by ``"start:<started_at ISO>"``.
        """
        if outcome not in ("ready", "failed", "timeout"):
            raise ValueError(f"unknown load outcome {outcome!r}")
        self._durations_memo = {k: v for k, v in self._durations_memo.items() if k[:2] != (service, node)}
        started_at = _aware(started_at, "started_at")
        key = invocation_id or f"start:{started_at.isoformat()}"
        values: dict[str, Any] = {
            "started_at": started_at, "ready_at": None if ready_at is None else _aware(ready_at, "ready_at"),
            "outcome": outcome, "duration_s": float(duration_s), "recorded_at": _utcnow(),
        }
        return await self._run(self._upsert, loads,
                               {"service": service, "node": node, "invocation_id": key}, values)

    async def load_durations(self, service: str, node: str, limit: int = 10) -> list[float]:
        """Durations in seconds of the last ``limit`` successful loads of service@node, newest first."""
        return await self._run(self._load_durations, service, node, limit)

    def _load_durations(self, service: str, node: str, limit: int) -> list[float]:
        with self._read() as conn:
            rows = conn.execute(
                select(loads.c.duration_s)
                .where(loads.c.service == service, loads.c.node == node, loads.c.outcome == "ready")
                .order_by(loads.c.started_at.desc(), loads.c.id.desc()).limit(limit)
            ).scalars().all()
        return [float(r) for r in rows]

    async def last_load(self, service: str, node: str) -> LoadRecord | None:
        """The newest recorded load of service@node (any outcome), if any."""
        return await self._run(self._last_load, service, node)

    def _last_load(self, service: str, node: str) -> LoadRecord | None:
        row = self._newest(loads, service, node, loads.c.started_at)
        return None if row is None else LoadRecord.model_validate(_row(row))

    def _newest(self, table: Table, service: str, node: str, when: Any) -> Any:
        """The newest row of ``table`` for service@node, by ``when`` then id (None when there is none)."""
        with self._read() as conn:
            return conn.execute(
                select(table).where(table.c.service == service, table.c.node == node)
                .order_by(when.desc(), table.c.id.desc()).limit(1)
            ).first()

    # ---- audit -----------------------------------------------------------------------------------

    async def audit(
        self,
        event: str,
        who: str | None,
        where: str | None,
        service: str | None,
        node: str | None,
        detail: str,
        at: datetime | None = None,
        request_id: str | None = None,
    ) -> AuditEntry:
        """Append one entry to the audit log (``at`` defaults to now) and return it."""
        values = {"at": _utcnow() if at is None else _aware(at, "at"), "event": event, "who": who,
                  "where": where, "service": service, "node": node, "detail": detail,
                  "request_id": request_id}
        return await self._run(self._audit, values)

    def _audit(self, values: dict[str, Any]) -> AuditEntry:
        with self._write() as conn:
            result = conn.execute(insert(audit_log).values(**values))
            assert result.inserted_primary_key is not None
            entry_id = int(result.inserted_primary_key[0])
        return AuditEntry.model_validate({"id": entry_id, **values})

    async def recent_audit(self, service: str | None = None, limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` audit entries (of ``service`` only, when given), newest first."""
        return await self._run(self._recent_audit, service, limit)

    def _recent_audit(self, service: str | None, limit: int) -> list[AuditEntry]:
        query = select(audit_log)
        if service is not None:
            query = query.where(audit_log.c.service == service)
        with self._read() as conn:
            rows = conn.execute(query.order_by(audit_log.c.at.desc(), audit_log.c.id.desc())
                                .limit(limit)).all()
        return [AuditEntry.model_validate(_row(r)) for r in rows]

    # ---- locks -----------------------------------------------------------------------------------

    async def acquire_lock(self, name: str, owner: str, ttl_s: float, now: datetime) -> bool:
        """Take lock ``name`` for ``owner`` until ``now + ttl_s``; True when taken.

        Atomic across processes and replicas: succeeds when the lock is free, expired
        (``expires_at <= now``) or already held by ``owner`` (which renews it).
        """
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        now = _aware(now, "now")
        expires = datetime.fromtimestamp(now.timestamp() + ttl_s, UTC)
        return await self._run(self._acquire_lock, name, owner, now, expires)

    def _acquire_lock(self, name: str, owner: str, now: datetime, expires: datetime) -> bool:
        # 1. take over an expired lock (or renew our own): one conditional UPDATE, row-locked.
        with self._write() as conn:
            taken = conn.execute(
                update(locks).where(locks.c.name == name,
                                    (locks.c.expires_at <= now) | (locks.c.owner == owner))
                .values(owner=owner, acquired_at=now, expires_at=expires)
            ).rowcount
        if taken == 1:
            return True
        # 2. no row (or a live one held by someone else): INSERT; the primary key decides the race.
        try:
            with self._write() as conn:
                conn.execute(insert(locks).values(name=name, owner=owner, acquired_at=now, expires_at=expires))
        except IntegrityError:
            return False
        return True

    async def release_lock(self, name: str, owner: str) -> bool:
        """Release lock ``name`` if ``owner`` holds it; True when something was released."""
        return await self._run(self._release_lock, name, owner)

    def _release_lock(self, name: str, owner: str) -> bool:
        with self._write() as conn:
            return conn.execute(delete(locks).where(locks.c.name == name, locks.c.owner == owner)).rowcount == 1

    async def lock_holder(self, name: str, now: datetime) -> str | None:
        """Who holds lock ``name`` at ``now`` (None when free or expired)."""
        return await self._run(self._lock_holder, name, _aware(now, "now"))

    def _lock_holder(self, name: str, now: datetime) -> str | None:
        with self._read() as conn:
            owner = conn.execute(
                select(locks.c.owner).where(locks.c.name == name, locks.c.expires_at > now)
            ).scalar_one_or_none()
        return None if owner is None else str(owner)

    async def get_lock(self, name: str, now: datetime) -> LockRecord | None:
        """Lock ``name`` with its owner and times, if held at ``now`` (None when free or expired)."""
        return await self._run(self._get_lock, name, _aware(now, "now"))

    def _get_lock(self, name: str, now: datetime) -> LockRecord | None:
        with self._read() as conn:
            row = conn.execute(select(locks).where(locks.c.name == name, locks.c.expires_at > now)).first()
        return None if row is None else LockRecord.model_validate(_row(row))

    async def clear_lock(self, name: str, owner: str | None = None) -> LockRecord | None:
        """Remove lock ``name`` whoever holds it (or only if ``owner`` does); returns what was removed."""
        return await self._run(self._clear_lock, name, owner)

    def _clear_lock(self, name: str, owner: str | None) -> LockRecord | None:
        with self._write() as conn:
            row = conn.execute(select(locks).where(locks.c.name == name)).first()
            if row is None or (owner is not None and row.owner != owner):
                return None
            conn.execute(delete(locks).where(locks.c.name == name, locks.c.owner == row.owner))
        return LockRecord.model_validate(_row(row))

    # ---- restart requests ------------------------------------------------------------------------

    async def create_request(
        self,
        request_id: str,
        service: str,
        node: str,
        unit: str,
        requested_by: str | None,
        channel: str | None,
        thread_ts: str | None,
        created_at: datetime,
        expires_at: datetime,
        force: bool,
        message_ts: str | None = None,
    ) -> bool:
        """Store a new restart request in state ``pending``; False when ``request_id`` already exists."""
        values = {
            "id": request_id, "service": service, "node": node, "unit": unit, "requested_by": requested_by,
            "channel": channel, "thread_ts": thread_ts, "message_channel": channel if message_ts else None,
            "message_ts": message_ts, "created_at": _aware(created_at, "created_at"),
            "expires_at": _aware(expires_at, "expires_at"), "force": bool(force), "state": "pending",
        }
        return await self._run(self._insert_once, requests, values)

    def _insert_once(self, table: Table, values: dict[str, Any]) -> bool:
        try:
            with self._write() as conn:
                conn.execute(insert(table).values(**values))
        except IntegrityError:
            return False
        return True

    async def get_request(self, request_id: str) -> RestartRequest | None:
        """The restart request ``request_id``, if it exists."""
        return await self._run(self._get_request, request_id)

    def _get_request(self, request_id: str) -> RestartRequest | None:
        with self._read() as conn:
            row = conn.execute(select(requests).where(requests.c.id == request_id)).first()
        return None if row is None else RestartRequest.model_validate(_row(row))

    async def transition_request(
        self, request_id: str, from_states: AbstractSet[str], to_state: str, actor: str | None, at: datetime
    ) -> bool:
        """Move a request from one of ``from_states`` to ``to_state``: an atomic compare-and-set.

        True for exactly one caller however many race (two clicks, two replicas, a redelivered click).
        A move to ``confirmed`` also requires the request not to have expired (``at < expires_at``).
        Every (from, to) pair must be allowed by :data:`REQUEST_TRANSITIONS` (else ``ValueError``).
        """
        if to_state not in REQUEST_TRANSITIONS:
            raise ValueError(f"unknown request state {to_state!r}")
        if not from_states:
            raise ValueError("from_states is empty")
        for state in from_states:
            if to_state not in REQUEST_TRANSITIONS.get(state, frozenset()):
                raise ValueError(f"a request can't go from {state!r} to {to_state!r}")
        return await self._run(self._transition, request_id, sorted(from_states), to_state, actor,
                               _aware(at, "at"))

    def _transition(self, request_id: str, from_states: Sequence[str], to_state: str, actor: str | None,
                    at: datetime) -> bool:
        values: dict[str, Any] = {"state": to_state, "state_by": actor, "state_at": at}
        query = update(requests).where(requests.c.id == request_id, requests.c.state.in_(from_states))
        if to_state == "confirmed":
            values.update(confirmed_by=actor, confirmed_at=at)
            query = query.where(requests.c.expires_at > at)
        with self._write() as conn:
            return conn.execute(query.values(**values)).rowcount == 1

    async def set_request_message(self, request_id: str, channel: str, ts: str) -> bool:
        """Remember where the confirmation message of a request is (to rewrite it later)."""
        return await self._run(self._set_values, requests, {"id": request_id},
                               {"message_channel": channel, "message_ts": ts})

    def _set_values(self, table: Table, key: dict[str, Any], values: dict[str, Any]) -> bool:
        with self._write() as conn:
            query = update(table).where(*(table.c[k] == v for k, v in key.items())).values(**values)
            return conn.execute(query).rowcount == 1

    async def open_requests(self) -> list[RestartRequest]:
        """Requests not yet in a final state (pending, confirmed, running), oldest first: for start-up."""
        return await self._run(self._open_requests)

    def _open_requests(self) -> list[RestartRequest]:
        with self._read() as conn:
            rows = conn.execute(
                select(requests).where(requests.c.state.in_(("pending", "confirmed", "running")))
                .order_by(requests.c.created_at, requests.c.id)
            ).all()
        return [RestartRequest.model_validate(_row(r)) for r in rows]

    # ---- cooldowns -------------------------------------------------------------------------------

    async def record_restart(self, service: str, node: str, at: datetime, by: str | None, forced: bool) -> None:
        """Remember that service@node was restarted (by inferbot) at ``at``."""
        values = {"service": service, "node": node, "at": _aware(at, "at"), "by": by, "forced": bool(forced)}
        await self._run(self._insert_once, restarts, values)

    async def last_restart(self, service: str, node: str) -> datetime | None:
        """When inferbot last restarted service@node (from :meth:`record_restart`), if ever."""
        record = await self.last_restart_record(service, node)
        return None if record is None else record.at

    async def last_restart_record(self, service: str, node: str) -> RestartRecord | None:
        """The newest :meth:`record_restart` entry of service@node, if any."""
        return await self._run(self._last_restart, service, node)

    def _last_restart(self, service: str, node: str) -> RestartRecord | None:
        row = self._newest(restarts, service, node, restarts.c.at)
        return None if row is None else RestartRecord.model_validate(_row(row))

    # ---- follows and exactly-once notices --------------------------------------------------------

    async def upsert_follow(
        self,
        key: str,
        service: str,
        node: str,
        unit: str,
        invocation_id: str | None,
        started_at: datetime,
        reason: FollowReason,
        thread_channel: str | None = None,
        thread_ts: str | None = None,
        progress_message_ts: str | None = None,
        request_id: str | None = None,
    ) -> Follow:
        """Create or update the follow ``key`` (every field is overwritten) and return it.

        An existing follow that gets a *different* non-empty invocation id is a new load: it becomes
        active again. One whose invocation id was unknown (None) and now is known keeps its state, and
        notice claims made meanwhile are carried over to the new invocation id.
        """
        if reason not in ("restart", "unplanned"):
            raise ValueError(f"unknown follow reason {reason!r}")
        values: dict[str, Any] = {
            "service": service, "node": node, "unit": unit, "invocation_id": invocation_id or None,
            "started_at": _aware(started_at, "started_at"), "reason": reason,
            "thread_channel": thread_channel, "thread_ts": thread_ts,
            "progress_message_ts": progress_message_ts, "request_id": request_id,
        }
        return await self._run(self._upsert_follow, key, values)

    def _upsert_follow(self, key: str, values: dict[str, Any]) -> Follow:
        now = _utcnow()
        for attempt in range(2):
            try:
                with self._write() as conn:
                    old = conn.execute(select(follows).where(follows.c.follow_key == key)).first()
                    if old is None:
                        conn.execute(insert(follows).values(follow_key=key, updated_at=now, **values))
                    else:
                        row = dict(values, updated_at=now)
                        new_inv = values["invocation_id"]
                        if old.invocation_id and new_inv and new_inv != old.invocation_id:
                            row.update(finished_at=None, outcome=None)  # a new load under the same key
                            if old.invocation_id.startswith(AWAITING_START) \
                                    and not new_inv.startswith(AWAITING_START):
                                # The awaited start arrived: the same load. Whoever polled meanwhile may have
                                # posted its progress message; its claim and ts stay with the load, or the
                                # next poll would post a second one (two replicas, or the confirming one
                                # still running the command while the leader already follows).
                                conn.execute(update(notices).where(notices.c.follow_key == key,
                                                                   notices.c.invocation_id == old.invocation_id)
                                             .values(invocation_id=new_inv))
                                if row["progress_message_ts"] is None:
                                    row["progress_message_ts"] = old.progress_message_ts
                        elif old.invocation_id and not new_inv:
                            row["invocation_id"] = old.invocation_id  # never forget a known invocation
                        elif not old.invocation_id and new_inv:
                            conn.execute(update(notices).where(notices.c.follow_key == key,
                                                               notices.c.invocation_id == "")
                                         .values(invocation_id=new_inv))
                        conn.execute(update(follows).where(follows.c.follow_key == key).values(**row))
                    result = conn.execute(select(follows).where(follows.c.follow_key == key)).one()
                return _follow(result)
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def set_follow_message(self, key: str, progress_message_ts: str) -> bool:
        """Remember the ts of the follow's progress message (the one message kept updated)."""
        return await self._run(self._set_values, follows, {"follow_key": key},
                               {"progress_message_ts": progress_message_ts, "updated_at": _utcnow()})

    async def get_follow(self, key: str) -> Follow | None:
        """The follow ``key`` (active or finished), if any."""
        return await self._run(self._get_follow, key)

    def _get_follow(self, key: str) -> Follow | None:
        with self._read() as conn:
            row = conn.execute(select(follows).where(follows.c.follow_key == key)).first()
        return None if row is None else _follow(row)

    async def active_follows(self) -> list[Follow]:
        """Follows not finished yet, oldest first: the loads to carry on with at start-up."""
        return await self._run(self._active_follows)

    def _active_follows(self) -> list[Follow]:
        with self._read() as conn:
            rows = conn.execute(select(follows).where(follows.c.finished_at.is_(None))
                                .order_by(follows.c.started_at, follows.c.follow_key)).all()
        return [_follow(r) for r in rows]

    async def finish_follow(self, key: str, outcome: str, at: datetime | None = None) -> bool:
        """Mark the follow finished with ``outcome``; True only for the call that finished it."""
        at = _utcnow() if at is None else _aware(at, "at")
        return await self._run(self._finish_follow, key, outcome, at)

    def _finish_follow(self, key: str, outcome: str, at: datetime) -> bool:
        with self._write() as conn:
            return conn.execute(
                update(follows).where(follows.c.follow_key == key, follows.c.finished_at.is_(None))
                .values(finished_at=at, outcome=outcome, updated_at=at)
            ).rowcount == 1

    async def claim_notice(self, follow_key: str, place: str) -> bool:
        """Claim the right to post the final notice of the follow's current load in ``place``.

        True exactly once per (follow, place, invocation id), across processes. Post only after a True;
        then :meth:`mark_notice_sent`, or :meth:`release_notice_claim` when posting failed.
        """
        return await self._run(self._claim_notice, follow_key, place)

    def _claim_notice(self, follow_key: str, place: str) -> bool:
        try:
            with self._write() as conn:
                inv = self._invocation(conn, follow_key)
                conn.execute(insert(notices).values(follow_key=follow_key, place=place, invocation_id=inv,
                                                    claimed_at=_utcnow()))
        except IntegrityError:
            return False
        return True

    @staticmethod
    def _invocation(conn: Connection, follow_key: str) -> str:
        inv = conn.execute(select(follows.c.invocation_id).where(follows.c.follow_key == follow_key)
                           ).scalar_one_or_none()
        return str(inv) if inv else ""

    async def mark_notice_sent(self, follow_key: str, place: str, ts: str | None,
                               at: datetime | None = None) -> bool:
        """Record that the claimed notice was posted (``ts``: the Slack message ts)."""
        at = _utcnow() if at is None else _aware(at, "at")
        return await self._run(self._mark_notice_sent, follow_key, place, ts, at)

    def _mark_notice_sent(self, follow_key: str, place: str, ts: str | None, at: datetime) -> bool:
        with self._write() as conn:
            inv = self._invocation(conn, follow_key)
            return conn.execute(
                update(notices).where(notices.c.follow_key == follow_key, notices.c.place == place,
                                      notices.c.invocation_id == inv)
                .values(sent_at=at, ts=ts)
            ).rowcount == 1

    async def notice_sent(self, follow_key: str, place: str) -> bool:
        """True when the notice of the follow's current load was posted in ``place``."""
        notice = await self.get_notice(follow_key, place)
        return notice is not None and notice.sent_at is not None

    async def get_notice(self, follow_key: str, place: str) -> Notice | None:
        """The claim of the follow's current-load notice in ``place`` (claimed, maybe not sent), if any."""
        return await self._run(self._get_notice, follow_key, place)

    def _get_notice(self, follow_key: str, place: str) -> Notice | None:
        with self._read() as conn:
            inv = self._invocation(conn, follow_key)
            row = conn.execute(select(notices).where(notices.c.follow_key == follow_key,
                                                     notices.c.place == place,
                                                     notices.c.invocation_id == inv)).first()
        return None if row is None else Notice.model_validate(_row(row))

    async def release_notice_claim(self, follow_key: str, place: str) -> bool:
        """Give up an unsent claim (posting failed) so a retry may claim again; a sent one stays."""
        return await self._run(self._release_notice, follow_key, place)

    def _release_notice(self, follow_key: str, place: str) -> bool:
        with self._write() as conn:
            inv = self._invocation(conn, follow_key)
            return conn.execute(
                delete(notices).where(notices.c.follow_key == follow_key, notices.c.place == place,
                                      notices.c.invocation_id == inv, notices.c.sent_at.is_(None))
            ).rowcount == 1

    # ---- watcher baseline ------------------------------------------------------------------------

    async def get_watch(self, service: str, node: str) -> WatchState | None:
        """What the watcher saw last for service@node, if anything (after the first read: from memory)."""
        key = (service, node)
        if key in self._watch_memo:
            return self._watch_memo[key]
        found = await self._run(self._get_watch, service, node)
        self._watch_memo.setdefault(key, found)
        return self._watch_memo[key]

    def _get_watch(self, service: str, node: str) -> WatchState | None:
        with self._read() as conn:
            row = conn.execute(select(watches).where(watches.c.service == service,
                                                     watches.c.node == node)).first()
        return None if row is None else WatchState.model_validate(_row(row))

    async def set_watch(self, service: str, node: str, main_pid: int, started_at: datetime | None,
                        n_restarts: int, active_state: str) -> None:
        """Replace the watcher's baseline for service@node (read back at once; written with the next flush, or
        now when the unit changed)."""
        values = {"main_pid": int(main_pid),
                  "started_at": None if started_at is None else _aware(started_at, "started_at"),
                  "n_restarts": int(n_restarts), "active_state": active_state, "updated_at": _utcnow()}
        key = {"service": service, "node": node}
        before = self._watch_memo.get((service, node))
        await self.queue_upsert(watches, key, values)
        self._watch_memo[(service, node)] = WatchState(**key, **values)
        if before is not None and (before.main_pid, before.n_restarts, before.active_state) != \
                (values["main_pid"], values["n_restarts"], values["active_state"]):
            # A restart or a state change: written now, so a leader that dies within the batching second
            # cannot hand its successor a baseline from before the restart it already reported.
            await self.flush_writes()

    # ---- App Home dashboards ---------------------------------------------------------------------

    async def home_opened(self, user_id: str, at: datetime) -> None:
        """Remember that ``user_id`` opened the App Home tab at ``at`` (their dashboard is now open)."""
        values = {"opened_at": _aware(at, "at"), "dirty": True}
        await self._run(self._upsert, home_views, {"user_id": user_id}, values)

    async def home_mark_dirty(self, opened_since: datetime) -> int:
        """Mark every dashboard opened since ``opened_since`` as stale; returns how many."""
        since = _aware(opened_since, "opened_since")
        return await self._run(self._home_mark_dirty, since)

    def _home_mark_dirty(self, since: datetime) -> int:
        with self._write() as conn:
            return int(conn.execute(update(home_views).where(home_views.c.opened_at >= since)
                                    .values(dirty=True)).rowcount)

    async def home_due(self, now: datetime, min_interval_s: float, opened_since: datetime) -> list[str]:
        """Users whose open dashboard is stale and may be republished now (paced to ``min_interval_s``)."""
        return await self._run(self._home_due, _aware(now, "now"), min_interval_s,
                               _aware(opened_since, "opened_since"))

    def _home_due(self, now: datetime, min_interval_s: float, since: datetime) -> list[str]:
        cutoff = now - timedelta(seconds=min_interval_s)
        with self._read() as conn:
            rows = conn.execute(select(home_views.c.user_id).where(
                home_views.c.dirty.is_(True), home_views.c.opened_at >= since,
                or_(home_views.c.published_at.is_(None), home_views.c.published_at <= cutoff),
            ).order_by(home_views.c.user_id)).all()
        return [str(r.user_id) for r in rows]

    async def home_claim_publish(self, user_id: str, now: datetime, min_interval_s: float,
                                 force: bool = False) -> bool:
        """Claim the next publish of ``user_id``'s dashboard: True at most once per ``min_interval_s``.

        One atomic ``UPDATE``, so two replicas (or two changes at once) never both publish within the
        interval; ``force`` (the person opened the tab or pressed Refresh) skips the pacing.
        """
        return await self._run(self._home_claim, user_id, _aware(now, "now"), min_interval_s, force)

    def _home_claim(self, user_id: str, now: datetime, min_interval_s: float, force: bool) -> bool:
        cutoff = now - timedelta(seconds=min_interval_s)
        query = update(home_views).where(home_views.c.user_id == user_id)
        if not force:
            query = query.where(or_(home_views.c.published_at.is_(None), home_views.c.published_at <= cutoff))
        with self._write() as conn:
            return conn.execute(query.values(published_at=now, dirty=False)).rowcount == 1

    async def home_publish_failed(self, user_id: str) -> None:
        """The claimed publish did not reach Slack: stale again, and due on the next change."""
        await self._run(self._set_values, home_views, {"user_id": user_id}, {"dirty": True, "published_at": None})

    async def last_restarts(self, events: AbstractSet[str]) -> dict[tuple[str, str], AuditEntry]:
        """The newest audit entry among ``events`` per (service, node): "last restart, when and by whom"."""
        return await self._run(self._last_restarts, frozenset(events))

    def _last_restarts(self, events: frozenset[str]) -> dict[tuple[str, str], AuditEntry]:
        newest = (select(audit_log.c.service, audit_log.c.node, func.max(audit_log.c.id).label("id"))
                  .where(audit_log.c.event.in_(sorted(events)), audit_log.c.service.is_not(None),
                         audit_log.c.node.is_not(None))
                  .group_by(audit_log.c.service, audit_log.c.node).subquery())
        with self._read() as conn:
            rows = conn.execute(select(audit_log).join(newest, audit_log.c.id == newest.c.id)).all()
        out: dict[tuple[str, str], AuditEntry] = {}
        for r in rows:
            entry = AuditEntry.model_validate(_row(r))
            out[(str(entry.service), str(entry.node))] = entry
        return out

    # ---- metric samples (charts) -----------------------------------------------------------------

    async def record_metric_sample(self, service: str, node: str, at: datetime, *,
                                   generation_total: float | None, prompt_total: float | None,
                                   running: float | None, waiting: float | None,
                                   kv_cache_usage: float | None,
                                   process_start: datetime | None = None) -> MetricPoint | None:
        """Store one ``/metrics`` sample of service@node taken at ``at``; returns the stored point.

        Token rates come from the counters' growth since the previous sample of the same process: a new
        ``process_start`` or a counter that went down (the server restarted in between) gives no rate
        rather than a wrong one. Returns None when a sample at exactly ``at`` is already stored. Now and
        then (every :data:`COMPACT_EVERY_S`) older samples are downsampled and expired.
        """
        values: dict[str, Any] = {
            "service": service, "node": node, "at": _aware(at, "at"), "resolution_s": 0,
            "generation_total": generation_total, "prompt_total": prompt_total, "running": running,
            "waiting": waiting, "kv_cache_usage": kv_cache_usage,
            "process_start": None if process_start is None else _aware(process_start, "process_start"),
            "generation_tps": None, "prompt_tps": None,  # set from the previous sample, if it is of this process
        }
        last = self._last_sample.get((service, node))
        if last is not None and values["at"] > last["at"]:
            # The previous sample is the one this process recorded last: rate it here, write it with the
            # next flush (the watcher records one per ready service per look).
            _rate(last, values)
            self._pending_samples.append(values)
            self._queue_write()
            point: MetricPoint | None = MetricPoint.model_validate(values)
        elif last is not None and values["at"] == last["at"]:
            point = None  # already recorded (the database's unique key would refuse it)
        else:
            await self.flush_writes()  # the database answers: everything recorded so far is in it
            point = await self._run(self._record_metric_sample, values)
        if point is not None and (last is None or values["at"] > last["at"]):
            self._last_sample[(service, node)] = values
        mono = time.monotonic()
        if mono - self._compacted_at >= COMPACT_EVERY_S:
            self._compacted_at = mono
            await self.compact_metric_samples(values["at"])
        return point

    def _record_metric_sample(self, values: dict[str, Any]) -> MetricPoint | None:
        try:
            with self._write() as conn:
                prev = conn.execute(
                    select(metric_samples).where(metric_samples.c.service == values["service"],
                                                 metric_samples.c.node == values["node"],
                                                 metric_samples.c.at < values["at"])
                    .order_by(metric_samples.c.at.desc()).limit(1)
                ).first()
                if prev is not None:
                    _rate(_row(prev), values)
                conn.execute(insert(metric_samples).values(**values))
        except IntegrityError:
            return None
        return MetricPoint.model_validate(values)

    async def metric_samples(self, service: str, node: str, since: datetime,
                             until: datetime | None = None) -> list[MetricPoint]:
        """The samples (raw and downsampled) of service@node from ``since`` to ``until``, oldest first."""
        await self.flush_writes()
        return await self._run(self._metric_samples, service, node, _aware(since, "since"),
                               None if until is None else _aware(until, "until"))

    def _metric_samples(self, service: str, node: str, since: datetime, until: datetime | None) -> list[MetricPoint]:
        query = select(metric_samples).where(metric_samples.c.service == service, metric_samples.c.node == node,
                                             metric_samples.c.at >= since)
        if until is not None:
            query = query.where(metric_samples.c.at <= until)
        with self._read() as conn:
            rows = conn.execute(query.order_by(metric_samples.c.at, metric_samples.c.id)).all()
        return [MetricPoint.model_validate(_row(r)) for r in rows]

    async def latest_metric_samples(self) -> dict[tuple[str, str], MetricPoint]:
        """The newest sample of every service@node that has one: live numbers without a probe."""
        await self.flush_writes()
        return await self._run(self._latest_metric_samples)

    def _latest_metric_samples(self) -> dict[tuple[str, str], MetricPoint]:
        newest = (select(metric_samples.c.service, metric_samples.c.node, func.max(metric_samples.c.at).label("at"))
                  .group_by(metric_samples.c.service, metric_samples.c.node).subquery())
        query = select(metric_samples).join(newest, (metric_samples.c.service == newest.c.service)
                                            & (metric_samples.c.node == newest.c.node)
                                            & (metric_samples.c.at == newest.c.at))
        with self._read() as conn:
            rows = conn.execute(query.order_by(metric_samples.c.id)).all()
        return {(str(r.service), str(r.node)): MetricPoint.model_validate(_row(r)) for r in rows}

    async def compact_metric_samples(self, now: datetime) -> tuple[int, int]:
        """Fold raw samples older than 24 h into 5-minute buckets; drop samples older than 7 days.

        Returns (raw samples folded, samples dropped). Only whole buckets are folded, so folding again
        later changes nothing; two processes folding at once collide on the unique key and one gives way.
        """
        await self.flush_writes()
        return await self._run(self._compact_metric_samples, _aware(now, "now"))

    def _compact_metric_samples(self, now: datetime) -> tuple[int, int]:
        width = SAMPLE_BUCKET_S
        edge = now - timedelta(seconds=SAMPLE_RAW_S)
        edge = datetime.fromtimestamp(edge.timestamp() // width * width, UTC)  # whole buckets only
        try:
            with self._write() as conn:
                dropped = conn.execute(delete(metric_samples).where(
                    metric_samples.c.at < now - timedelta(seconds=SAMPLE_KEEP_S))).rowcount
                rows = conn.execute(select(metric_samples).where(metric_samples.c.resolution_s == 0,
                                                                 metric_samples.c.at < edge)
                                    .order_by(metric_samples.c.at, metric_samples.c.id)).all()
                buckets: dict[tuple[str, str, float], list[Row[Any]]] = {}
                for r in rows:
                    start = r.at.timestamp() // width * width
                    buckets.setdefault((str(r.service), str(r.node), start), []).append(r)
                for (service, node, start), members in buckets.items():
                    conn.execute(insert(metric_samples).values(
                        service=service, node=node, at=datetime.fromtimestamp(start, UTC), resolution_s=width,
                        **{col: _mean([getattr(m, col) for m in members])
                           for col in ("generation_tps", "prompt_tps", "running", "waiting", "kv_cache_usage")},
                        generation_total=members[-1].generation_total, prompt_total=members[-1].prompt_total,
                        process_start=members[-1].process_start,
                    ))
                if rows:
                    conn.execute(delete(metric_samples).where(metric_samples.c.id.in_([r.id for r in rows])))
        except IntegrityError:
            return 0, 0  # another process folded the same buckets just now
        return len(rows), int(dropped)

    # ---- load phases (charts) --------------------------------------------------------------------

    async def record_load_phase(self, service: str, node: str, invocation_id: str, phase: str,
                                at: datetime) -> bool:
        """Remember when a load was first seen in ``phase``; True the first time (later calls keep it)."""
        key = (service, node, invocation_id, phase)
        if key in self._phases_seen:
            return False
        inserted = await self._run(self._insert_once, load_phases,
                                   {"service": service, "node": node, "invocation_id": invocation_id,
                                    "phase": phase, "first_seen_at": _aware(at, "at")})
        self._phases_seen.add(key)
        return inserted

    async def recent_loads(self, service: str, node: str,
                           limit: int = 10) -> list[tuple[LoadRecord, dict[str, datetime]]]:
        """The last ``limit`` loads of service@node (any outcome), oldest first, with when each phase was seen."""
        return await self._run(self._recent_loads, service, node, limit)

    def _recent_loads(self, service: str, node: str, limit: int) -> list[tuple[LoadRecord, dict[str, datetime]]]:
        with self._read() as conn:
            rows = conn.execute(select(loads).where(loads.c.service == service, loads.c.node == node)
                                .order_by(loads.c.started_at.desc(), loads.c.id.desc()).limit(limit)).all()
            records = [LoadRecord.model_validate(_row(r)) for r in reversed(rows)]
            phases: dict[str, dict[str, datetime]] = {}
            if records:
                for p in conn.execute(select(load_phases).where(
                        load_phases.c.service == service, load_phases.c.node == node,
                        load_phases.c.invocation_id.in_([r.invocation_id for r in records]))).all():
                    phases.setdefault(str(p.invocation_id), {})[str(p.phase)] = p.first_seen_at
        return [(r, phases.get(r.invocation_id, {})) for r in records]

    # ---- helpers ---------------------------------------------------------------------------------

    def _upsert(self, table: Table, key: dict[str, Any], values: dict[str, Any]) -> bool:
        """UPDATE the row with ``key`` or INSERT it; True when inserted. Portable, race-safe."""
        for attempt in range(2):
            try:
                with self._write() as conn:
                    query = update(table).where(*(table.c[k] == v for k, v in key.items()))
                    if conn.execute(query.values(**values)).rowcount == 1:
                        return False
                    conn.execute(insert(table).values(**key, **values))
                    return True
            except IntegrityError:
                # Another process inserted the same key between our UPDATE and INSERT (PostgreSQL;
                # SQLite's BEGIN IMMEDIATE serialises them): the UPDATE will find it now.
                if attempt:
                    raise
        raise AssertionError("unreachable")


    # ---- smoke completions (issue 14) ------------------------------------------------------------

    async def record_smoke(self, service: str, node: str, invocation_id: str, outcome: str, ttft_s: float | None,
                           detail: str, at: datetime) -> SmokeCheck:
        """Record the smoke completion of one load (``detail`` already redacted); the first record wins."""
        values = {"service": service, "node": node, "invocation_id": invocation_id, "outcome": outcome,
                  "ttft_s": ttft_s, "detail": detail, "at": _aware(at, "at")}
        await self._run(self._insert_once, smoke_checks, values)
        found = await self.get_smoke(service, node, invocation_id)
        assert found is not None
        return found

    async def get_smoke(self, service: str, node: str, invocation_id: str) -> SmokeCheck | None:
        """The smoke completion recorded for one load, if any."""
        return await self._run(self._get_smoke, service, node, invocation_id)

    def _get_smoke(self, service: str, node: str, invocation_id: str) -> SmokeCheck | None:
        c = smoke_checks.c
        with self._read() as conn:
            row = conn.execute(select(smoke_checks).where(c.service == service, c.node == node,
                                                          c.invocation_id == invocation_id)).first()
        return None if row is None else SmokeCheck.model_validate(_row(row))


    # ---- acceptance benchmarks (issue 14) --------------------------------------------------------

    async def claim_bench_run(self, run_id: str, service: str, node: str, at: datetime) -> bool:
        """Claim the benchmark ``run_id`` (state running); True exactly once, across processes."""
        values = {"id": run_id, "service": service, "node": node, "state": "running", "started_at": _aware(at, "at")}
        return await self._run(self._insert_once, bench_runs, values)

    async def finish_bench_run(self, run_id: str, state: str, text: str, status: str, data: Mapping[str, Any],
                               at: datetime) -> bool:
        """Record the end of a running benchmark; True for the call that ended it."""
        return await self._run(self._finish_bench_run, run_id, state, text, status, dict(data), _aware(at, "at"))

    def _finish_bench_run(self, run_id: str, state: str, text: str, status: str, data: dict[str, Any],
                          at: datetime) -> bool:
        with self._write() as conn:
            query = update(bench_runs).where(bench_runs.c.id == run_id, bench_runs.c.state == "running")
            return conn.execute(query.values(state=state, text=text, status=status, data=data,
                                             finished_at=at)).rowcount == 1

    async def get_bench_run(self, run_id: str) -> BenchRun | None:
        """The benchmark ``run_id``, if claimed."""
        return await self._run(self._get_bench_run, run_id)

    def _get_bench_run(self, run_id: str) -> BenchRun | None:
        with self._read() as conn:
            row = conn.execute(select(bench_runs).where(bench_runs.c.id == run_id)).first()
        return None if row is None else BenchRun.model_validate(_row(row))


def _retry_locked(fn: Callable[[], object], timeout_s: float) -> None:
    """Run ``fn``, retrying while SQLite says the database is locked (first-open races)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fn()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
