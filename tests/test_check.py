"""``inferbot check``: per node OK, or exactly what is wrong and how to fix it."""

from __future__ import annotations

import json
import os

import pytest

from bot.check import run_check
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_e2e_settings import kimi


async def test_all_ok_exits_0(make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    assert await run_check(cluster.config, as_json=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert [n["ok"] for n in out["nodes"]] == [True, True]


async def test_problems_are_named_with_a_fix(make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await make_cluster(
        {"gpu-a": kimi(), "gpu-b": kimi()},
        services=[{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT},
                  {"name": "ghost", "node": "gpu-b", "unit": "vllm-ghost.service"}],
    )
    sshd = cluster.sshds["gpu-a"]
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    lines = [ln for ln in cluster.known_hosts.read_text().splitlines() if f"]:{sshd.port} " not in ln]
    cluster.known_hosts.write_text("\n".join([*lines, f"[{sshd.host}]:{sshd.port} {other}"]) + "\n")
    assert await run_check(cluster.config, as_json=False) == 1
    out = capsys.readouterr().out
    assert "valid (2 nodes, 2 services)" in out
    assert "host key mismatch" in out and "never accept it blindly" in out
    assert "vllm-ghost.service not found" in out and "check `unit` for ghost" in out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the fake vLLM as another user")
async def test_no_proc_permission_points_at_sudoers(
    make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = kimi()
    scenario.root_only_proc = True
    scenario.sudo_allowed = False
    cluster = await make_cluster({"gpu-a": scenario})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    assert await run_check(cluster.config, as_json=True) == 1
    out = json.loads(capsys.readouterr().out)
    problems = out["nodes"][0]["problems"]
    assert any("no permission" in p["what"] and "sudoers" in p["fix"] for p in problems)
