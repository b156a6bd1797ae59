"""Requests get a kind (restart, bench): the one confirmable-request flow reads it instead of the id's prefix.

Requests made before it are given theirs from their id: a benchmark's id starts with ``b-`` (the only other
kind there was), every other request is a restart's. A request still in flight when the bot is upgraded
carries on as what it was.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

_TABLE = 'inferbot_requests'


def upgrade() -> None:
    columns = {c['name'] for c in sa.inspect(op.get_bind()).get_columns(_TABLE)}
    if 'kind' in columns:  # a column already there (made by hand, or a half-run upgrade) is kept
        return
    with op.batch_alter_table(_TABLE) as batch:
        batch.add_column(sa.Column('kind', sa.String(length=20), nullable=True))
    requests = sa.table(_TABLE, sa.column('id', sa.String()), sa.column('kind', sa.String()))
    # substr rather than LIKE: exact and case-sensitive on SQLite and PostgreSQL alike.
    op.execute(requests.update().values(kind=sa.case((sa.func.substr(requests.c.id, 1, 2) == 'b-', 'bench'),
                                                     else_='restart')))
    with op.batch_alter_table(_TABLE) as batch:
        batch.alter_column('kind', existing_type=sa.String(length=20), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table(_TABLE) as batch:
        batch.drop_column('kind')
