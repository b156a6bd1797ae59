"""The state database's address: ``[state] url`` plus a password that only ever comes from the environment.

``[state] url = "postgresql://inferbot@db:5432/inferbot"`` names the server, user and database; the password
is ``$INFERBOT_DB_PASSWORD`` or the contents of the file named by ``$INFERBOT_DB_PASSWORD_FILE`` (container
secrets). A password written into the config is refused, so it can't end up in a repository, a log line or
an error message. The password is kept in a SQLAlchemy :class:`~sqlalchemy.engine.URL` object, whose ``str``
and ``repr`` print ``***`` in its place; :func:`describe` gives the words for people (``check``, logs).

Any ``postgresql://`` / ``postgres://`` URL is driven by psycopg 3 (``postgresql+psycopg``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from config.local_file import LocalFileError, read_secret_file
from services.store.errors import DatabaseUrlError

__all__ = ["PASSWORD_ENV", "DatabaseUrlError", "database_url", "describe", "is_postgres", "is_sqlite"]

PASSWORD_ENV = "INFERBOT_DB_PASSWORD"
"""The environment variable holding the database password (``…_FILE``: a file holding it)."""

_PG_DRIVER = "postgresql+psycopg"


def _password(env: Mapping[str, str]) -> str | None:
    value = env.get(PASSWORD_ENV, "")
    if value.strip():
        return value.strip()
    path = env.get(f"{PASSWORD_ENV}_FILE", "").strip()
    if not path:
        return None
    try:
        value = read_secret_file(path)
    except LocalFileError as e:  # a FIFO or /dev/zero is refused, not waited on or read without end
        raise DatabaseUrlError(f"{PASSWORD_ENV}_FILE={path}: {e} — point it at the file holding the password") \
            from None
    if not value:
        raise DatabaseUrlError(f"{PASSWORD_ENV}_FILE={path} is empty: put the database password in it")
    return value


def database_url(url: str, env: Mapping[str, str]) -> URL:
    """The SQLAlchemy URL for ``url`` (from ``[state] url`` or the default SQLite file), password added.

    Raises :class:`DatabaseUrlError` (one line, never quoting a password) for a URL that does not parse,
    a password inside the URL, or an unreadable password file.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        # The text may hold a password: never quote it.
        raise DatabaseUrlError("[state] url is not a database URL: write it like "
                               "postgresql://inferbot@db:5432/inferbot (or leave it out for SQLite)") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed
    if parsed.password:
        raise DatabaseUrlError(f"[state] url must not hold the password: remove it from the URL and set "
                               f"{PASSWORD_ENV} (or {PASSWORD_ENV}_FILE) instead")
    if backend == "postgresql":
        parsed = parsed.set(drivername=_PG_DRIVER)
    password = _password(env)
    return parsed.set(password=password) if password is not None else parsed


def is_postgres(url: URL) -> bool:
    """True for a PostgreSQL URL."""
    return url.get_backend_name() == "postgresql"


def is_sqlite(url: URL) -> bool:
    """True for a SQLite URL (file or memory)."""
    return url.get_backend_name() == "sqlite"


def describe(url: URL) -> str:
    """Where the state lives, for people: ``SQLite /var/lib/inferbot/inferbot.sqlite3`` or
    ``PostgreSQL inferbot@db:5432/inferbot``. Never the password."""
    if is_sqlite(url):
        return f"SQLite {url.database or ':memory:'}"
    user = f"{url.username}@" if url.username else ""
    port = f":{url.port}" if url.port else ""
    name = "PostgreSQL" if is_postgres(url) else url.get_backend_name()
    return f"{name} {user}{url.host or 'localhost'}{port}/{url.database or ''}"
