"""A cold command pays only for what it uses: what ``inferbot --help`` and a question from the terminal import.

Speed a person notices at every cold ``inferbot`` (the Slack front end, the scheduler, charts and Alembic
cost ~0.3 s of CPU to import), checked without a clock: each case runs the command in a fresh interpreter
and looks at the packages it imported. The timings themselves are measured by the benchmark, not here.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

import bot.app
from bot.ask_once import ask
from config.models import BotConfig, Node
from handlers.context import Context
from services.cluster import Cluster
from services.models import CommandResult
from services.node.ssh import NodePool
from services.sim.scenarios import KIMI_UNIT, kimi_node
from services.store.errors import SchemaError
from services.store.migrate import head_version
from services.store.schema import SCHEMA_HEAD
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.sshd import free_port

NEVER_FOR_A_QUESTION = {"slack_bolt", "slack_sdk", "aiohttp", "apscheduler", "matplotlib", "alembic", "mako",
                        "psycopg"}
"""Packages a question from the terminal must not import (Slack, the scheduler, charts, migrations, PostgreSQL)."""
NOT_FOR_HELP = NEVER_FOR_A_QUESTION | {"asyncio", "pydantic", "asyncssh", "cryptography", "sqlalchemy", "yaml",
                                       "prometheus_client", "tabulate"}
"""``--help`` and argument parsing need argparse only."""

# Runs bot.cli.main in a fresh interpreter and writes the top-level packages it imported, and the programs it
# started (the interpreter's own audit events), to argv[1].
_PROBE = """
import json, os, sys
started = []
sys.addaudithook(lambda event, args: started.append(os.path.basename(str(args[0])))
                 if event == "subprocess.Popen" else None)
from bot.cli import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    status = main(argv)
except SystemExit as e:  # --help exits from argparse
    status = e.code
with open(out, "w") as f:
    json.dump({"status": status, "packages": sorted({m.split(".")[0] for m in sys.modules}), "started": started}, f)
"""

COMPILER = {"gcc", "cc", "collect2", "ld", "x86_64-linux-gnu-gcc"}
"""What ``ctypes.util.find_library`` starts for a library the loader's cache lacks (asyncssh asks for liboqs)."""


def imported_by(argv: list[str]) -> tuple[int, set[str], str]:
    """(exit status, top-level packages imported, stdout) of ``inferbot ARGV`` in a fresh interpreter."""
    status, packages, stdout, _ = run_fresh(argv)
    return status, packages, stdout


def run_fresh(argv: list[str]) -> tuple[int, set[str], str, list[str]]:
    """``imported_by`` and the names of the programs the command started."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    with tempfile.TemporaryDirectory(prefix="inferbot-imports-") as d:
        out = Path(d) / "imports.json"
        done = subprocess.run([sys.executable, "-c", _PROBE, str(out), *argv], capture_output=True, text=True,
                              timeout=120, env=env, cwd=d)
        assert out.exists(), done.stderr
        found = json.loads(out.read_text())
    return found["status"], set(found["packages"]), done.stdout, found["started"]


def test_help_imports_argparse_only() -> None:
    status, packages, stdout = imported_by(["--help"])
    assert status == 0
    assert "usage: inferbot" in stdout
    assert not packages & NOT_FOR_HELP, sorted(packages & NOT_FOR_HELP)


def test_the_ask_path_opens_sqlalchemy_only_with_the_store() -> None:
    # Importing the code of `ask` (routing, every handler, the cluster) must not import the store's engine:
    # it is imported when a store is opened (bot/app.py:open_store), so a command without one never pays.
    code = "import sys, bot.ask_once; print(sorted({m.split('.')[0] for m in sys.modules}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    packages = set(json.loads(done.stdout.replace("'", '"')))
    heavy = packages & (NEVER_FOR_A_QUESTION | {"sqlalchemy", "yaml", "prometheus_client"})
    assert not heavy, sorted(heavy)


def test_schema_head_is_alembics_head() -> None:
    # The store skips Alembic when the database is at SCHEMA_HEAD: a new migration must move it too.
    assert head_version() == SCHEMA_HEAD


async def test_a_question_imports_no_slack_scheduler_charts_or_alembic(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())})
    node = cluster.config.nodes[0]
    with tempfile.TemporaryDirectory(prefix="inferbot-cold-") as d:
        state = Path(d) / "state"
        state.mkdir()
        config = Path(d) / "inferbot.toml"
        config.write_text(f"""
