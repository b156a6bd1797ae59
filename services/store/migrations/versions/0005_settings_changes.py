"""Settings changes from a channel (issue 25): a change per request, with its number, and a step per node.

A separate revision so that it can be renumbered when another 0005 (the journal cursor, issue 26) lands first:
only ``revision`` / ``down_revision`` here and ``SCHEMA_HEAD`` in ``schema.py`` would move.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def _missing(table: str) -> bool:
    # A table already there (made by hand, or a half-run upgrade) is kept.
    return not sa.inspect(op.get_bind()).has_table(table)


def upgrade() -> None:
    if _missing('inferbot_changes'):
        op.create_table('inferbot_changes',
        sa.Column('number', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('op', sa.String(length=20), nullable=False),
        sa.Column('service', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('spec', sa.JSON(), nullable=True),
        sa.Column('diff', sa.JSON(), nullable=False),
        sa.Column('preflight', sa.JSON(), nullable=False),
        sa.Column('checked_with', sa.Text(), nullable=False),
        sa.Column('requested_by', sa.String(length=200), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('state_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('outcome', sa.Text(), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('number'),
        sa.UniqueConstraint('id')
        )
        op.create_index('ix_inferbot_changes_service', 'inferbot_changes', ['service', 'number'], unique=False)
    if _missing('inferbot_change_steps'):
        op.create_table('inferbot_change_steps',
        sa.Column('change_id', sa.String(length=64), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('state', sa.String(length=20), nullable=False),
        sa.Column('state_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('previous', sa.JSON(), nullable=True),
        sa.Column('delta', sa.JSON(), nullable=True),
        sa.Column('settings_since', sa.DateTime(timezone=True), nullable=True),
        sa.Column('load_started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('invocation', sa.String(length=200), nullable=True),
        sa.Column('ready_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('load_s', sa.Float(), nullable=True),
        sa.Column('back_s', sa.Float(), nullable=True),
        sa.Column('reason', sa.Text(), nullable=True),
        sa.Column('detail', sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint('change_id', 'node')
        )


def downgrade() -> None:
    op.drop_table('inferbot_change_steps')
    op.drop_index('ix_inferbot_changes_service', table_name='inferbot_changes')
    op.drop_table('inferbot_changes')
