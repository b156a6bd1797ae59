"""Alembic's environment for the state database: always run from :func:`services.store.migrate.upgrade`, on the
connection (and inside the transaction) the store opened, so SQLite's ``BEGIN IMMEDIATE`` or PostgreSQL's
advisory lock keeps two replicas from migrating at once."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from services.store.migrate import include_object
from services.store.schema import metadata  # every table of the store is declared there

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations through services.store.migrate.upgrade (it passes the connection)")
context.configure(connection=connection, target_metadata=metadata,
                  include_object=include_object,
                  render_as_batch=True,  # SQLite alters tables by copying them
                  compare_type=True)
with context.begin_transaction():
    context.run_migrations()
