"""Versions of the state database's schema, upgraded on start with Alembic, the same on SQLite and PostgreSQL.

:func:`upgrade` runs on the connection (and inside the write transaction) the store opened: on SQLite that
transaction is ``BEGIN IMMEDIATE``, on PostgreSQL it first takes a transaction-level advisory lock, so two
replicas starting at once migrate one after the other and the second finds nothing to do. A database
written by a newer inferbot (a revision this one does not know) is refused with :class:`SchemaTooNew`
before anything is touched: an old replica must not write into a schema it does not understand.

A database created before versions existed (tables present, no ``alembic_version``) is adopted by the
first revision, which creates only the tables that are missing.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from services.store.errors import SchemaError, SchemaTooNew

__all__ = ["MIGRATION_LOCK", "SchemaError", "SchemaTooNew", "current_version", "head_version", "include_object",
           "upgrade"]

MIGRATION_LOCK = 0x1F_B0_7D_B1
"""PostgreSQL advisory lock key (transaction level) held while one replica migrates."""
_HERE = Path(__file__).resolve().parent / "migrations"
_NOT_OURS = frozenset({"apscheduler_jobs"})  # APScheduler creates and owns its job table


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head_version() -> str:
    """The newest schema version this inferbot knows."""
    head = _script().get_current_head()
    assert head is not None, "no migrations"
    return head


def current_version(connection: Connection) -> str | None:
    """The schema version of the database (None: not versioned yet, or empty)."""
    return MigrationContext.configure(connection).get_current_revision()


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    """Autogenerate hook: leave tables we do not own (APScheduler's) alone."""
    return not (type_ == "table" and name in _NOT_OURS)


def upgrade(connection: Connection, where: str) -> str:
    """Bring the schema to :func:`head_version` inside the caller's transaction; returns the version.

    ``where`` names the database for the one-line error (``SQLite /path``, ``PostgreSQL host/db``).
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    script = _script()
    current = current_version(connection)
    head = head_version()
    if current is not None:
        try:
            known = script.get_revision(current) is not None
        except Exception:  # alembic raises its own "can't locate revision" error types
            known = False
        if not known:
            raise SchemaTooNew(
                f"the state database ({where}) has schema version {current}, newer than this inferbot knows "
                f"({head}): upgrade inferbot on this host too, or point [state] url at another database")
    if current == head:
        return head
    logging.getLogger("inferbot.store").info("upgrading the state schema", extra={
        "event": "schema-upgrade", "from": current, "to": head})
    command.upgrade(_config(connection), "head")
    return head


def run_alembic(connection: Connection, name: str, *args: Any, **kwargs: Any) -> None:
    """Run another Alembic command (``revision``, ``check``, ``downgrade``…) on ``connection`` (developers)."""
    getattr(command, name)(_config(connection), *args, **kwargs)
