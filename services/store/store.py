"""The bot's durable state: one :class:`Store`, a repository per aggregate on one database.

``Store`` composes :class:`~services.store.engine.Database` (the engine, transactions, the schema check and
the one way into a worker thread), the scheduler leader's :class:`~services.store.write_queue.WriteQueue`, and
one repository per aggregate, each an attribute typed by its protocol of :mod:`services.store.ports`
(``store.locks.acquire(...)``, ``store.requests.transition(...)``). Its own methods are the lifecycle: where the
state lives, preparing the schema, flushing and closing.

The records it returns live in :mod:`services.store.records`, its tables in :mod:`services.store.schema`,
their versions in ``services/store/migrations`` (Alembic). APScheduler's ``SQLAlchemyJobStore`` may live in
the same database (:meth:`Store.jobstore_url`, table :data:`~services.store.schema.JOBSTORE_TABLE`); the
store's own tables are prefixed ``inferbot_``.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.engine import URL

from services.store.audit import AuditRepo
from services.store.bench_runs import BenchRunsRepo
from services.store.changes import ChangesRepo
from services.store.engine import BUSY_TIMEOUT_S, Database
from services.store.follows import FollowsRepo
from services.store.health_memos import HealthMemosRepo
from services.store.home_views import HomeViewsRepo
from services.store.journal_cursors import JournalCursorsRepo
from services.store.loads import LoadsRepo
from services.store.locks import LocksRepo
from services.store.notices import NoticesRepo
from services.store.ports import (
    Audit,
    BenchRuns,
    Changes,
    Follows,
    HealthMemos,
    HomeViews,
    JournalCursors,
    Loads,
    Locks,
    MetricSamples,
    Notices,
    Requests,
    Restarts,
    SharedState,
    Silences,
    SmokeChecks,
    Snapshots,
    Watches,
)
from services.store.records import REQUEST_KINDS
from services.store.requests import RequestsRepo
from services.store.restarts import RestartsRepo
from services.store.samples import SamplesRepo
from services.store.shared_state import SharedStateRepo
from services.store.silences import SilencesRepo
from services.store.smoke_checks import SmokeChecksRepo
from services.store.snapshots import SnapshotsRepo
from services.store.watches import WatchesRepo
from services.store.write_queue import WriteQueue

__all__ = ["Store"]


class Store:
    """The bot's state database. Construct with a SQLAlchemy URL; no I/O happens until first use.

    A :class:`~sqlalchemy.engine.URL` object may carry a password (``services.store.db_url``): it is used to
    connect and never shown (:attr:`url` prints ``***``). The schema is upgraded with Alembic on first use
    (``services.store.migrate``); a schema newer than this code raises ``services.store.migrate.SchemaTooNew``.
    It satisfies :class:`services.store.ports.StateStore`, which is how handlers see it. ``request_kinds``:
    the kinds of confirmable request it stores (``records.REQUEST_KINDS``, one per kind of the flow).
    """

    def __init__(self, url: str | URL, *, busy_timeout_s: float = BUSY_TIMEOUT_S,
                 request_kinds: Iterable[str] = REQUEST_KINDS) -> None:
        self.db = Database(url, busy_timeout_s=busy_timeout_s)
        self.writes = WriteQueue(self.db)
        self.locks: Locks = LocksRepo(self.db)
        self.requests: Requests = RequestsRepo(self.db, request_kinds)
        self.restarts: Restarts = RestartsRepo(self.db)
        self.follows: Follows = FollowsRepo(self.db)
        self.notices: Notices = NoticesRepo(self.db)
        self.snapshots: Snapshots = SnapshotsRepo(self.db)
        self.loads: Loads = LoadsRepo(self.db)
        self.audit: Audit = AuditRepo(self.db)
        self.home_views: HomeViews = HomeViewsRepo(self.db)
        self.smoke_checks: SmokeChecks = SmokeChecksRepo(self.db)
        self.bench_runs: BenchRuns = BenchRunsRepo(self.db)
        self.shared: SharedState = SharedStateRepo(self.db)
        self.silences: Silences = SilencesRepo(self.db)
        self.changes: Changes = ChangesRepo(self.db)
        # The scheduler leader's rows: kept in memory while it leads, written in batches.
        self.watches: Watches = WatchesRepo(self.writes)
        self.samples: MetricSamples = SamplesRepo(self.writes)
        self.health_memos: HealthMemos = HealthMemosRepo(self.writes)
        self.journal_cursors: JournalCursors = JournalCursorsRepo(self.writes)

    # ---- where the state lives -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The SQLAlchemy URL this store was opened with (a password shows as ``***``)."""
        return self.db.url

    @property
    def sqlalchemy_url(self) -> URL:
        """The URL to connect with (password included; its ``str`` hides it)."""
        return self.db.sqlalchemy_url

    @property
    def in_memory(self) -> bool:
        """True for an in-memory SQLite database: it exists in this process only."""
        return self.db.in_memory

    @property
    def is_postgres(self) -> bool:
        """True when the state lives in PostgreSQL (replicas possible), False for SQLite."""
        return self.db.is_postgres

    def describe(self) -> str:
        """Where the state lives, for people (never the password)."""
        return self.db.describe()

    def jobstore_url(self) -> str:
        """The database URL for APScheduler's ``SQLAlchemyJobStore`` (use table ``JOBSTORE_TABLE``).

        It holds the password, if any: hand it to SQLAlchemy only, never print it.
        """
        return self.db.jobstore_url()

    # ---- the schema ------------------------------------------------------------------------------

    @property
    def schema_version(self) -> str | None:
        """The schema version once checked (and upgraded), else None."""
        return self.db.schema_version

    def check_schema(self) -> None:
        """Read the schema version now when that changes nothing (:meth:`Database.check_schema`)."""
        self.db.check_schema()

    async def prepare(self) -> str:
        """Connect, check and upgrade the schema now (instead of on first use); returns the schema version."""
        return await self.db.prepare()

    async def schema_status(self) -> tuple[str | None, str]:
        """(the database's schema version or None, the newest this code knows), upgrading nothing."""
        return await self.db.schema_status()

    # ---- the leader's writes, and closing --------------------------------------------------------

    async def flush_writes(self) -> None:
        """Write the leader's queued samples, baselines and memos now, in one transaction."""
        await self.writes.flush()

    def forget_watcher_memos(self, drop_pending: bool = False) -> None:
        """Forget what this process remembers of the leader's rows (leadership changed hands).

        ``drop_pending``: also drop the queued baselines and memos (a replica that lost the lead must not
        write them over the new leader's); queued samples are kept (they are measurements, not state).
        """
        self.writes.forget(drop_pending)

    async def close(self) -> None:
        """Write what is pending, close all connections; the store can't be used afterwards."""
        if self.db.closed:
            return
        try:
            await self.writes.flush()
        finally:
            await self.db.close()
