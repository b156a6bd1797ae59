"""Unit-file syntax against what a real systemd 252 did with the same files (recorded by the real-systemd tier:
``INFERBOT_RECORD_SYSTEMD=1 pytest tests/systemd``), for the simulator's own reader and the product's parser.

The simulator must agree with systemd without sharing the product's code, so a quoting bug in
services/parse/unitfile.py fails here (and in the e2e tests) instead of being mirrored by the simulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.parse.unitfile import expand_exec_start, merge_environment, parse_env_file, parse_unit_cat
from tests.sim_truth import simulated

CASES: list[dict[str, Any]] = json.loads((Path(__file__).parent / "samples/units/real-systemd.json").read_text())


def _real_argv(case: dict[str, Any], first: str) -> list[str]:
    argv: list[str] = case["argv"]
    # A script's shebang interpreter comes first in /proc; systemd ran the script itself.
    return argv[1:] if argv[:1] != [first] and argv[1:2] == [first] else argv


@pytest.mark.parametrize("case", CASES, ids=[c["unit"] for c in CASES])
def test_simulator_matches_real_systemd(case: dict[str, Any], tmp_path: Path) -> None:
    argv, env = simulated(case, tmp_path)
    assert argv == _real_argv(case, argv[0])
    assert env == case["env"]


@pytest.mark.parametrize("case", CASES, ids=[c["unit"] for c in CASES])
def test_product_parser_matches_real_systemd(case: dict[str, Any]) -> None:
    unit = parse_unit_cat(f"# /etc/systemd/system/{case['fragment']}\n{case['text']}", unit_name=case["unit"])
    env = merge_environment(unit, [parse_env_file(t) for t in case["env_files"].values()])
    argv = expand_exec_start(unit, env=env)
    if case["text"].count("ExecStart=@"):
        argv = argv[1:]  # "@" prefix: the second word is argv[0]
    assert argv == _real_argv(case, argv[0])
    if "export " in "".join(case["env_files"].values()):
        # services.parse.unitfile reads `export NAME=value` lines on purpose (files shared with shells); systemd 252
        # ignores them ("Ignoring invalid environment assignment"), so the process does not have them.
        env = {k: v for k, v in env.items() if k not in _exported(case)}
    assert env == case["env"]


def _exported(case: dict[str, Any]) -> set[str]:
    return {line.split()[1].split("=")[0] for t in case["env_files"].values() for line in t.splitlines()
            if line.startswith("export ")}


def test_simulator_does_not_import_the_product_parser() -> None:
    """The simulator is the tests' truth: it must not share services/parse/unitfile.py (its bugs would be mirrored)."""
    import ast

    sim = Path(__file__).parents[1] / "services/sim"
    for f in sim.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "services.parse.unitfile" or n.startswith("services.parse.unitfile.") for n in names), f
