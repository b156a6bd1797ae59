"""services/parse/launchers.py: the command a launcher runs is the one the real program runs.

Each case is started for real (coreutils, util-linux, env) with a recorder program as the wrapped command;
what the recorder was started with is the truth the parser's reading is held against.
"""

from __future__ import annotations

import os
import shutil

import pytest

from services.parse.launchers import is_launcher, skip_launchers
from tests.unit.services.parse.conftest import Run

SERVE = ["vllm", "serve", "/models/x", "--port", "8000", "-tp", "8"]

EXECS = [  # launchers that exec the command: the process's argv is the command's own
    ["env", "A=1", "B=2"],
    ["env", "-u", "HOME", "--unset=LANG", "A=1"],
    ["nice", "-n", "5"],
    ["nice", "--adjustment=5"],
    ["stdbuf", "-oL", "-e", "0"],
    ["timeout", "-k", "5", "600"],
    ["timeout", "--signal=TERM", "600"],
    ["taskset", "0x1"],
    ["ionice", "-c", "3"],
    ["chrt", "-o", "0"],
    ["setpriv", "--reuid", "0"],
    ["env", "A=1", "nice", "-n", "1", "taskset", "0x1", "stdbuf", "-o", "L", "timeout", "600"],  # stacked
]


@pytest.mark.parametrize("launchers", EXECS, ids=lambda words: " ".join(words))
def test_the_command_found_is_the_one_the_launchers_run(launchers: list[str], recorded: Run) -> None:
    if os.geteuid() != 0 and any(w in ("chrt", "setpriv") for w in launchers):
        pytest.skip("chrt and setpriv need root")
    if shutil.which(launchers[0]) is None:
        pytest.skip(f"{launchers[0]} is not installed")
    argv = [*launchers, *SERVE]
    (started,) = recorded(argv)
    launched = skip_launchers(argv)
    assert launched.command[1:] == started[1:] == SERVE[1:]
    assert started[0].endswith("/" + launched.command[0])
    assert launched.script is None


def test_su_runs_a_script_and_its_words_are_the_launcher() -> None:
    # `su vllm -c SCRIPT`: no command words, the script separately, the rest as the launcher.
    launched = skip_launchers(["/bin/su", "vllm", "-s", "/bin/bash", "-c", "exec vllm serve /m"])
    assert launched.command == [] and launched.script == "exec vllm serve /m"
    assert launched.launcher == ["/bin/su", "vllm", "-s", "/bin/bash", "-c"]


def test_a_wrapper_that_runs_nothing_it_knows_stops_the_skipping() -> None:
    # `uv pip install …` runs no command: the words stay as they are.
    assert skip_launchers(["uv", "pip", "install", "vllm"]).command == ["uv", "pip", "install", "vllm"]
    launched = skip_launchers(["/usr/bin/sudo", "-u", "vllm", "uv", "run", "--project", "/srv", "vllm", "serve"])
    assert launched.command == ["vllm", "serve"]
    assert launched.launcher == ["/usr/bin/sudo", "-u", "vllm", "uv", "run", "--project", "/srv"]


@pytest.mark.parametrize(("word", "launcher"), [
    ("/usr/bin/sudo", True), ("numactl", True), ("/usr/bin/env", True), ("conda", True),
    ("/opt/venv/bin/python3", False), ("vllm", False), ("/opt/bin/serve_model", False),
])
def test_is_launcher(word: str, launcher: bool) -> None:
    assert is_launcher(word) is launcher
