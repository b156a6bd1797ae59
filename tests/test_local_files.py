"""Files named on this machine (the config, secret files, SSH keys) through the real ``inferbot`` command.

``/dev/zero`` was read without end (4.6 GB after 8 s) and a FIFO made the command wait for a writer forever
(issue 22). Each case runs the console script as a subprocess with a timeout and a cap on its address space,
so a regression fails here (a timeout, or a MemoryError traceback) instead of hanging the run or filling the
machine's memory. The FIFOs are real (``os.mkfifo``) and nothing ever opens their other end.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_cli_local_input import COMMANDS, CONFIG, INFERBOT, assert_one_line

LIMIT_S = 30
ADDRESS_SPACE = 3 << 30  # far more than a command needs; far less than reading /dev/zero for 30 s


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    base["HOME"] = tempfile.gettempdir()
    return subprocess.run([INFERBOT, *args], capture_output=True, text=True, timeout=LIMIT_S,
                          env={**base, **(env or {})}, cwd=tempfile.gettempdir(), preexec_fn=_cap_memory)


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="inferbot-files-"))
    (d / "known_hosts").write_text("")
    os.mkfifo(d / "fifo")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def write_config(workdir: Path, text: str = CONFIG) -> Path:
    path = workdir / "inferbot.toml"
    path.write_text(text.format(dir=workdir, state=workdir))
    return path


@pytest.mark.parametrize("where", ["/dev/zero", "fifo"])
def test_a_config_that_is_no_regular_file_is_exit_2_for_every_command(workdir: Path, where: str) -> None:
    path = "/dev/zero" if where == "/dev/zero" else str(workdir / "fifo")
    kind = "character device" if where == "/dev/zero" else "FIFO"
    for cmd in COMMANDS:
        done = run([*cmd, "--config", path])
        assert_one_line(done, path, kind, "not a regular file")
        if "--json" in cmd:
            assert json.loads(done.stdout)["ok"] is False
    # $INFERBOT_CONFIG is read the same way.
    for cmd in (["ask", "status"], ["check"]):
        assert_one_line(run(cmd, env={"INFERBOT_CONFIG": path}), path, kind)


def test_a_config_larger_than_the_cap_is_exit_2(workdir: Path) -> None:
    big = workdir / "big.toml"
    with big.open("wb") as f:  # sparse: 5.5 MiB that take no disk
        f.truncate(11 << 19)
    for cmd in (["ask", "status"], ["check"], ["restart", "kimi"]):
        assert_one_line(run([*cmd, "--config", str(big)]), str(big), "5.5 MiB", "more than the 4 MiB")


@pytest.mark.parametrize("where", ["/dev/zero", "fifo"])
def test_slack_token_files_that_are_no_regular_files_are_exit_2(workdir: Path, where: str) -> None:
    config = write_config(workdir)
    path = "/dev/zero" if where == "/dev/zero" else str(workdir / "fifo")
    for name in ("SLACK_BOT_TOKEN_FILE", "SLACK_APP_TOKEN_FILE"):
        env = {"SLACK_BOT_TOKEN": "xoxb-1-2-abc", name: path} if name != "SLACK_BOT_TOKEN_FILE" else {name: path}
        assert_one_line(run(["serve", "--config", str(config)], env=env), f"{name}={path}", "not a regular file")
    env = {"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_SIGNING_SECRET_FILE": path}
    assert_one_line(run(["serve", "--http", "--config", str(config)], env=env), "SLACK_SIGNING_SECRET_FILE")


@pytest.mark.parametrize("where", ["/dev/zero", "fifo"])
def test_a_database_password_file_that_is_no_regular_file_is_exit_2(workdir: Path, where: str) -> None:
    text = CONFIG.replace('dir = "{state}"', 'url = "postgresql://inferbot@127.0.0.4:9/inferbot"')
    config = write_config(workdir, text)
    path = "/dev/zero" if where == "/dev/zero" else str(workdir / "fifo")
    for cmd in (["ask", "status"], ["check"], ["restart", "kimi", "--yes", "kimi"]):
        done = run([*cmd, "--config", str(config)], env={"INFERBOT_DB_PASSWORD_FILE": path})
        assert_one_line(done, f"INFERBOT_DB_PASSWORD_FILE={path}", "not a regular file")


@pytest.mark.parametrize("key", ["key_file", "known_hosts", "key_file.pub"])
def test_ssh_files_that_are_no_regular_files_fail_their_node_and_say_which(workdir: Path, key: str) -> None:
    # A node's own files fail that node (as a missing key file does), with the file and what it is.
    text = CONFIG
    if key == "key_file":
        text = text.replace('timeout = "1s"', 'timeout = "1s"\nkey_file = "/dev/zero"')
    elif key == "known_hosts":
        text = text.replace('known_hosts = "{dir}/known_hosts"', 'known_hosts = "{dir}/fifo"')
    else:  # asyncssh reads the key's .pub beside it too
        (workdir / "id").write_text("not read")
        os.symlink("/dev/zero", workdir / "id.pub")
        text = text.replace('timeout = "1s"', 'timeout = "1s"\nkey_file = "{dir}/id"')
    config = write_config(workdir, text)
    done = run(["check", "--json", "--config", str(config)])
    assert done.returncode == 1, (done.stdout, done.stderr)
    node = json.loads(done.stdout)["nodes"][0]
    what = node["problems"][0]["what"]
    assert node["ok"] is False and "not a regular file" in what, what
    assert ("key file" in what) if key != "known_hosts" else ("known_hosts file" in what and "FIFO" in what)
    done = run(["ask", "status", "--config", str(config)])
    assert done.returncode == 0 and "not a regular file" in done.stdout, (done.stdout, done.stderr)


def test_a_fifo_where_the_state_database_goes_is_exit_2(workdir: Path) -> None:
    state = workdir / "state"
    state.mkdir()
    os.mkfifo(state / "inferbot.sqlite3")
    config = write_config(workdir, CONFIG.replace('dir = "{state}"', f'dir = "{state}"'))
    for cmd in (["ask", "status"], ["check"], ["restart", "kimi", "--yes", "kimi"]):
        assert_one_line(run([*cmd, "--config", str(config)]), "inferbot.sqlite3", "FIFO")
