"""``inferbot change`` and ``inferbot revert`` from a terminal, on the simulated node behind a real sshd (issue 25):
the preview, the typed confirmation, ``--wait`` (exit 0 only when kept), refusals (exit 1) and bad usage (exit 2,
one line)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from bot.change_cli import run_change
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_change_flow import argv_of, change_cluster, dropin, flag

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_change_and_revert_from_the_terminal(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, access_={"cooldown": "0s"})  # nobody in Slack: the terminal may
    sim = cluster.sims["gpu-a"]
    operator_argv = argv_of(sim)
    out = io.StringIO()
    status = await run_change(cluster.config, "kimi", "change", sets=["max-num-seqs=256"], unsets=["enforce-eager"],
                              envs=["NCCL_PROTO=Simple"], wait=True, confirm="kimi", out=out)
    text = out.getvalue()
    assert status == 0, text
    assert "change #1" in text and "max-num-seqs" in text and "Change confirmed by terminal:" in text
    assert "Preflight — checked with vLLM 0.20.1's own parser on gpu-a" in text
    assert "change #1 of kimi: kept" in text
    assert flag(argv_of(sim), "--max-num-seqs") == "256"
    out = io.StringIO()
    assert await run_change(cluster.config, "kimi", "revert", wait=True, confirm="kimi", out=out) == 0, out.getvalue()
    assert argv_of(sim) == operator_argv and not dropin(cluster).exists()
    # Refused (exit 1): a typo, the wrong name typed back; nothing written.
    out = io.StringIO()
    assert await run_change(cluster.config, "kimi", "change", sets=["max-num-seq=256"], confirm="kimi", out=out) == 1
    assert "did you mean --max-num-seqs" in out.getvalue()
    out = io.StringIO()
    assert await run_change(cluster.config, "kimi", "change", sets=["max-num-seqs=64"], confirm="qwen", out=out) == 1
    assert "refused: you typed 'qwen'" in out.getvalue() and not dropin(cluster).exists()
    # Bad usage (exit 2): an unknown service, nothing to change.
    out = io.StringIO()
    assert await run_change(cluster.config, "nope", "change", sets=["max-num-seqs=1"], out=out) == 2
    assert "known: kimi@gpu-a" in out.getvalue()
    out = io.StringIO()
    assert await run_change(cluster.config, "kimi", "change", out=out) == 2
    assert out.getvalue().count("\n") == 1 and "nothing to change" in out.getvalue()
    assert sim.state(KIMI_UNIT).sim_state == "ready"


def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bot.cli", "change", "kimi", "--set"], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).parent.parent)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--set" in done.stderr


async def test_wait_exits_1_when_the_change_is_rolled_back(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, access_={"cooldown": "0s"})
    sim = cluster.sims["gpu-a"]
    for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()  # only inferbot's table checks: "auto" passes it, the simulated vLLM refuses it at start-up
    operator_argv = argv_of(sim)
    out = io.StringIO()
    status = await run_change(cluster.config, "kimi", "change", sets=["max-model-len=auto"], wait=True,
                              confirm="kimi", out=out)
    text = out.getvalue()
    assert status == 1, text
    assert "change #1 of kimi: rolled back" in text and "the load failed" in text, text
    assert argv_of(sim) == operator_argv and not dropin(cluster).exists()
