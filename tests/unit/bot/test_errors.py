"""bot/errors.py: a usage error is one line on stderr and exit 2, with the config text to add below it.

It lives in a module that imports nothing, so ``inferbot --help`` and a usage error stay light: checked in a
fresh interpreter, the way a person's shell starts one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import EXIT_USAGE, main
from bot.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]


def test_importing_it_loads_no_other_module() -> None:
    code = "import sys; before = set(sys.modules); import bot.errors; print(sorted(set(sys.modules) - before))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         timeout=60).stdout
    assert out.split() == ["['bot',", "'bot.errors']"]


def test_it_carries_its_line_and_the_example() -> None:
    e = UsageError("the config is empty", example="[[nodes]]\nname = \"gpu-a\"\n")
    assert str(e) == "the config is empty" and e.example == "[[nodes]]\nname = \"gpu-a\"\n"
    assert UsageError("unknown command x").example is None


def test_the_cli_prints_one_line_then_the_example_and_exits_2(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "inferbot.toml"
    empty.write_text("# nothing yet\n")
    assert main(["check", "--config", str(empty)]) == EXIT_USAGE == 2
    err = capsys.readouterr().err
    first, _, example = err.partition("\n")
    assert first.startswith(f"inferbot: {empty}: the config is empty — add a [[nodes]] block")
    assert "[[nodes]]" in example and "[[services]]" in example

    assert main(["check", "--json", "--config", str(empty)]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and "the config is empty" in out["error"]
    assert "[[nodes]]" in out["example"]


def test_a_usage_mistake_says_where_to_look(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inferbot: ") and err.rstrip().endswith("(see `inferbot --help`)")
