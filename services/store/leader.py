"""Which replica schedules: exactly one leader, chosen with a PostgreSQL session advisory lock.

Every replica answers questions and clicks; only the **leader** runs the scheduler (follows, the
unplanned-restart watcher, expiries). The leader is whoever holds ``pg_advisory_lock(LEADER_LOCK)`` on a
connection of its own (not one of the store's pooled connections, which come and go). The lock belongs to
that session: when the process dies, its host goes away or the connection is cut, the server ends the
session and the lock is free for a standby, which tries to take it every ``poll_s``.

Fencing: the leader watches its lock connection all the time (it waits for notifications on it, which
fails at once when the server ends the session) and pings it every ``poll_s`` with a timeout (a network
partition shows as silence, not an error). The moment either fails it calls ``on_lost`` — the scheduler
stops — before it tries to connect again, so a leader that can no longer prove it holds the lock never
keeps scheduling. Server-side TCP keepalives on the lock session let the server notice a vanished host
within about 10 s and free the lock, so a standby takes over within 15 s.

Every scheduled step is a claim in the database anyway (notices, request transitions, locks), so even a
short overlap cannot post twice or restart twice.

SQLite is one process: :class:`SoleLeader` is always the leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from sqlalchemy.engine import URL

if TYPE_CHECKING:  # psycopg only where PostgreSQL is used: a SQLite bot never loads it (it would stay resident)
    import psycopg

__all__ = [
    "LEADER_LOCK",
    "LeaderInfo",
    "Leadership",
    "PgLeader",
    "Role",
    "SoleLeader",
    "conninfo",
    "current_leader",
    "replica_id",
]

LEADER_LOCK = 0x1F_B0_7D_B0
"""The advisory lock key (one per database: two deployments on two databases never collide)."""
APP_PREFIX = "inferbot-leader:"
"""``application_name`` of lock sessions, followed by the replica id: ``check`` names the leader with it."""
POLL_S = 1.0
PING_TIMEOUT_S = 3.0
CONNECT_TIMEOUT_S = 5
# The server drops a silent lock session after about idle + interval * count seconds (host loss).
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 4, 2, 2
TCP_USER_TIMEOUT_MS = 8000

Role = Literal["leader", "standby"]
Callback = Callable[[], Awaitable[None]]
log = logging.getLogger("inferbot.leader")


def replica_id() -> str:
    """This process, for people: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"[:40]


class Leadership(Protocol):
    """Tells the scheduler when to run: ``on_elected`` when this replica becomes leader, ``on_lost`` when
    it stops being one."""

    @property
    def role(self) -> Role: ...

    @property
    def replica(self) -> str: ...

    async def start(self, on_elected: Callback, on_lost: Callback) -> None: ...

    async def stop(self) -> None: ...


class SoleLeader:
    """SQLite: one process, always the leader."""

    def __init__(self, replica: str | None = None) -> None:
        self._replica = replica or replica_id()
        self._leading = False
        self._on_lost: Callback | None = None

    @property
    def role(self) -> Role:
        """Always ``leader``: nobody else can be."""
        return "leader"

    @property
    def replica(self) -> str:
        """This process."""
        return self._replica

    async def start(self, on_elected: Callback, on_lost: Callback) -> None:
        """Become the leader now."""
        self._leading, self._on_lost = True, on_lost
        await on_elected()

    async def stop(self) -> None:
        """Stop leading."""
        if self._leading and self._on_lost is not None:
            self._leading = False
            await self._on_lost()


def conninfo(url: URL, application_name: str) -> str:
    """libpq connection string for ``url`` (password included: give it to psycopg only), with keepalives
    on both ends so a dead peer is noticed within seconds, not hours."""
    options = " ".join((f"-c tcp_keepalives_idle={KEEPALIVE_IDLE_S}",
                        f"-c tcp_keepalives_interval={KEEPALIVE_INTERVAL_S}",
                        f"-c tcp_keepalives_count={KEEPALIVE_COUNT}",
                        f"-c tcp_user_timeout={TCP_USER_TIMEOUT_MS}"))
    params: dict[str, str | int] = {
        "dbname": url.database or "", "application_name": application_name[:63],
        "connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1, "keepalives_idle": KEEPALIVE_IDLE_S,
        "keepalives_interval": KEEPALIVE_INTERVAL_S, "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS, "options": options,
    }
    for key, value in (("host", url.host), ("port", url.port), ("user", url.username), ("password", url.password)):
        if value is not None:
            params[key] = value
    from psycopg.conninfo import make_conninfo

    return make_conninfo(**params)  # type: ignore[arg-type]


