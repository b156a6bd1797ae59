"""Replicas: event de-duplication, rate limits and progress pacing move from process memory to the database.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def _missing(table: str) -> bool:
    # Created once; a table already there (made by hand, or a half-run upgrade) is kept.
    return not sa.inspect(op.get_bind()).has_table(table)


def upgrade() -> None:
    if _missing('inferbot_events_seen'):
        op.create_table('inferbot_events_seen',
        sa.Column('event_id', sa.String(length=200), nullable=False),
        sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('event_id')
        )
        op.create_index('ix_inferbot_events_seen_at', 'inferbot_events_seen', ['seen_at'], unique=False)
    if _missing('inferbot_progress_pacing'):
        op.create_table('inferbot_progress_pacing',
        sa.Column('follow_key', sa.String(length=300), nullable=False),
        sa.Column('edited_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('phase', sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint('follow_key')
        )
    if _missing('inferbot_rate_hits'):
        op.create_table('inferbot_rate_hits',
        sa.Column('user_id', sa.String(length=200), nullable=False),
        sa.Column('hits', sa.JSON(), nullable=False),
        sa.Column('told_at', sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint('user_id')
        )


def downgrade() -> None:
    op.drop_table('inferbot_rate_hits')
    op.drop_table('inferbot_progress_pacing')
    op.drop_table('inferbot_events_seen')
