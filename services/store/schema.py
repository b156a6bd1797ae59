"""Every table of the state store (SQLAlchemy Core) and the UTC datetime type they use.

This is the one place a table is declared; the schema's versions are Alembic migrations
(``services/store/migrations``), which are the only thing that creates or changes tables. A test holds the
two equal (``alembic check``: nothing to generate).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.types import TypeDecorator

SCHEMA_HEAD = "0006"
"""The newest migration's revision (``migrations/versions``). The store compares the database's version
with it in one plain query and imports Alembic only when they differ (an upgrade, or a refusal): importing
Alembic would otherwise be a large share of every ``inferbot`` process's start-up. A test holds it equal to
Alembic's head."""
VERSION_TABLE = "alembic_version"
"""Where Alembic keeps the database's schema version (its default)."""

JOBSTORE_TABLE = "apscheduler_jobs"
"""The table name APScheduler's ``SQLAlchemyJobStore`` should use in the same database."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every dialect (naive UTC text on SQLite, sortable as text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: the store takes timezone-aware datetimes only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

snapshots = Table(
    "inferbot_snapshots", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("unit", String(300), nullable=False),
    Column("first_seen_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Column("model", Text),
    Column("flags", JSON, nullable=False),
    Column("env", JSON, nullable=False),
    Column("version", String(200)),
    Column("state", String(40), nullable=False),
    Column("was_ready", Boolean, nullable=False, default=False),
    Column("last_ready_at", UTCDateTime),
    Index("ix_inferbot_snapshots_target", "service", "node", "id"),
)

loads = Table(
    "inferbot_loads", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("invocation_id", String(200), nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("ready_at", UTCDateTime),
    Column("outcome", String(20), nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("recorded_at", UTCDateTime, nullable=False),
    UniqueConstraint("service", "node", "invocation_id", name="uq_inferbot_loads_invocation"),
    Index("ix_inferbot_loads_target", "service", "node", "started_at"),
)

audit_log = Table(
    "inferbot_audit", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("event", String(100), nullable=False),
    Column("who", String(200)),
    Column("where", String(200)),
    Column("service", String(200)),
    Column("node", String(200)),
    Column("detail", Text, nullable=False),
    Column("request_id", String(200)),
    Index("ix_inferbot_audit_service", "service", "at"),
)

locks = Table(
    "inferbot_locks", metadata,
    Column("name", String(300), primary_key=True),
    Column("owner", String(300), nullable=False),
    Column("acquired_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)

requests = Table(
    # Confirmable requests (a restart, a benchmark): one row each, every click a compare-and-set on its state.
    "inferbot_requests", metadata,
    Column("id", String(200), primary_key=True),
    Column("kind", String(20), nullable=False),  # records.RequestKind; migration 0004 added it
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("unit", String(300), nullable=False),
    Column("requested_by", String(200)),
    Column("channel", String(200)),
    Column("thread_ts", String(100)),
    Column("message_channel", String(200)),
    Column("message_ts", String(100)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("force", Boolean, nullable=False),
    Column("state", String(20), nullable=False),
    Column("state_by", String(200)),
    Column("state_at", UTCDateTime),
    Column("confirmed_by", String(200)),
    Column("confirmed_at", UTCDateTime),
    Index("ix_inferbot_requests_state", "state"),
)

restarts = Table(
    "inferbot_restarts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("by", String(200)),
    Column("forced", Boolean, nullable=False),
    Index("ix_inferbot_restarts_target", "service", "node", "at"),
)

follows = Table(
    "inferbot_follows", metadata,
    Column("follow_key", String(300), primary_key=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("unit", String(300), nullable=False),
    Column("invocation_id", String(200)),
    Column("started_at", UTCDateTime, nullable=False),
    Column("reason", String(20), nullable=False),
    Column("thread_channel", String(200)),
    Column("thread_ts", String(100)),
    Column("progress_message_ts", String(100)),
    Column("request_id", String(200)),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("outcome", String(40)),
)

notices = Table(
    "inferbot_notices", metadata,
    Column("follow_key", String(300), nullable=False),
    Column("place", String(200), nullable=False),
    Column("invocation_id", String(200), nullable=False),  # "" rather than NULL: NULLs never collide
    Column("claimed_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    Column("ts", String(100)),
    UniqueConstraint("follow_key", "place", "invocation_id", name="uq_inferbot_notices_once"),
)

watches = Table(
    "inferbot_watch", metadata,
    Column("service", String(200), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("main_pid", Integer, nullable=False),
    Column("started_at", UTCDateTime),
    Column("n_restarts", Integer, nullable=False),
    Column("active_state", String(40), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)


home_views = Table(
    # App Home dashboards people opened: who, when, when last published (pacing) and whether stale.
    "inferbot_home_views", metadata,
    Column("user_id", String(200), primary_key=True),
    Column("opened_at", UTCDateTime, nullable=False),
    Column("published_at", UTCDateTime),
    Column("dirty", Boolean, nullable=False),
)


metric_samples = Table(
    # Live numbers the watcher sampled from each ready server's /metrics (charts, the Home tab): rates
    # computed against the previous sample; raw for 24 h, then 5-minute buckets, kept 7 days.
    "inferbot_metric_samples", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("resolution_s", Integer, nullable=False),  # 0: one raw sample; else the bucket width
    Column("generation_tps", Float),
    Column("prompt_tps", Float),
    Column("running", Float),
    Column("waiting", Float),
    Column("kv_cache_usage", Float),
    Column("generation_total", Float),  # the counters, for the next sample's rate
    Column("prompt_total", Float),
    Column("process_start", UTCDateTime),  # a new process means the counters started again
    UniqueConstraint("service", "node", "resolution_s", "at", name="uq_inferbot_metric_samples"),
    Index("ix_inferbot_metric_samples_target", "service", "node", "at"),
)

load_phases = Table(
    # When each phase of a load was first seen (by the follow's polls): the phase split of "chart loads".
    "inferbot_load_phases", metadata,
    Column("service", String(200), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("invocation_id", String(200), primary_key=True),
    Column("phase", String(40), primary_key=True),
    Column("first_seen_at", UTCDateTime, nullable=False),
)

smoke_checks = Table(
    # The smoke completion of one load (issue 14): its outcome decides the ✅, and a bot started again
    # rebuilds the notice from it. The first result recorded for a load wins.
    "inferbot_smoke_checks", metadata,
    Column("service", String(200), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("invocation_id", String(200), primary_key=True),
    Column("outcome", String(20), nullable=False),
    Column("ttft_s", Float),
    Column("detail", Text, nullable=False),
    Column("at", UTCDateTime, nullable=False),
)

bench_runs = Table(
    # Acceptance benchmarks (issue 14): after a ✅ (id "ready:<follow key>:<load id>") or asked with
    # `bench kimi` (the request id). Claimed by an insert, so each runs once; the notice text is kept for
    # the posts that must be retried.
    "inferbot_bench_runs", metadata,
    Column("id", String(400), primary_key=True),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("state", String(20), nullable=False),  # running | done | failed
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime),
    Column("text", Text),
    Column("status", String(20)),
    Column("data", JSON),
)


events_seen = Table(
    # Slack event ids already taken by one replica: the same event delivered twice is answered once.
    "inferbot_events_seen", metadata,
    Column("event_id", String(200), primary_key=True),
    Column("seen_at", UTCDateTime, nullable=False),
    Index("ix_inferbot_events_seen_at", "seen_at"),
)

rate_hits = Table(
    # Per person: when their answered questions of the last minute came (epoch seconds), and when they
    # were last told they are over the limit.
    "inferbot_rate_hits", metadata,
    Column("user_id", String(200), primary_key=True),
    Column("hits", JSON, nullable=False),
    Column("told_at", Float),
)

progress_pacing = Table(
    # When each follow's progress message was last edited, and in which phase (edits are paced).
    "inferbot_progress_pacing", metadata,
    Column("follow_key", String(300), primary_key=True),
    Column("edited_at", UTCDateTime, nullable=False),
    Column("phase", String(40)),
)

silences = Table(
    # ``silence kimi 2h``: one row per service while its notices are held back.
    "inferbot_silences", metadata,
    Column("service", String(200), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("until", UTCDateTime, nullable=False),
    Column("reason", Text, nullable=False),
    Column("by", String(200), nullable=False),
    Column("at", UTCDateTime, nullable=False),
)

health_memos = Table(
    # What the health watcher remembers of each service between two looks (records.HealthMemo as JSON).
    "inferbot_health_watch", metadata,
    Column("service", String(200), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("data", JSON, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

changes = Table(
    # Settings changes (issue 25): one row per ``set … on kimi`` / ``revert kimi``, keyed by its request id; its
    # number is what people say ("change #12"). What was asked and the preview's facts, all redacted.
    "inferbot_changes", metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("op", String(20), nullable=False),
    Column("service", String(200), nullable=False),
    Column("node", String(200), nullable=False),
    Column("spec", JSON),
    Column("diff", JSON, nullable=False),
    Column("preflight", JSON, nullable=False),
    Column("checked_with", Text, nullable=False),
    Column("requested_by", String(200)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("state", String(20), nullable=False),
    Column("state_at", UTCDateTime, nullable=False),
    Column("outcome", Text),
    Column("finished_at", UTCDateTime),
    Index("ix_inferbot_changes_service", "service", "number"),
)

change_steps = Table(
    # Each node of a change and where it is in the change's state machine (handlers/change/machine.py): every
    # move is a compare-and-set on ``state`` (and ``state_at``), so one process does each step once.
    "inferbot_change_steps", metadata,
    Column("change_id", String(64), primary_key=True),
    Column("node", String(200), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("state", String(20), nullable=False),
    Column("state_at", UTCDateTime, nullable=False),
    Column("previous", JSON),
    Column("delta", JSON),
    Column("settings_since", UTCDateTime),
    Column("load_started_at", UTCDateTime),
    Column("invocation", String(200)),
    Column("ready_at", UTCDateTime),
    Column("load_s", Float),
    Column("back_s", Float),
    Column("reason", Text),
    Column("detail", Text),
)

journal_cursors = Table(
    # Where the scheduler leader's journal stream of each node has got to (issue 26): the cursor of the last
    # entry whose looks were done, so a new leader or a restarted bot resumes after it.
    "inferbot_journal_cursors", metadata,
    Column("node", String(200), primary_key=True),
    Column("cursor", String(512), nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
