"""Readiness (issue 14): smoke completions, acceptance benchmarks, silences and the health watcher's memory.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def _missing(table: str) -> bool:
    # A bot that ran the readiness branch before versions made these with create_all: keep them.
    return not sa.inspect(op.get_bind()).has_table(table)


def upgrade() -> None:
    if _missing('inferbot_smoke_checks'):
        op.create_table('inferbot_smoke_checks',
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('invocation_id', sa.String(length=200), nullable=False),
        sa.Column('outcome', sa.String(length=20), nullable=False),
        sa.Column('ttft_s', sa.Float(), nullable=True),
        sa.Column('detail', sa.Text(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('service', 'node', 'invocation_id')
        )
    if _missing('inferbot_bench_runs'):
        op.create_table('inferbot_bench_runs',
        sa.Column('id', sa.String(length=400), nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('text', sa.Text(), nullable=True),
        sa.Column('status', sa.String(length=20), nullable=True),
        sa.Column('data', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('id')
        )
    if _missing('inferbot_silences'):
        op.create_table('inferbot_silences',
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('until', sa.DateTime(timezone=True), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('by', sa.String(length=200), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('service', 'node')
        )
    if _missing('inferbot_health_watch'):
        op.create_table('inferbot_health_watch',
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('data', sa.JSON(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('service', 'node')
        )


def downgrade() -> None:
    op.drop_table('inferbot_health_watch')
    op.drop_table('inferbot_silences')
    op.drop_table('inferbot_bench_runs')
    op.drop_table('inferbot_smoke_checks')