[[nodes]]
name = "gpu-a"
host = "{node.host}"
port = {node.port}
user = "{node.user}"
key_file = "{node.key_file}"
known_hosts = "{node.known_hosts}"

[[services]]
name = "kimi"
node = "gpu-a"
unit = "{KIMI_UNIT}"

[state]
dir = "{state}"
""")
        argv = ["ask", "what are current settings?", "--json", "--config", str(config)]
        # The first question creates the state database: that is Alembic's job.
        status, first, _ = await asyncio.to_thread(imported_by, argv)
        assert status == 0
        assert "alembic" in first
        # Every later one finds the schema at its version and imports none of it.
        status, packages, stdout, started = await asyncio.to_thread(run_fresh, argv)
    reply = json.loads(stdout)
    assert status == 0 and reply["ok"], stdout
    assert [s["service"] for s in reply["data"]["services"]] == ["kimi"]
    assert "sqlalchemy" in packages  # the store was used (the settings were recorded)...
    assert not packages & NEVER_FOR_A_QUESTION, sorted(packages & NEVER_FOR_A_QUESTION)  # ...and nothing else
    # asyncssh's optional libraries are looked up in the loader's cache only: no compiler is run to find them.
    assert not set(started) & COMPILER, started


async def test_ask_opens_the_store_while_the_nodes_are_asked(make_cluster: MakeCluster,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # The order of events, not a clock: opening the store (SQLAlchemy's import) waits here until the probe
    # has been sent, which only works when the two overlap. Opened first and then asked (as before), the
    # opening would give up waiting and the probe would come after it.
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())})
    events: list[str] = []
    probe_sent = threading.Event()
    real_open, real_run = bot.app.open_store, NodePool.run

    def open_store(config: BotConfig) -> Store:
        events.append("store: opening")
        events.append("store: saw the probe" if probe_sent.wait(5) else "store: no probe yet")
        store = real_open(config)
        events.append("store: opened")
        return store

    async def run(self: NodePool, node: Node, command: str, limit_s: float | None = None,
                  stdin: str | None = None, wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        events.append("probe sent")
        probe_sent.set()
        return await real_run(self, node, command, limit_s, stdin, wait_s, read_only)

    monkeypatch.setattr(bot.app, "open_store", open_store)
    monkeypatch.setattr(NodePool, "run", run)
    assert await ask(cluster.config, "what are current settings?", as_json=True) == 0
    assert events == ["store: opening", "probe sent", "store: saw the probe", "store: opened"]
    reply = json.loads(capsys.readouterr().out)
    assert reply["ok"] and [s["service"] for s in reply["data"]["services"]] == ["kimi"]
    # ...and the answer was recorded, as when the store is opened first.
    store = real_open(cluster.config)
    try:
        assert len(await store.snapshots.latest("kimi", "gpu-a", limit=5)) == 1
    finally:
        await store.close()


async def test_a_store_that_fails_to_open_in_the_background_fails_the_question(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Nothing is printed: the error reaches the command (one line, exit 2) as when the store opened first.
    def open_store(config: BotConfig) -> Store:
        raise SchemaError("the state database is broken — restore it")

    monkeypatch.setattr(bot.app, "open_store", open_store)
    config = BotConfig.model_validate({"state": {"dir": str(tmp_path)}})
    with pytest.raises(SchemaError, match="broken"):
        await ask(config, "what are current settings?", as_json=True)
    assert capsys.readouterr().out == ""


async def test_the_background_schema_read_changes_nothing(tmp_path: Path) -> None:
    # A database that does not exist yet is not created (the first use creates and migrates it)...
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    fresh = Store(url)
    fresh.check_schema()
    assert fresh.schema_version is None and not (tmp_path / "state.sqlite3").exists()
    assert await fresh.prepare() == SCHEMA_HEAD
    await fresh.close()
    # ...and one at the head version needs no second look on its first use.
    again = Store(url)
    again.check_schema()
    assert again.schema_version == SCHEMA_HEAD
    await again.close()


# bot.cli.entry around a stand-in command: it prints without a newline (buffered: a pipe), registers an exit
# handler and leaves an object whose finaliser would run when the interpreter is taken apart.
_EXIT = """
import atexit, sys
import bot.cli
out = sys.argv[1]
class Teardown:
    def __init__(self, path, opener):
        self.path, self.opener = path, opener
    def __del__(self):
        self.opener(self.path, "w").close()
