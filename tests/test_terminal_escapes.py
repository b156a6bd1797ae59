"""Escape sequences from a node are shown, never obeyed, in every terminal output (issue 22).

A simulated node behind a real sshd whose unit writes terminal controls into its journal (an ExecStartPre
that prints them), passes them in a flag value and an environment value, and names an EnvironmentFile with
them; the real ``inferbot`` command runs as a subprocess, as a person would. ``inferbot ask "logs kimi"``
printed ``ESC]0;`` (window title), ``ESC]52;`` (clipboard write) and ``ESC[2J`` (clear screen) raw.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from bot.logs import setup_logging
from services.sim.scenarios import KIMI_UNIT, NodeScenario, UnitScenario, fast_profile, kimi_node, kimi_unit
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_cli_local_input import INFERBOT
from tests.test_e2e_faults import _toml
from tests.test_e2e_live import wait_journal

# What a terminal obeys: C0 but tab and newline, DEL, C1 (U+009B is a one-character CSI), bidi overrides.
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The journal line (systemd C escapes in the unit: \x1b is ESC, \u009b a C1 CSI, \u202e a right-to-left
# override; %% is a literal % for systemd).
PRINTED = (r"title \x1b]0;pwned\x07 clip \x1b]52;c;cHduZWQ=\x07 clear \x1b[2J c1 \u009b2J "
           r"bidi \u202eend cr \rover")
PRE = f"ExecStartPre=/bin/sh -c 'printf \"%%s\\\\n\" \"{PRINTED}\"'\n"
ALIAS = r"alias\x1b]52;c;Y2xpcA==\x07"
EVIL_ENV = r'Environment="EVIL_TITLE=\x1b]0;env-title\x07"' + "\n"


def hostile_unit(port: int, *, fail: bool = False) -> UnitScenario:
    unit = kimi_unit(fast=True, port=port, profile=fast_profile())
    text = unit.text.replace("[Service]\n", "[Service]\n" + PRE + EVIL_ENV)
    text = text.replace("--served-model-name kimi-k2.5", f'--served-model-name kimi-k2.5 "{ALIAS}"')
    if fail:  # vLLM's engine failure, quoting the controls, in this start's journal; and another alias
        text = text.replace('"title ', '"RuntimeError: Engine core initialization failed: title ')
        text = text.replace(ALIAS, ALIAS.replace("alias", "other"))
    return unit.model_copy(update={"text": text})


def hostile_node() -> NodeScenario:
    scenario = kimi_node(fast=True, port=free_port())
    scenario.units[0] = hostile_unit(scenario.units[0].port)
    return scenario


def run(args: list[str], config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    env["HOME"] = tempfile.gettempdir()
    return subprocess.run([INFERBOT, *args, "--config", str(config)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tempfile.gettempdir())


def assert_inert(done: subprocess.CompletedProcess[str], *visible: str) -> None:
    both = done.stdout + done.stderr
    assert not OBEYED.findall(both), (OBEYED.findall(both), both)
    for v in visible:
        assert v in both, (v, both)


async def config_file(cluster: SimCluster) -> Path:
    path = Path(cluster.config.state.directory()) / "inferbot.toml"
    path.write_text(_toml(cluster))
    return path


async def test_logs_and_settings_show_a_nodes_controls_visibly_in_text_and_json(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": hostile_node()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    await wait_journal(cluster, "gpu-a", "pwned")
    config = await config_file(cluster)

    done = await asyncio.to_thread(run, ["ask", "logs kimi 200"], config)
    assert done.returncode == 0, done.stderr
    assert_inert(done, r"title \x1b]0;pwned\x07 clip \x1b]52;c;cHduZWQ=\x07 clear \x1b[2J c1 \x9b2J",
                 r"bidi \u202eend")

    done = await asyncio.to_thread(run, ["ask", "settings for kimi"], config)
    assert done.returncode == 0, done.stderr
    assert_inert(done, r"alias\x1b]52;c;Y2xpcA==\x07", r"\x1b]0;env-title\x07")
    # The tables are drawn from the visible text: the value column starts at the same place on every row.
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("  EVIL_TITLE") or ln.startswith("  NCCL_PROTO")]
    assert len(rows) == 2 and rows[0].index(r"\x1b") == rows[1].index("LL"), rows

    # --json was already inert for C0 (JSON escapes it); C1 and bidi controls are escaped now too, and its
    # "text" is the terminal's text.
    done = await asyncio.to_thread(run, ["ask", "--json", "logs kimi 200"], config)
    assert_inert(done)
    out = json.loads(done.stdout)
    logs = "\n".join(out["data"]["services"][0]["logs"])
    assert "\x1b]0;pwned\x07" in logs and "\u009b2J" in logs and "\u202e" in logs  # the data keeps the truth
    assert r"\x1b]0;pwned\x07" in out["text"]


async def test_restart_prompt_progress_and_outcome_show_a_nodes_controls_visibly(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": hostile_node()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    # On disk now: another alias (the confirmation lists what the restart applies) and a start whose journal
    # says the engine failed, quoting the controls (the outcome quotes it).
    sim.edit_unit(KIMI_UNIT, hostile_unit(sim.sc.units[0].port, fail=True).text)
    config = await config_file(cluster)
    done = await asyncio.to_thread(run, ["restart", "kimi", "--yes", "kimi", "--wait"], config)
    assert done.returncode == 1, (done.stdout, done.stderr)  # the load failed
    outcome = done.stdout.splitlines()[-1]
    assert_inert(done, r"alias\x1b]52;c;Y2xpcA==\x07", r"other\x1b]52;c;Y2xpcA==\x07")
    assert "failed" in outcome and r"\x1b]0;pwned\x07" in outcome, done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the EnvironmentFile must be unreadable to the login user")
async def test_check_shows_a_nodes_controls_visibly(make_cluster: MakeCluster) -> None:
    # The unit names an EnvironmentFile the bot's user may not read: `check` quotes its path, from the node.
    scenario = kimi_node(fast=True, port=free_port())
    unit = scenario.units[0]
    evil = "{root}/etc/vllm/evil\x1b]0;pwned\x07.env"
    text = unit.text.replace("EnvironmentFile={root}/etc/vllm/kimi.env",
                             f"EnvironmentFile={{root}}/etc/vllm/kimi.env\nEnvironmentFile={evil}")
    scenario.units[0] = unit.model_copy(update={"text": text, "env_files": {**unit.env_files, evil: "X=1\n"},
                                                "env_file_mode": 0o600})
    scenario.sudo_allowed = False
    cluster = await make_cluster({"gpu-a": scenario})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    done = await asyncio.to_thread(run, ["check"], await config_file(cluster))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert_inert(done, r"evil\x1b]0;pwned\x07.env")


def test_log_lines_written_to_a_terminal_obey_no_control() -> None:
    stream = io.StringIO()
    setup_logging("INFO", stream)
    try:
        logging.getLogger("inferbot.test").warning("node said %s", "a\x1b]0;t\x07 b\u009b2J c\u202ed\x7f",
                                                   extra={"detail": "\u0085next"})
    finally:
        setup_logging("WARNING")
    line = stream.getvalue()
    assert not OBEYED.findall(line), line
    record = json.loads(line)  # the same text, as JSON escapes
    assert record["msg"] == "node said a\x1b]0;t\x07 b\u009b2J c\u202ed\x7f" and record["detail"] == "\u0085next"


def test_error_lines_on_stderr_obey_no_control(tmp_path: Path) -> None:
    # An error line quotes what it is about (here a path given on the command line).
    path = tmp_path / "x\x1b]0;t\x07\u009b2J.toml"
    done = run(["check"], path)
    assert done.returncode == 2, done.stderr
    assert_inert(done, r"x\x1b]0;t\x07\x9b2J.toml: config file not found")
