"""The state store's one-line errors, in a module that imports nothing heavy.

``inferbot`` catches them around every command (exit 2, one line) without importing SQLAlchemy or
Alembic, which the commands that never open the store (``--help``, a usage error) must not pay for.
:mod:`services.store.migrate` and :mod:`services.store.db_url` raise them and re-export them.
"""

from __future__ import annotations

__all__ = ["DatabaseUrlError", "SchemaError", "SchemaTooNew"]


class SchemaError(RuntimeError):
    """The state database's schema can't be used; the message is one line saying what to do."""


class SchemaTooNew(SchemaError):
    """The database was upgraded by a newer inferbot than this one."""


class DatabaseUrlError(ValueError):
    """The ``[state] url`` or its password can't be used; the message is one line saying what to do."""
