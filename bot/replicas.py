"""Wiring for replicas: open the state store (schema checked and upgraded) and choose how to lead.

SQLite is one process (always the leader); PostgreSQL campaigns for the advisory lock
(``services.store.leader.PgLeader``). Both ``serve`` and ``check`` describe the store the same way.
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import DBAPIError

from bot.app import Runtime
from services.store.errors import SchemaError
from services.store.leader import Leadership, PgLeader, SoleLeader
from services.store.migrate_apart import upgrade_apart
from services.store.store import Store

log = logging.getLogger("inferbot.replicas")


def store_problem(store: Store, e: Exception) -> str:
    """One line for a store that can't be opened (never the password, never a traceback)."""
    if isinstance(e, SchemaError):
        return str(e)
    reason = type(e).__name__
    if isinstance(e, DBAPIError) and e.orig is not None:
        reason = (str(e.orig).strip().splitlines() or [reason])[-1]
    password = store.sqlalchemy_url.password
    if password:
        reason = reason.replace(str(password), "[redacted]")
    return (f"cannot open the state database ({store.describe()}): {reason} — check [state] url, that the "
            "server is up, and INFERBOT_DB_PASSWORD")


async def open_leadership(rt: Runtime) -> Leadership | str:
    """Prepare the store and return this replica's leadership, or a one-line problem."""
    store = rt.store
    if store is None:
        return SoleLeader()
    try:
        # A schema to create or upgrade is done by a helper process: Alembic and mako, which stay in a process
        # once imported, never load into the long-lived bot.
        await upgrade_apart(store)
        version = await store.prepare()
    except (SchemaError, DBAPIError, OSError) as e:
        return store_problem(store, e)
    leadership: Leadership = PgLeader(store.sqlalchemy_url) if store.is_postgres else SoleLeader()
    log.info("state store ready", extra={"event": "store", "store": store.describe(), "schema": version,
                                         "replica": leadership.replica})
    return leadership
