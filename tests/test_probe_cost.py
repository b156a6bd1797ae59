"""The probe stays light: processes per question on the simulated node, counted (not timed) with strace.

Issue 15: the settings question was ~100 processes on the node, the watcher's poll ~70; now 25 and 13,
fake node tools included (``python -m bench.probe_cost`` reports the same counts and the CPU). A change
that brings back a process per section or per property fails here. The same traces show what every
process was started with: neither the API key (stdin) nor the marker's random value is on any command line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.probe_cost import Login, ask, login_for, start_node
from handlers.settings import SETTINGS_PROBE
from handlers.watcher import WATCH_PROBE
from services.node.probe import ProbeTarget, build_script, parse_output, remote_command, stdin_for
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT

SETTINGS_MAX_FORKS = 28  # 25 when written: 20 of the probe, 5 inside the fake systemctl/journalctl/nvidia-smi
WATCH_MAX_FORKS = 15  # 13 when written: 12 of the probe, 1 inside the fake systemctl


def _strace() -> str:
    path = shutil.which("strace")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("strace is not installed: run the README's test command (bash tests/run.sh)")
        pytest.skip("strace is not installed (bash tests/run.sh installs it)")
    return path


@pytest.fixture
async def ready_node() -> AsyncIterator[SimNode]:
    _strace()
    workdir = Path(tempfile.mkdtemp(prefix="probe-cost-test-"))
    os.chmod(workdir, 0o755)
    node = await start_node("ready", workdir)
    try:
        yield node
    finally:
        await node.stop()
        shutil.rmtree(workdir, ignore_errors=True)


async def test_settings_and_watch_process_counts(ready_node: SimNode) -> None:
    settings = await ask(ready_node, SETTINGS_PROBE, trace=True)
    assert [s.state for s in settings.states] == ["ready"]  # the probe did its whole job
    assert settings.states[0].version == "0.20.1" and settings.states[0].flags
    assert settings.traced is not None
    assert settings.traced.forks <= SETTINGS_MAX_FORKS, settings.traced.by_program
    watch = await ask(ready_node, WATCH_PROBE, trace=True)
    assert [s.state for s in watch.states] == ["ready"]
    assert watch.raw is not None and watch.raw.units[0].metrics
    assert watch.traced is not None
    assert watch.traced.forks <= WATCH_MAX_FORKS, watch.traced.by_program
    assert watch.traced.forks < settings.traced.forks


def _argvs(login: Login, command: str, stdin: str | None) -> tuple[str, list[str]]:
    """The probe's stdout and every argv it executed (strace -f -e execve, whole strings)."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        trace = Path(d) / "t"
        argv = [_strace(), "-f", "-qq", "-s", "100000", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace)]
        if os.geteuid() == 0 and login.uid != 0:
            argv += ["-u", login.user]
        p = subprocess.run([*argv, login.shell, "-c", command], input=(stdin or "").encode(), capture_output=True,
                           env=login.env, cwd="/", timeout=60, check=False)
        return p.stdout.decode(), [line for line in trace.read_text(errors="replace").splitlines() if "execve(" in line]


async def test_no_key_and_no_marker_value_on_any_command_line(ready_node: SimNode) -> None:
    login = login_for(ready_node)
    targets = [ProbeTarget(unit=KIMI_UNIT, models=True, bench_dir=ready_node.bench_dir)]
    options = SETTINGS_PROBE.model_copy(update={"models": True, "metrics_samples": 1})
    out, execs = _argvs(login, remote_command(build_script(targets, options)), stdin_for(targets, [KIMI_API_KEY]))
    raw = parse_output(out)
    unit = raw.units[0]
    assert raw.complete and unit.models is not None and unit.models.status == 200 and unit.models_keyed
    nonce = re.search(r"\n@@inferbot@@(\S+) node ", "\n" + out)
    assert nonce is not None and len(nonce.group(1)) >= 16
    assert len(execs) > 10
    assert not [e for e in execs if KIMI_API_KEY in e]
    assert not [e for e in execs if nonce.group(1) in e]

