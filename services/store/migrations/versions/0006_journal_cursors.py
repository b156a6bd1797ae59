"""Push, not poll (issue 26): where the leader's journal stream of each node has got to.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table('inferbot_journal_cursors'):
        return  # made by hand, or by a half-run upgrade: kept
    op.create_table('inferbot_journal_cursors',
    sa.Column('node', sa.String(length=200), nullable=False),
    sa.Column('cursor', sa.String(length=512), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('node')
    )


def downgrade() -> None:
    op.drop_table('inferbot_journal_cursors')
