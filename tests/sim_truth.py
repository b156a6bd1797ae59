"""Run a recorded unit through the simulator's own unit reader (services.sim.units), for comparing with what
the real systemd did (tests/systemd records it in tests/samples/units/real-systemd.json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.sim.systemd_syntax import environment_file
from services.sim.units import load_unit


def simulated(case: dict[str, Any], tmp: Path) -> tuple[list[str], dict[str, str]]:
    """The argv and environment the simulator would start ``case["unit"]`` with."""
    fragment = tmp / case["fragment"]
    fragment.write_text(case["text"])
    unit = load_unit(case["unit"], fragment)
    env = dict(unit.environment)
    for path, optional in unit.environment_files:
        if path in case["env_files"]:
            env.update(environment_file(case["env_files"][path]))
        else:
            assert optional, f"{path} is missing but not optional"
    assert unit.exec_start is not None
    return unit.exec_start.argv(env, unit.specifiers), env
