"""Upgrade the state schema in a helper process, so that the serving bot never imports Alembic.

Alembic (with mako) stays in a process's memory for good once imported, and the bot needs it only on the first
start on a new database or after an upgrade that brings a migration: ``inferbot serve`` hands that job to
``python -m services.store.migrate_apart`` and then finds the schema at its version, as a restarted bot does.
The helper opens the database exactly as the bot would (``Store``: the same URL, the same migration lock on
PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so replicas starting together still migrate one after the other.

The URL, which may hold the PostgreSQL password, goes to the helper on its standard input, never on its
command line (other users can read that); the password's own variables are left out of its environment, as
it needs only the URL. The helper prints one JSON line: the version, or only the type of what went wrong.
Whatever happens there, the caller goes on with its own store, which upgrades in-process or fails with its
usual one-line reason (a newer schema, a refused password): the helper saves memory, it never decides.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

from pydantic import BaseModel, ValidationError

from services.store.store import Store

log = logging.getLogger("inferbot.store")

HELPER = "services.store.migrate_apart"


class HelperAnswer(BaseModel):
    """What the helper prints: the schema version it left, or the type of the error that stopped it."""

    version: str | None = None
    error: str | None = None


async def upgrade_apart(store: Store) -> str | None:
    """Bring ``store``'s schema to this code's version in a helper process; returns the version it left.

    None when there was nothing to do here (the schema is already at its version, or the database lives in
    this process's memory) or when the helper did not finish: the store's own first use then does what it
    always did.
    """
    if store.in_memory:
        return None
    await asyncio.to_thread(store.check_schema)  # one read, no Alembic; a new SQLite file is not created
    if store.schema_version is not None:
        return None
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INFERBOT_DB_PASSWORD")}
        helper = await asyncio.create_subprocess_exec(
            sys.executable, "-m", HELPER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env)
        out, _ = await helper.communicate(store.jobstore_url().encode())
    except OSError as e:
        log.info("could not start the schema helper (%s); upgrading in this process", type(e).__name__)
        return None
    try:
        answer = HelperAnswer.model_validate_json(out.strip().splitlines()[-1] if out.strip() else b"{}")
    except ValidationError:
        answer = HelperAnswer(error="unreadable answer")
    if helper.returncode != 0 or answer.version is None:
        log.info("the schema helper stopped (%s); upgrading in this process", answer.error or helper.returncode)
        return None
    log.info("state schema upgraded by a helper process", extra={"event": "schema-upgrade", "to": answer.version})
    return answer.version


async def _upgrade(url: str) -> HelperAnswer:
    store = Store(url)
    try:
        return HelperAnswer(version=await store.prepare())
    finally:
        await store.close()


def main() -> int:
    """The helper: the URL on standard input, one JSON line on standard output (no message, no traceback:
    an error's text may quote the URL)."""
    url = sys.stdin.read().strip()
    try:
        answer = asyncio.run(_upgrade(url))
    except Exception as e:
        answer = HelperAnswer(error=type(e).__name__)
    print(answer.model_dump_json(exclude_none=True))
    return 0 if answer.version is not None else 1


if __name__ == "__main__":
    sys.exit(main())
