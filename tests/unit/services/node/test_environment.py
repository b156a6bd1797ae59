"""services/node/environment.py (and the declared command of services/node/parse_cache.py): the unit's
variables and ExecStart as a real systemd gave them to the process (tests/samples/units/real-systemd.json,
recorded by the real-systemd tier), and where the recorded Kimi process's environment differs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.models import ServiceWarning, UnitShow, Warnings
from services.node import parse_cache
from services.node.environment import env_differences, env_values, unit_env
from services.node.probe import ReadFile, UnitRaw
from services.node.settings_source import Settings
from services.redact import REDACTED, Redactor
from tests.unit.services.node.recorded import KIMI_KEY, SAMPLES, unit

CASES: list[dict[str, Any]] = json.loads((SAMPLES / "units" / "real-systemd.json").read_text())


def unit_raw(case: dict[str, Any], readable: bool = True) -> UnitRaw:
    files = {p: ReadFile(path=p, rc=0 if readable else 1, data=t.encode() if readable else None)
             for p, t in case["env_files"].items()}
    return UnitRaw(unit=case["unit"], cat=f"# /etc/systemd/system/{case['fragment']}\n{case['text']}", files=files)


@pytest.mark.parametrize("case", CASES, ids=[c["unit"] for c in CASES])
def test_the_units_variables_and_command_are_systemds(case: dict[str, Any]) -> None:
    raw = unit_raw(case)
    unit, show, warnings = parse_cache.unit_file(raw), UnitShow(id=case["unit"]), Warnings()
    env = unit_env(raw, unit, show, warnings)
    exported = {line.split()[1].split("=")[0] for t in case["env_files"].values() for line in t.splitlines()
                if line.startswith("export ")}  # read on purpose (files shared with shells); systemd 252 skips them
    assert {k: v for k, v in env.items() if k not in exported} == case["env"]
    argv = parse_cache.declared_argv(raw, unit, show, env)
    real: list[str] = case["argv"]
    if case["text"].count("ExecStart=@"):
        argv = argv[1:]  # "@": the second word is argv[0]
    if real[:1] != argv[:1] and real[1:2] == argv[:1]:
        real = real[1:]  # a script's shebang interpreter comes first in /proc; systemd ran the script itself
    assert argv == real
    assert warnings.items == []


def test_an_unreadable_environment_file_is_a_warning_of_its_kind() -> None:
    case = CASES[0]  # quoting.service: EnvironmentFile=/etc/inferbot/quoting.env (required)
    warnings = Warnings()
    env = unit_env(unit_raw(case, readable=False), parse_cache.unit_file(unit_raw(case)), UnitShow(id=case["unit"]),
                   warnings)
    assert "EXTRA_ARGS" not in env and env["GREETING"] == "hello world"  # Environment= lines still count
    (w,) = warnings.items
    assert w == ServiceWarning(
        "could not read EnvironmentFile /etc/inferbot/quoting.env (permission denied or missing): its variables "
        "are shown from the running process only", "envfile-unreadable")


def kimi_settings(process_env: dict[str, str] | None) -> tuple[Settings, dict[str, str]]:
    raw = unit("settings-ready")
    declared = unit_env(raw, parse_cache.unit_file(raw), parse_cache.show(raw, "+0000"), Warnings())
    return Settings(declared=None, declared_argv=[], process_env=process_env, argv=["vllm"]), declared


def test_the_recorded_process_has_what_its_unit_sets() -> None:
    s, declared = kimi_settings(None)
    # Environment= of the recorded unit, then its kimi.env file
    assert declared["NCCL_ALGO"] == "Ring" and declared["VLLM_API_KEY"] == KIMI_KEY
    assert declared["HF_TOKEN"].startswith("hf_")
    s.process_env = dict(declared)
    warnings = Warnings()
    assert env_differences(s, declared, Redactor([KIMI_KEY]), warnings) == [] and warnings.items == []
    assert env_values(unit("settings-ready"), s, declared) == declared


def test_an_edited_unit_not_restarted() -> None:
    s, declared = kimi_settings(None)
    s.process_env = {**declared, "NCCL_ALGO": "Tree", "VLLM_API_KEY": "sk-old-0123456789abcdef",
                     "NCCL_DEBUG": "INFO", "PATH": "/usr/bin"}
    del s.process_env["NCCL_PROTO"]
    warnings = Warnings()
    pending = env_differences(s, declared, Redactor([KIMI_KEY]), warnings)
    # in the unit's order: Environment=NCCL_PROTO=LL NCCL_ALGO=Ring …, then kimi.env's VLLM_API_KEY
    assert pending == ["NCCL_PROTO (unset) → LL", "NCCL_ALGO Tree → Ring", f"VLLM_API_KEY {REDACTED}"]
    assert [w.text for w in warnings.items] == [
        "NCCL_PROTO is set in the unit but not in the running process: restart to apply",
        "NCCL_ALGO differs between the running process and the unit (Tree → Ring): the unit was edited but the "
        "service not restarted",
        f"VLLM_API_KEY differs between the running process and the unit ({REDACTED}): the unit was edited but "
        "the service not restarted"]
    assert all(w.kind is None for w in warnings.items)
    values = env_values(unit("settings-ready"), s, declared)
    assert values["NCCL_ALGO"] == "Tree"  # the value the process got
    assert values["NCCL_DEBUG"] == "INFO" and "PATH" not in values  # a wrapper's NCCL_ variable; not the ambient PATH