class PgLeader:
    """Leader election on PostgreSQL (see the module docstring)."""

    def __init__(self, url: URL, *, replica: str | None = None, key: int = LEADER_LOCK, poll_s: float = POLL_S,
                 ping_timeout_s: float = PING_TIMEOUT_S) -> None:
        self._url = url
        self._replica = replica or replica_id()
        self._key = key
        self.poll_s = poll_s
        self.ping_timeout_s = ping_timeout_s
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._leading = False
        self._task: asyncio.Task[None] | None = None
        self._abandoned: set[asyncio.Task[object]] = set()
        self._on_elected: Callback | None = None
        self._on_lost: Callback | None = None
        self.elected_at: float | None = None  # time.time() of the last election (bench, diagnostics)

    @property
    def role(self) -> Role:
        """``leader`` while this replica holds the lock, else ``standby``."""
        return "leader" if self._leading else "standby"

    @property
    def replica(self) -> str:
        """This replica's id (``host:pid``)."""
        return self._replica

    async def start(self, on_elected: Callback, on_lost: Callback) -> None:
        """Start campaigning in the background (returns at once; ``on_elected`` runs when the lock is won)."""
        self._on_elected, self._on_lost = on_elected, on_lost
        self._task = asyncio.get_running_loop().create_task(self._run(), name="inferbot-leader")

    async def stop(self) -> None:
        """Stop campaigning; a leader stops leading and gives the lock up (by closing its session)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._step_down("stopping")

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        import psycopg

        info = conninfo(self._url, APP_PREFIX + self._replica)
        return await asyncio.wait_for(psycopg.AsyncConnection.connect(info, autocommit=True),
                                      CONNECT_TIMEOUT_S + 1)

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)

    async def _query(self, sql: str, *params: object) -> object:
        """One query on the lock session, bounded by ``ping_timeout_s``.

        Not ``wait_for``: cancelling a psycopg query sends a cancel request over a new connection, which
        hangs in a partition. A query still running at the timeout is left behind with its connection.
        """
        assert self._conn is not None
        conn = self._conn

        async def run() -> object:
            cur = await conn.execute(sql, params or None)
            row = await cur.fetchone()
            return None if row is None else row[0]

        task = asyncio.get_running_loop().create_task(run())
        done, _ = await asyncio.wait({task}, timeout=self.ping_timeout_s)
        if not done:
            self._abandoned.add(task)
            task.add_done_callback(self._abandoned.discard)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning
            self._conn = None  # never used again; closing it could hang as well
            raise TimeoutError(f"the lock session did not answer within {self.ping_timeout_s:g} s")
        return task.result()

    async def _step_down(self, why: str) -> None:
        was = self._leading
        self._leading = False  # fencing first: nothing may schedule from here on
        if was:
            log.warning("leadership lost (%s): scheduling stopped", why,
                        extra={"event": "leader", "role": "standby", "replica": self._replica, "why": why})
            if self._on_lost is not None:
                await self._on_lost()
        await self._close()

    async def _run(self) -> None:
        while True:
            try:
                if self._conn is None:
                    self._conn = await self._connect()
                if not self._leading:
                    await self._campaign()
                else:
                    await self._hold()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # any failure on the lock session, or while taking over: not leading
                await self._step_down(type(e).__name__)
                await asyncio.sleep(self.poll_s)

    async def _campaign(self) -> None:
        if await self._query("SELECT pg_try_advisory_lock(%s)", self._key) is not True:
            await asyncio.sleep(self.poll_s)
            return
        self._leading = True
        self.elected_at = time.time()
        log.info("leader elected", extra={"event": "leader", "role": "leader", "replica": self._replica})
        if self._on_elected is not None:
            await self._on_elected()

    async def _hold(self) -> None:
        assert self._conn is not None
        # Waiting for notifications reads the socket: a terminated session fails here at once.
        async for _ in self._conn.notifies(timeout=self.poll_s):
            pass
        await self._query("SELECT 1")


@dataclass(frozen=True)
class LeaderInfo:
    """Who holds the leader lock right now."""

    replica: str
    client: str | None
    since: datetime | None


async def current_leader(url: URL, key: int = LEADER_LOCK) -> LeaderInfo | None:
    """The replica holding the leader lock of ``url``'s database (None: nobody leads)."""
    query = ("SELECT a.application_name, host(a.client_addr), a.backend_start FROM pg_locks l "
             "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
             "AND l.classid = 0 AND l.objid = %s AND l.objsubid = 1 "
             "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
    import psycopg

    info = conninfo(url, "inferbot-check")
    async with await psycopg.AsyncConnection.connect(info, autocommit=True) as conn:
        cur = await conn.execute(query, (key,))
        row = await cur.fetchone()
    if row is None:
        return None
    name = str(row[0] or "")
    return LeaderInfo(replica=name.removeprefix(APP_PREFIX) or "?",
                      client=None if row[1] is None else str(row[1]),
                      since=row[2] if isinstance(row[2], datetime) else None)