def command(argv=None):
    print("answer", end="")
    atexit.register(lambda: open(out + ".handler", "w").close())
    bot.cli.keep = Teardown(out + ".teardown", open)
    return 3
if sys.argv[2] == "handler-first":
    atexit.register(lambda: None)
bot.cli.main = command
bot.cli.entry()
"""


def test_the_console_script_ends_after_the_exit_handlers_without_the_teardown(tmp_path: Path) -> None:
    out = tmp_path / "marks"
    done = subprocess.run([sys.executable, "-c", _EXIT, str(out), "alone"], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (3, "answer"), done.stderr  # the status, the flushed output...
    assert Path(f"{out}.handler").exists()  # ...the command's exit handlers...
    assert not Path(f"{out}.teardown").exists()  # ...and no taking the interpreter apart
    # An exit handler registered before inferbot's (a sitecustomize's, coverage's) keeps the usual exit.
    done = subprocess.run([sys.executable, "-c", _EXIT, str(out), "handler-first"], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "answer"), done.stderr
    assert Path(f"{out}.teardown").exists()


def test_a_context_given_a_store_still_opening_waits_for_it_once(tmp_path: Path) -> None:
    config = BotConfig.model_validate({"state": {"dir": str(tmp_path)}})
    opening: Future[Store] = Future()
    ctx = Context(config=config, cluster=Cluster(config, NodePool()), store=opening)
    store = Store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    threading.Timer(0.05, opening.set_result, [store]).start()  # opened while the handler already runs
    assert ctx.store is store and ctx.store is store
    failed: Future[Store] = Future()
    failed.set_exception(SchemaError("the state database is broken"))
    broken = Context(config=config, cluster=Cluster(config, NodePool()), store=failed)
    with pytest.raises(SchemaError):
        _ = broken.store  # what opening raised, where the store is read
    assert Context(config=config, cluster=Cluster(config, NodePool())).store is None


def test_library_lookups_during_a_commands_imports_use_the_loaders_cache_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes.util

    from bot.cli import _loader_cache_lookups

    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    full = ctypes.util.find_library
    libc = full("c")
    assert libc  # the C library is in every loader cache
    compiled: list[str] = []
    monkeypatch.setattr(ctypes.util, "_findLib_gcc", lambda name: compiled.append(name))
    monkeypatch.setattr(ctypes.util, "_findLib_ld", lambda name: compiled.append(name))
    with _loader_cache_lookups():
        assert ctypes.util.find_library("c") == libc
        assert ctypes.util.find_library("inferbot-no-such-library") is None
    assert compiled == []
    assert ctypes.util.find_library is full  # restored on the way out
    # LD_LIBRARY_PATH is searched by the full lookup only (its linker pass): then it is kept.
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/inferbot-test/lib")
    with _loader_cache_lookups():
        assert ctypes.util.find_library("inferbot-no-such-library") is None
    assert compiled == ["inferbot-no-such-library", "inferbot-no-such-library"]
