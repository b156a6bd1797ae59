"""The state schema of inferbot before versions: snapshots, loads, audit, locks, requests, follows, notices…

A database created by an older inferbot (tables made with ``create_all``, no ``alembic_version``) is
adopted: only the tables it lacks are created.

Revision ID: 0001
Revises: None
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def _missing(table: str) -> bool:
    # A database from before schema versions already has some or all of these tables.
    return not sa.inspect(op.get_bind()).has_table(table)


def upgrade() -> None:
    # One step per aggregate of the store (services/store/), in the order the tables were always created.
    _audit()
    _follows()
    _home_views()
    _loads()
    _locks()
    _samples()
    _notices()
    _requests()
    _restarts()
    _snapshots()
    _watches()


def _audit() -> None:
    """The audit log: every request, confirmation, restart and notice, with who and where."""
    if _missing('inferbot_audit'):
        op.create_table('inferbot_audit',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('event', sa.String(length=100), nullable=False),
        sa.Column('who', sa.String(length=200), nullable=True),
        sa.Column('where', sa.String(length=200), nullable=True),
        sa.Column('service', sa.String(length=200), nullable=True),
        sa.Column('node', sa.String(length=200), nullable=True),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.Column('request_id', sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint('id')
        )
        op.create_index('ix_inferbot_audit_service', 'inferbot_audit', ['service', 'at'], unique=False)


def _follows() -> None:
    """Follows: a load being watched until it is ready or failed, and where its progress is shown."""
    if _missing('inferbot_follows'):
        op.create_table('inferbot_follows',
        sa.Column('follow_key', sa.String(length=300), nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('unit', sa.String(length=300), nullable=False),
        sa.Column('invocation_id', sa.String(length=200), nullable=True),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('reason', sa.String(length=20), nullable=False),
        sa.Column('thread_channel', sa.String(length=200), nullable=True),
        sa.Column('thread_ts', sa.String(length=100), nullable=True),
        sa.Column('progress_message_ts', sa.String(length=100), nullable=True),
        sa.Column('request_id', sa.String(length=200), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('outcome', sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint('follow_key')
        )


def _home_views() -> None:
    """The App Home views people opened, to refresh them."""
    if _missing('inferbot_home_views'):
        op.create_table('inferbot_home_views',
        sa.Column('user_id', sa.String(length=200), nullable=False),
        sa.Column('opened_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('dirty', sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint('user_id')
        )


def _loads() -> None:
    """Load history: each load's outcome and duration, and when each of its phases was first seen."""
    if _missing('inferbot_load_phases'):
        op.create_table('inferbot_load_phases',
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('invocation_id', sa.String(length=200), nullable=False),
        sa.Column('phase', sa.String(length=40), nullable=False),
        sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('service', 'node', 'invocation_id', 'phase')
        )
    if _missing('inferbot_loads'):
        op.create_table('inferbot_loads',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('invocation_id', sa.String(length=200), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ready_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('outcome', sa.String(length=20), nullable=False),
        sa.Column('duration_s', sa.Float(), nullable=False),
        sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('service', 'node', 'invocation_id', name='uq_inferbot_loads_invocation')
        )
        op.create_index('ix_inferbot_loads_target', 'inferbot_loads', ['service', 'node', 'started_at'], unique=False)


def _locks() -> None:
    """Locks: one holder per name until it expires."""
    if _missing('inferbot_locks'):
        op.create_table('inferbot_locks',
        sa.Column('name', sa.String(length=300), nullable=False),
        sa.Column('owner', sa.String(length=300), nullable=False),
        sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('name')
        )


def _samples() -> None:
    """Metric samples the watcher took from /metrics."""
    if _missing('inferbot_metric_samples'):
        op.create_table('inferbot_metric_samples',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('resolution_s', sa.Integer(), nullable=False),
        sa.Column('generation_tps', sa.Float(), nullable=True),
        sa.Column('prompt_tps', sa.Float(), nullable=True),
        sa.Column('running', sa.Float(), nullable=True),
        sa.Column('waiting', sa.Float(), nullable=True),
        sa.Column('kv_cache_usage', sa.Float(), nullable=True),
        sa.Column('generation_total', sa.Float(), nullable=True),
        sa.Column('prompt_total', sa.Float(), nullable=True),
        sa.Column('process_start', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('service', 'node', 'resolution_s', 'at', name='uq_inferbot_metric_samples')
        )
        op.create_index('ix_inferbot_metric_samples_target', 'inferbot_metric_samples', ['service', 'node', 'at'],
                        unique=False)


def _notices() -> None:
    """Notice claims: each notice once per place and invocation."""
    if _missing('inferbot_notices'):
        op.create_table('inferbot_notices',
        sa.Column('follow_key', sa.String(length=300), nullable=False),
        sa.Column('place', sa.String(length=200), nullable=False),
        sa.Column('invocation_id', sa.String(length=200), nullable=False),
        sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('ts', sa.String(length=100), nullable=True),
        sa.UniqueConstraint('follow_key', 'place', 'invocation_id', name='uq_inferbot_notices_once')
        )


def _requests() -> None:
    """Confirmable requests and their state."""
    if _missing('inferbot_requests'):
        op.create_table('inferbot_requests',
        sa.Column('id', sa.String(length=200), nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('unit', sa.String(length=300), nullable=False),
        sa.Column('requested_by', sa.String(length=200), nullable=True),
        sa.Column('channel', sa.String(length=200), nullable=True),
        sa.Column('thread_ts', sa.String(length=100), nullable=True),
        sa.Column('message_channel', sa.String(length=200), nullable=True),
        sa.Column('message_ts', sa.String(length=100), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('force', sa.Boolean(), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('state_by', sa.String(length=200), nullable=True),
        sa.Column('state_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('confirmed_by', sa.String(length=200), nullable=True),
        sa.Column('confirmed_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id')
        )
        op.create_index('ix_inferbot_requests_state', 'inferbot_requests', ['state'], unique=False)


def _restarts() -> None:
    """Restarts the bot ran (cooldowns)."""
    if _missing('inferbot_restarts'):
        op.create_table('inferbot_restarts',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('by', sa.String(length=200), nullable=True),
        sa.Column('forced', sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint('id')
        )
        op.create_index('ix_inferbot_restarts_target', 'inferbot_restarts', ['service', 'node', 'at'], unique=False)


def _snapshots() -> None:
    """Snapshots of a service's settings as they were seen."""
    if _missing('inferbot_snapshots'):
        op.create_table('inferbot_snapshots',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('unit', sa.String(length=300), nullable=False),
        sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('model', sa.Text(), nullable=True),
        sa.Column('flags', sa.JSON(), nullable=False),
        sa.Column('env', sa.JSON(), nullable=False),
        sa.Column('version', sa.String(length=200), nullable=True),
        sa.Column('state', sa.String(length=40), nullable=False),
        sa.Column('was_ready', sa.Boolean(), nullable=False),
        sa.Column('last_ready_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id')
        )
        op.create_index('ix_inferbot_snapshots_target', 'inferbot_snapshots', ['service', 'node', 'id'], unique=False)


def _watches() -> None:
    """The watcher's baseline of each unit (unplanned restarts)."""
    if _missing('inferbot_watch'):
        op.create_table('inferbot_watch',
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('main_pid', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('n_restarts', sa.Integer(), nullable=False),
        sa.Column('active_state', sa.String(length=40), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('service', 'node')
        )


def downgrade() -> None:
    op.drop_table('inferbot_watch')
    op.drop_table('inferbot_snapshots')
    op.drop_table('inferbot_restarts')
    op.drop_table('inferbot_requests')
    op.drop_table('inferbot_notices')
    op.drop_table('inferbot_metric_samples')
    op.drop_table('inferbot_locks')
    op.drop_table('inferbot_loads')
    op.drop_table('inferbot_load_phases')
    op.drop_table('inferbot_home_views')
    op.drop_table('inferbot_follows')
    op.drop_table('inferbot_audit')
