"""The state database itself: its engine, its transactions, its schema check, and the one way into a thread.

One SQLAlchemy Core engine (synchronous). Any SQLAlchemy URL works (PostgreSQL for shared deployments);
SQLite (the default, one file in the state directory) is opened in WAL mode with a ``busy_timeout``, and
every write transaction is a ``BEGIN IMMEDIATE`` one, so two bot processes (or replicas) may share the file.

The repositories (one module per aggregate: ``locks.py``, ``requests.py``…) write their database work as
plain synchronous methods and make them ``async`` with :func:`in_thread`, :func:`reading` or
:func:`writing`: the work runs in a worker thread (:meth:`Database.run`, the only place that starts one),
so handlers never block the event loop, and no method is written twice (an async one and its sync twin).

The schema is checked on first use: one read of ``alembic_version`` when it is at
:data:`~services.store.schema.SCHEMA_HEAD`, else Alembic upgrades it (``services.store.migrate``) or
refuses a newer one. Tables are never created any other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, Row, Table, create_engine, event, insert, select, text, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from services.store.schema import SCHEMA_HEAD, VERSION_TABLE

__all__ = ["BUSY_TIMEOUT_S", "MEMO_S", "Database", "Repository", "as_dict", "aware", "in_thread", "insert_once",
           "newest", "reading", "update_row", "upsert", "utcnow", "writing"]

BUSY_TIMEOUT_S = 10.0
"""How long a SQLite connection waits for another process's write lock before giving up."""
MEMO_S = 30.0
"""How long a repository trusts what this process last wrote or read for a service@node (snapshots, load
history) before asking the database again."""

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("inferbot.store")


def utcnow() -> datetime:
    """Timezone-aware now, in UTC."""
    return datetime.now(UTC)


