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
from pathlib import Path

from services.sim.scenarios import KIMI_UNIT, kimi_node
from services.store.migrate import head_version
from services.store.schema import SCHEMA_HEAD
from tests.conftest import MakeCluster
from tests.sshd import free_port

NEVER_FOR_A_QUESTION = {"slack_bolt", "slack_sdk", "aiohttp", "apscheduler", "matplotlib", "alembic", "mako",
                        "psycopg"}
"""Packages a question from the terminal must not import (Slack, the scheduler, charts, migrations, PostgreSQL)."""
NOT_FOR_HELP = NEVER_FOR_A_QUESTION | {"asyncio", "pydantic", "asyncssh", "cryptography", "sqlalchemy", "yaml",
                                       "prometheus_client", "tabulate"}
"""``--help`` and argument parsing need argparse only."""

# Runs bot.cli.main in a fresh interpreter and writes the top-level packages it imported to argv[1].
_PROBE = """
import json, sys
from bot.cli import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    status = main(argv)
except SystemExit as e:  # --help exits from argparse
    status = e.code
with open(out, "w") as f:
    json.dump({"status": status, "packages": sorted({m.split(".")[0] for m in sys.modules})}, f)
"""


def imported_by(argv: list[str]) -> tuple[int, set[str], str]:
    """(exit status, top-level packages imported, stdout) of ``inferbot ARGV`` in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    with tempfile.TemporaryDirectory(prefix="inferbot-imports-") as d:
        out = Path(d) / "imports.json"
        done = subprocess.run([sys.executable, "-c", _PROBE, str(out), *argv], capture_output=True, text=True,
                              timeout=120, env=env, cwd=d)
        assert out.exists(), done.stderr
        found = json.loads(out.read_text())
    return found["status"], set(found["packages"]), done.stdout


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
        status, packages, stdout = await asyncio.to_thread(imported_by, argv)
    reply = json.loads(stdout)
    assert status == 0 and reply["ok"], stdout
    assert [s["service"] for s in reply["data"]["services"]] == ["kimi"]
    assert "sqlalchemy" in packages  # the store was used (the settings were recorded)...
    assert not packages & NEVER_FOR_A_QUESTION, sorted(packages & NEVER_FOR_A_QUESTION)  # ...and nothing else
