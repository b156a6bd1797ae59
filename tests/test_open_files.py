"""The bot raises its soft limit of open files to fit one connection per node (up to the hard limit)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import FD_HEADROOM

PROBE = """
import json, logging, resource, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
from bot.app import raise_open_files
got = raise_open_files(int(sys.argv[1]))
print(json.dumps({"returned": got, "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
"""


def _run(nodes: int, soft: int, hard: int) -> tuple[dict[str, int], str]:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run([sys.executable, "-c", PROBE, str(nodes)], capture_output=True, text=True, timeout=60,
                          preexec_fn=limits)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _hard() -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 20 if hard == resource.RLIM_INFINITY else hard


def test_a_fleet_larger_than_the_soft_limit_gets_a_socket_per_node() -> None:
    hard = _hard()
    if hard < 1100 + FD_HEADROOM:
        pytest.skip(f"this machine's hard limit of open files is {hard}")
    got, said = _run(1100, 1024, hard)
    assert got["soft"] == got["returned"] == 1100 + FD_HEADROOM
    assert said == ""


def test_a_small_fleet_leaves_the_limit_alone() -> None:
    got, said = _run(10, 1024, _hard())
    assert got["soft"] == 1024 and said == ""


def test_a_hard_limit_too_low_is_used_whole_and_said_once() -> None:
    got, said = _run(1100, 512, 900)
    assert got["soft"] == got["returned"] == 900
    assert said.count("raise the hard limit") == 1 and "1100 nodes" in said


RUNTIME = """
import asyncio, resource, sys
from bot.app import runtime
from config.models import BotConfig

config = BotConfig.model_validate({"nodes": [{"name": f"n{i}", "host": "127.0.0.1", "user": "u"}
                                             for i in range(int(sys.argv[1]))], "services": [],
                                   "state": {"dir": sys.argv[2]}})

async def main() -> None:
    async with runtime(config, with_store=False):
        print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])

asyncio.run(main())
"""


def test_the_bot_raises_it_for_its_configured_nodes(tmp_path: Path) -> None:
    # What `inferbot serve`, `ask` and `check` all build: the limit is raised before any node is asked.
    hard = _hard()
    if hard < 1100 + FD_HEADROOM:
        pytest.skip(f"this machine's hard limit of open files is {hard}")

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))

    done = subprocess.run([sys.executable, "-c", RUNTIME, "1100", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, preexec_fn=limits)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 1100 + FD_HEADROOM
