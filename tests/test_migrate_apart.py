"""The serving bot's start creates or upgrades the state schema in a helper process: Alembic (~12 MB) never
loads into the bot, the password never reaches a command line, and whatever the helper meets, the bot's start
ends as it always did (the schema at its version, or the same one-line refusal)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from bot.app import Runtime, open_store
from bot.replicas import open_leadership
from config.models import BotConfig, StateSettings
from services.cluster import Cluster
from services.node.ssh import NodePool
from services.store import migrate_apart
from services.store.migrate import head_version
from services.store.store import Store
from tests.pg import PASSWORD, PgServer

ROOT = Path(__file__).resolve().parents[1]
A_NODE = '[[nodes]]\nname = "gpu-a"\nhost = "127.0.0.4"\n\n'

# `inferbot serve`'s start in a fresh interpreter (this one has imported Alembic long ago): the runtime, then
# bot.replicas.open_leadership, then which packages the process holds.
_SERVE_START = """
import asyncio, json, sys
from bot.app import runtime
from bot.replicas import open_leadership
from config.loader import load_config

async def main():
    async with runtime(load_config(sys.argv[1])) as rt:
        leadership = await open_leadership(rt)
        problem = leadership if isinstance(leadership, str) else None
        print(json.dumps({"problem": problem, "version": rt.store.schema_version,
                          "alembic": "alembic" in sys.modules, "mako": "mako" in sys.modules}))

asyncio.run(main())
"""


def serve_start(config: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What ``inferbot serve``'s start did with the store of ``config``, run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _SERVE_START, str(config)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(the ``[state]`` table of a config, the URL to check the database with, the environment)."""
    if request.param == "sqlite":
        (tmp_path / "state").mkdir()
        yield f'[state]\ndir = "{tmp_path / "state"}"\n', f"sqlite:///{tmp_path / 'state' / 'inferbot.sqlite3'}", {}
        return
    server: PgServer = request.getfixturevalue("pg_server")
    db = server.database()
    yield f'[state]\nurl = "{server.config_url(db)}"\n', server.url(db), {"INFERBOT_DB_PASSWORD": PASSWORD}


async def test_a_first_start_creates_the_schema_without_alembic_in_the_bot(
        state: tuple[str, str, dict[str, str]], tmp_path: Path) -> None:
    table, url, env = state
    config = tmp_path / "inferbot.toml"
    config.write_text(A_NODE + table)  # a config naming no node is refused (nothing to ask)
    first = await asyncio.to_thread(serve_start, config, env)
    assert first == {"problem": None, "version": head_version(), "alembic": False, "mako": False}
    check = Store(url)
    assert await check.schema_status() == (head_version(), head_version())  # created, at its version
    await check.close()
    # A restart finds it at its version: no helper is needed, nothing imported either.
    assert await asyncio.to_thread(serve_start, config, env) == first


async def test_an_older_schema_is_upgraded_by_the_helper(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    store = Store(url)
    await store.prepare()
    await store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0002'"))
    engine.dispose()
    store = Store(url)
    assert await migrate_apart.upgrade_apart(store) == head_version()
    assert await store.schema_status() == (head_version(), head_version())
    await store.close()


async def test_the_password_reaches_the_helper_on_its_standard_input_only(
        pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERBOT_DB_PASSWORD", PASSWORD)
    cfg = BotConfig(state=StateSettings(url=pg_server.config_url(pg_server.database())))
    store = open_store(cfg)
    started: list[tuple[tuple[str, ...], dict[str, str]]] = []
    real = asyncio.create_subprocess_exec

    async def recording(*argv: str, **kw: Any) -> asyncio.subprocess.Process:
        started.append((argv, kw.get("env") or dict(os.environ)))
        return await real(*argv, **kw)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    assert await migrate_apart.upgrade_apart(store) == head_version()
    assert len(started) == 1
    argv, env = started[0]
    assert not any(PASSWORD in a for a in argv)
    assert not any(PASSWORD in v for v in env.values())  # INFERBOT_DB_PASSWORD itself is left out
    assert await store.prepare() == head_version()  # the bot's store finds it done
    await store.close()


async def test_a_newer_schema_is_still_refused_in_one_line(tmp_path: Path) -> None:
    cfg = BotConfig(state=StateSettings(dir=str(tmp_path)))
    store = open_store(cfg)
    await store.prepare()
    await store.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'inferbot.sqlite3'}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    pool = NodePool()
    rt = Runtime(config=cfg, pool=pool, cluster=Cluster(cfg, pool), store=open_store(cfg))
    problem = await open_leadership(rt)
    assert isinstance(problem, str)
    assert f"schema version 0099, newer than this inferbot knows ({head_version()})" in problem
    assert "\n" not in problem
    assert rt.store is not None
    await rt.store.close()
    await pool.close()


async def test_a_helper_that_does_not_finish_leaves_the_upgrade_to_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migrate_apart, "HELPER", "services.store.no_such_helper")
    store = Store(f"sqlite:///{tmp_path / 'inferbot.sqlite3'}")
    assert await migrate_apart.upgrade_apart(store) is None
    assert await store.prepare() == head_version()  # the store's first use did it, as before
    await store.close()


async def test_an_in_memory_database_is_upgraded_where_it_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*argv: str, **kw: Any) -> asyncio.subprocess.Process:
        raise AssertionError("no helper for a database that exists in this process only")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse)
    store = Store("sqlite:///:memory:")
    assert await migrate_apart.upgrade_apart(store) is None
    assert await store.prepare() == head_version()
    await store.close()
