"""Bad local input through the real ``inferbot`` command: exit 2, one line naming what and the fix, no traceback.

These run the console script from the venv as a subprocess, as a person would. The node is a closed
loopback port: nothing here needs a reachable node, and no command gets as far as asking one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster
from tests.sshd import free_port, login_user

INFERBOT = str(Path(sys.executable).parent / "inferbot")
CONFIG = """
[[nodes]]
name = "gpu-a"
host = "127.0.0.4"
port = 9
user = "inferbot"
known_hosts = "{dir}/known_hosts"
timeout = "1s"

[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"

[state]
dir = "{state}"
"""
COMMANDS = [["ask", "status"], ["ask", "--json", "status"], ["restart", "kimi", "--yes", "kimi"],
            ["serve"], ["check"], ["check", "--json"]]


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not pytest's tmp_path: that is private to root, and one case runs as an unprivileged user.
    d = Path(tempfile.mkdtemp(prefix="inferbot-cli-"))
    os.chmod(d, 0o755)
    (d / "known_hosts").write_text("")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(args: list[str], config: Path | None = None, user: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    env["HOME"] = str(config.parent if config else tempfile.gettempdir())
    argv = [INFERBOT, *args] + (["--config", str(config)] if config else [])
    if user is None:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=tempfile.gettempdir())
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=tempfile.gettempdir(),
                          user=user, group=user, extra_groups=[])


def write_config(workdir: Path, state: str) -> Path:
    path = workdir / "inferbot.toml"
    path.write_text(CONFIG.format(dir=workdir, state=state))
    os.chmod(path, 0o644)
    return path


def assert_one_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.mark.parametrize("case", ["missing", "file"])
def test_state_dir_missing_or_a_file_is_exit_2_for_every_command(workdir: Path, case: str) -> None:
    state = workdir / "state"
    if case == "file":
        state.write_text("not a directory")
    config = write_config(workdir, str(state))
    for cmd in COMMANDS:
        done = run(cmd, config)
        assert_one_line(done, "[state] dir", str(state), "mkdir -p" if case == "missing" else "is a file")
        if "--json" in cmd:
            out = json.loads(done.stdout)  # one JSON object, nothing else on stdout
            assert out["ok"] is False and "[state] dir" in out["error"]
    assert case != "missing" or not state.exists()  # a typo'd directory is not created behind your back


def test_state_dir_not_writable_is_exit_2(workdir: Path) -> None:
    state = workdir / "state"
    state.mkdir()
    os.chmod(state, 0o555)
    config = write_config(workdir, str(state))
    # root writes anywhere: as root, run the command as the unprivileged test user.
    user = login_user() if os.geteuid() == 0 else None
    for cmd in (["ask", "status"], ["restart", "kimi", "--yes", "kimi"], ["check"]):
        assert_one_line(run(cmd, config, user=user), "[state] dir", "not writable", "chown/chmod")


def test_config_not_utf8_and_empty_config_are_exit_2(workdir: Path) -> None:
    bad = workdir / "latin1.toml"
    bad.write_bytes(b"[[nodes]]\nname = 'caf\xe9'\n")
    assert_one_line(run(["ask", "status"], bad), "latin1.toml: not UTF-8")
    empty = workdir / "empty.toml"
    empty.write_text("")
    for cmd in (["ask", "status"], ["check"], ["restart", "kimi"]):
        assert_line_and_example(run(cmd, empty), "empty.toml: the config is empty", "[[nodes]]")


def assert_line_and_example(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 2, one line saying what is wrong, then config text to add (returned) that a person can paste."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    line, blank, example = done.stderr.partition("\n\n")
    assert blank and "\n" not in line.strip(), done.stderr
    for w in words:
        assert w in line, line
    return example


@pytest.mark.parametrize("text", ["[state]\ndir = \"{state}\"\n", "[watch]\ninterval = \"30s\"\n"])
def test_a_config_naming_no_node_says_what_to_add_and_is_exit_2(workdir: Path, text: str) -> None:
    # Valid TOML and valid keys, but no node: every question would be answered with nothing. `check` said
    # "valid (0 nodes, 0 services)" and exited 0 (issue 22).
    config = workdir / "inferbot.toml"
    config.write_text(text.format(state=workdir))
    examples = set()
    for cmd in COMMANDS:
        done = run(cmd, config)
        examples.add(assert_line_and_example(done, "inferbot.toml", "names no node", "[[nodes]]", "[[services]]"))
        if "--json" in cmd:
            out = json.loads(done.stdout)
            assert out["ok"] is False and "names no node" in out["error"] and "\n" not in out["error"]
            examples.add(out["example"])
    assert len(examples) == 1
    example = examples.pop()
    parsed = tomllib.loads(example)  # what it says to add is a node and its service, as TOML
    assert [n["name"] for n in parsed["nodes"]] == ["gpu-a"]
    assert [(s["name"], s["node"]) for s in parsed["services"]] == [("kimi", "gpu-a")]
    # Pasted in, the config gets past validation: `check` now tries the node (exit 1, it does not exist).
    reachable_here = f'host = "127.0.0.4"\nport = 9\nknown_hosts = "{workdir}/known_hosts"'
    config.write_text(text.format(state=workdir) + "\n" + example.replace('host = "10.0.0.5"', reachable_here))
    done = run(["check"], config)
    assert done.returncode == 1 and "valid (1 node, 1 service)" in done.stdout, (done.stdout, done.stderr)


def test_state_url_in_a_missing_directory_is_exit_2(workdir: Path) -> None:
    config = write_config(workdir, str(workdir))
    config.write_text(config.read_text().replace(f'dir = "{workdir}"', f'url = "sqlite:///{workdir}/nope/x.db"'))
    assert_one_line(run(["ask", "status"], config), "[state] url", f"mkdir -p {workdir}/nope")


def test_trailing_newline_in_unit_is_exit_2(workdir: Path) -> None:
    config = write_config(workdir, str(workdir))
    config.write_text(config.read_text().replace('unit = "vllm-kimi.service"', 'unit = "vllm-kimi.service\\n"'))
    assert_one_line(run(["check"], config), "[[services]] #1 ('kimi') → unit")


async def test_broken_store_is_one_line_not_a_traceback_per_answer(make_cluster: MakeCluster, workdir: Path) -> None:
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    node = cluster.config.nodes[0]
    state = workdir / "state"
    state.mkdir()
    (state / "inferbot.sqlite3").write_bytes(b"this is not an SQLite database\n" * 200)
    config = workdir / "inferbot.toml"
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
    done = await asyncio.to_thread(run, ["ask", "status"], config)
    assert done.returncode == 0, done.stderr
    assert "kimi on gpu-a" in done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert len([ln for ln in done.stderr.splitlines() if "state store unavailable" in ln]) == 1, done.stderr


def test_an_answer_piped_into_a_reader_that_went_away_ends_quietly() -> None:
    # `inferbot demo | head -c 0`: the reader is gone before the answer is printed. A person sees no
    # traceback and no "Exception ignored" from the interpreter's last flush, only the status a shell
    # gives a command ended by SIGPIPE.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
        done = subprocess.run([INFERBOT, "demo"], stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120, env=env, cwd=tempfile.gettempdir())
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""
