"""Alembic's environment for the state database: always run from :func:`services.store.migrate.upgrade`, on the
connection (and inside the transaction) the store opened, so SQLite's ``BEGIN IMMEDIATE`` or PostgreSQL's
advisory lock keeps two replicas from migrating at once."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from services.store import health_state  # its tables (silences, the health watch) join the store's metadata
from services.store.migrate import include_object
from services.store.schema import metadata as store_metadata
from services.store.shared_state import metadata as shared_metadata

# The schema is every table of the store: health_state's are on the same metadata only once that module is
# imported, which the code of a question no longer does (docs/architecture.md, "Lazy imports").
assert health_state.silences.metadata is store_metadata
connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations through services.store.migrate.upgrade (it passes the connection)")
context.configure(connection=connection, target_metadata=[store_metadata, shared_metadata],
                  include_object=include_object,
                  render_as_batch=True,  # SQLite alters tables by copying them
                  compare_type=True)
with context.begin_transaction():
    context.run_migrations()