def aware(value: datetime, name: str) -> datetime:
    """``value`` in UTC; a naive datetime is a caller bug (``ValueError``)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got {value!r}")
    return value.astimezone(UTC)


def as_dict(row: Row[Any]) -> dict[str, Any]:
    """A result row as a plain dict (to validate a record from it)."""
    return dict(row._mapping)


class Database:
    """One state database. Construct with a SQLAlchemy URL; no I/O happens until first use.

    A :class:`~sqlalchemy.engine.URL` object may carry a password (``services.store.db_url``): it is used to
    connect and never shown (:attr:`url` prints ``***``).
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
        # SQLite has one writer at a time. This process's writers queue here, in the order they come, instead
        # of each waiting in SQLite's busy handler, which sleeps ever longer between tries (up to 100 ms): a
        # burst of questions is two writes each (the event's claim, the rate limit). Other processes still
        # wait for the file's lock through ``busy_timeout``.
        self._writer: threading.Lock | None = threading.Lock() if self._sqlite and not self._memory else None
        self._engine = _make_engine(parsed, self._url, self._memory, busy_timeout_s)
        self._init_lock = threading.Lock()
        self._initialised = False
        self.closed = False

    # ---- where it is -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The SQLAlchemy URL this database was opened with (a password shows as ``***``)."""
        return self._url

    @property
    def sqlalchemy_url(self) -> URL:
        """The URL to connect with (password included; its ``str`` hides it)."""
        return self._url_obj

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for APScheduler's job store and for tests that count rows)."""
        return self._engine

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

    def jobstore_url(self) -> str:
        """The database URL for APScheduler's ``SQLAlchemyJobStore``; it holds the password, if any."""
        return self._url_obj.render_as_string(hide_password=False)

    # ---- the schema ------------------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        if self._initialised:
            return
        with self._init_lock:
            if self._initialised:
                return
            if _schema_is_head(self._engine):
                # The usual case: nothing to migrate, so neither Alembic nor a write lock is needed.
                self.schema_version = SCHEMA_HEAD
                self._initialised = True
                return
            from services.store.migrate import upgrade  # the migrations import the tables of schema.py

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
            if self._initialised or self.closed:
                return
            try:
                head = _schema_is_head(self._engine)
            except Exception:  # the first use meets it again, and reports it where it always did
                log.debug("reading the schema version in advance failed", exc_info=True)
                return
            if head:
                self.schema_version = SCHEMA_HEAD
                self._initialised = True

    async def prepare(self) -> str:
        """Connect, check and upgrade the schema now (instead of on first use); returns the schema version."""
        if self.closed:
            raise RuntimeError("the store is closed")
        await self.run(self._ensure_schema)
        assert self.schema_version is not None
        return self.schema_version

    async def schema_status(self) -> tuple[str | None, str]:
        """(the database's schema version or None, the newest this code knows), upgrading nothing."""
        from services.store.migrate import current_version, head_version

        def status() -> tuple[str | None, str]:
            with self._engine.connect() as conn:
                return current_version(conn), head_version()

        return await self.run(status)

    # ---- transactions and the worker thread ------------------------------------------------------

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on success (worker threads only)."""
        with self._guard(), self._writer or contextlib.nullcontext(), self._engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (deferred on SQLite, never waits for writers in WAL mode)."""
        with self._guard(), self._engine.connect() as raw:
            conn = raw.execution_options(inferbot_read_only=True)
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        if self.closed:
            raise RuntimeError("the store is closed")
        self._ensure_schema()
        if self._serial is None:
            yield
        else:
            with self._serial:
                yield

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` in a worker thread: the one way the store's database work leaves the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def close(self) -> None:
        """Close all connections; the database can't be used afterwards."""
        if not self.closed:
            self.closed = True
            await self.run(self._engine.dispose)


# --------------------------------------------------------------------------------------------------
# Statements several repositories use, each in its own write transaction (worker threads only)


def insert_once(db: Database, table: Table, values: dict[str, Any]) -> bool:
    """INSERT ``values``; False when a row with the same key is already there."""
    try:
        with db.write() as conn:
            conn.execute(insert(table).values(**values))
    except IntegrityError:
        return False
    return True


def upsert(db: Database, table: Table, key: dict[str, Any], values: dict[str, Any]) -> bool:
    """UPDATE the row with ``key`` or INSERT it; True when inserted. Portable, race-safe."""
    for attempt in range(2):
        try:
            with db.write() as conn:
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


def update_row(db: Database, table: Table, key: dict[str, Any], values: dict[str, Any]) -> bool:
    """UPDATE the row with ``key``; True when there was one."""
    with db.write() as conn:
        query = update(table).where(*(table.c[k] == v for k, v in key.items())).values(**values)
        return conn.execute(query).rowcount == 1


def newest(conn: Connection, table: Table, service: str, node: str, when: Any) -> Row[Any] | None:
    """The newest row of ``table`` for service@node, by ``when`` then id (None when there is none)."""
    return conn.execute(select(table).where(table.c.service == service, table.c.node == node)
                        .order_by(when.desc(), table.c.id.desc()).limit(1)).first()


# --------------------------------------------------------------------------------------------------
# Repositories: synchronous database work, made async in a worker thread


class Repository:
    """One aggregate's statements on the shared :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db


R = TypeVar("R", bound=Repository)


def in_thread(fn: Callable[Concatenate[R, P], T]) -> Callable[Concatenate[R, P], Coroutine[Any, Any, T]]:
    """Make a synchronous repository method async: it runs in a worker thread (:meth:`Database.run`).

    For work that takes its own transactions (several, or a retry after a lost race).
    """
    async def run(self: R, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.db.run(fn, self, *args, **kwargs)

    functools.update_wrapper(run, fn)
    return run


def reading(fn: Callable[Concatenate[R, Connection, P], T]) -> Callable[Concatenate[R, P], Coroutine[Any, Any, T]]:
    """:func:`in_thread`, with the method's ``conn`` a read-only transaction."""
    def body(self: R, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self.db.read() as conn:
            return fn(self, conn, *args, **kwargs)

    functools.update_wrapper(body, fn)
    return in_thread(body)


def writing(fn: Callable[Concatenate[R, Connection, P], T]) -> Callable[Concatenate[R, P], Coroutine[Any, Any, T]]:
    """:func:`in_thread`, with the method's ``conn`` a write transaction, committed when it returns."""
    def body(self: R, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with self.db.write() as conn:
            return fn(self, conn, *args, **kwargs)

    functools.update_wrapper(body, fn)
    return in_thread(body)


def _schema_is_head(engine: Engine) -> bool:
    """True when the database's schema version is :data:`SCHEMA_HEAD` (one read, no Alembic).

    Anything else (no version table yet, an older or a newer version, several rows) takes the
    Alembic path, which upgrades under the migration lock or refuses a newer schema, as before.
    A version read as head was committed by whoever migrated, so no lock is needed to trust it.
    """
    try:
        with engine.connect() as raw:
            conn = raw.execution_options(inferbot_read_only=True)
            with conn.begin():
                found = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    except (OperationalError, ProgrammingError):  # no version table: a new (or pre-Alembic) database
        return False
    return found == [SCHEMA_HEAD]


# --------------------------------------------------------------------------------------------------
# The engine


def _make_engine(url_obj: URL, url: str, memory: bool, busy_timeout_s: float) -> Engine:
    if url_obj.get_backend_name() != "sqlite":
        # pre-ping: a connection the server (or a failover) dropped is replaced, not handed out.
        # keepalives / tcp_user_timeout: a query to a database that went silent (partition) fails
        # within ~10 s instead of holding a worker thread for the kernel's retransmission timeout.
        return create_engine(url_obj, pool_pre_ping=True, pool_size=8, max_overflow=16,
                             connect_args={"connect_timeout": 5, "application_name": "inferbot",
                                           "keepalives": 1, "keepalives_idle": 4, "keepalives_interval": 2,
                                           "keepalives_count": 2, "tcp_user_timeout": 8000})
    connect_args: dict[str, Any] = {"check_same_thread": False, "timeout": busy_timeout_s}
    if memory:
        engine = create_engine(url, connect_args=connect_args, poolclass=StaticPool)
    else:
        engine = create_engine(url, connect_args=connect_args, pool_size=8, max_overflow=16)
    _sqlite_events(engine, memory, busy_timeout_s)
    return engine


def _sqlite_events(engine: Engine, memory: bool, busy_timeout_s: float) -> None:
    busy_ms = int(busy_timeout_s * 1000)

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
                _retry_locked(lambda: cursor.execute("PRAGMA journal_mode = WAL"), busy_timeout_s)
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
