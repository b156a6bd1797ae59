"""The probe's shell passes shellcheck (POSIX sh, every severity down to style).

Checked twice: the packaged files as written, in the script they run in (a finding names the file and its
line), and the script exactly as it is sent, for the questions the bot asks of a node that runs the demo
cluster's two units, a template unit and a unit that logs to a file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from handlers.follow import FAIL_PROBE
from handlers.settings import SETTINGS_PROBE
from handlers.status import STATUS_PROBE
from handlers.watcher import WATCH_PROBE
from services.node.probe import ProbeOptions, ProbeTarget, build_script
from services.node.probe.script import SHELL_FILES, resource_text
from services.sim.scenarios import KIMI_UNIT, QWEN_UNIT

TARGETS = [
    ProbeTarget(unit=KIMI_UNIT, bench_dir="/var/lib/vllm/bench"),
    ProbeTarget(unit=QWEN_UNIT, api_url="http://127.0.0.1:8001", models=True),
    ProbeTarget(unit="vllm@8005.service"),
    ProbeTarget(unit="vllm-filelog.service", log_file="/var/log/vllm/filelog.log"),
]
QUESTIONS: dict[str, tuple[ProbeOptions, bool]] = {
    "settings": (SETTINGS_PROBE, False),
    "status": (STATUS_PROBE, False),
    "a failed start": (FAIL_PROBE, False),  # the log lines
    "watch session": (WATCH_PROBE, True),
    "discovery": (ProbeOptions(discover=True, gpus=False, journal_lines=0), False),
}


def _shellcheck() -> str:
    path = shutil.which("shellcheck")
    if path is None:
        if os.geteuid() == 0 or os.environ.get("CI"):
            pytest.fail("shellcheck is not installed: run the README's test command (bash tests/run.sh)")
        pytest.skip("shellcheck is not installed (bash tests/run.sh installs it when run as root)")
    return path


def findings(script: str) -> list[dict[str, object]]:
    """shellcheck's findings in ``script``, as POSIX sh, every severity."""
    done = subprocess.run([_shellcheck(), "--shell=sh", "--severity=style", "--format=json1", "-"],
                          input=script, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr  # 1: findings; anything else: shellcheck itself failed
    comments: list[dict[str, object]] = json.loads(done.stdout)["comments"]
    return comments


def where(script: str, line: int) -> str:
    """``FILE:LINE`` of a line of the readable script (the packaged file it comes from), else its number."""
    for name in SHELL_FILES:
        text = resource_text(name).rstrip("\n")
        at = script.find(text)
        if at >= 0:
            first = script.count("\n", 0, at) + 1
            if first <= line < first + text.count("\n") + 1:
                return f"{name}:{line - first + 1}"
    return f"script line {line}"


def test_the_packaged_shell_as_written() -> None:
    targets = [t.model_copy(update={"models": False}) for t in TARGETS]
    script = build_script(targets, ProbeOptions(discover=True, metrics_samples=2, log_lines=20, bench=True),
                          readable=True)
    assert all(resource_text(name).rstrip("\n") in script for name in SHELL_FILES)
    found = [f"{where(script, int(str(c['line'])))}: SC{c['code']} {c['message']}" for c in findings(script)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_script_as_sent(question: str) -> None:
    options, session = QUESTIONS[question]
    targets = [t.model_copy(update={"models": False}) for t in TARGETS] if session else TARGETS
    script = build_script(targets, options.model_copy(update={"bench": True}), session=session)
    found = [f"line {c['line']}: SC{c['code']} {c['message']}" for c in findings(script)]
    assert not found, "\n".join(found)
