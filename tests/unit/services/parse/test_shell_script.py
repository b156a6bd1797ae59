"""services/parse/shell_script.py: the script a shell runs and the commands in it, held against bash and dash.

The script ``shell_script`` finds is the one the real shell runs; the simple commands ``simple_commands``
splits it into are the ones the real shell starts (recorder programs stand for them, and each variable is
set to its own text, so the shell's expansion leaves the words as the parser keeps them).
"""

from __future__ import annotations

import shutil

import pytest

from services.parse.shell_script import shell_script, simple_commands, variables
from tests.unit.services.parse.conftest import Run

SHELL_LINES = [
    ["bash", "-c", "{script}"],
    ["bash", "-xc", "{script}"],
    ["bash", "-e", "-o", "pipefail", "-c", "{script}", "name", "arg"],
    ["bash", "--norc", "+o", "history", "-c", "{script}"],
    ["sh", "-ec", "{script}"],
    ["dash", "-c", "{script}"],
]


@pytest.mark.parametrize("line", SHELL_LINES, ids=lambda words: " ".join(words))
def test_the_script_found_is_the_one_the_shell_runs(line: list[str], recorded: Run) -> None:
    if shutil.which(line[0]) is None:
        pytest.skip(f"{line[0]} is not installed")
    argv = [w.replace("{script}", "vllm serve /models/x") for w in line]
    assert shell_script(argv) == "vllm serve /models/x"
    (started,) = recorded(argv)
    assert started[1:] == ["serve", "/models/x"]


@pytest.mark.parametrize("argv", [["bash", "script.sh"], ["bash", "-l"], ["sh", "-e", "-x"], ["bash", "--", "x"]])
def test_no_script_without_c(argv: list[str]) -> None:
    assert shell_script(argv) is None


SCRIPTS = [  # (the script, the programs it starts, in order)
    ("vllm serve /models/x --port 8000", ["vllm"]),
    ("exec vllm serve /models/x --port $PORT 2>&1", ["vllm"]),
    ("prep --dir /d; vllm serve ${MODEL} -tp 8 > /tmp/log 2>&1", ["prep", "vllm"]),
    ("prep && vllm serve 'a model' --served-model-name \"x y\"  # started by ops", ["prep", "vllm"]),
    ("prep\nvllm serve /m \\\n  --port 1", ["prep", "vllm"]),
    ("prep </dev/null; vllm serve /m --api-key \"$KEY\"", ["prep", "vllm"]),
]


@pytest.mark.parametrize(("script", "programs"), SCRIPTS, ids=[s for s, _ in SCRIPTS])
def test_the_commands_are_the_ones_bash_starts(script: str, programs: list[str], recorded: Run) -> None:
    commands = simple_commands(script)
    names = variables(w for c in commands for w in c)
    started = recorded(["bash", "-c", script], names=tuple(programs),
                       env={n.strip("${}"): n for n in names})  # $PORT expands to "$PORT": as written
    assert [c[1:] for c in started] == [[w for w in c if w != "exec"][1:] for c in commands]
    assert [c[0].rsplit("/", 1)[-1] for c in started] == programs


def test_a_pipeline_is_two_commands_and_comments_are_dropped() -> None:
    assert simple_commands("vllm serve /m | tee /var/log/v.log # note") == [["vllm", "serve", "/m"],
                                                                          ["tee", "/var/log/v.log"]]


def test_variables_are_named_once_in_order() -> None:
    assert variables(["--port", "$PORT", "${MODEL}/x", "$PORT"]) == ["$PORT", "${MODEL}"]
