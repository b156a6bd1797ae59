"""handlers/gpus.py: the GPUs of a node, the processes holding them by service, and leftovers said with the fix.

A simulated Qwen node (TP=2 on two H100s) behind a real sshd; its main process is then killed the way the OOM
killer does, leaving its workers holding GPU memory: the answer names them as leftovers.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.app import runtime
from bot.dispatch import answer
from handlers.context import Asker, Request
from handlers.gpus import handle
from services.sim.scenarios import QWEN_UNIT, qwen_node
from tests.conftest import MakeCluster
from tests.sshd import free_port

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_gpus_by_service_then_leftovers_with_the_fix(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-b": qwen_node(fast=True, port=free_port(), traffic_tps=0.0)},
                                 services=[{"name": "qwen", "node": "gpu-b", "unit": QWEN_UNIT}])
    sim = cluster.sims["gpu-b"]
    await sim.wait_for(QWEN_UNIT, "ready", 45)
    try:
        async with runtime(cluster.config) as rt:
            ctx = rt.context(Asker(surface="cli"))
            healthy = await answer("gpus on gpu-b", ctx)
            await sim.crash(QWEN_UNIT, leave_workers=True)
            for _ in range(50):
                if sim.leftover_pids():
                    break
                await asyncio.sleep(0.1)
            left = set(sim.leftover_pids())
            # Asked as the App Home asks: no message, the node by its config.
            leftover = await handle(ctx, Request(intent="gpus", services=[], nodes=[cluster.node("gpu-b")],
                                                 explicit_target=True))
    finally:
        sim.kill_leftovers()
    assert (healthy.intent, healthy.ok, healthy.status) == ("gpus", True, "ok")
    [node] = healthy.data["nodes"]
    assert [g["name"] for g in node["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert node["leftovers"] == [] and node["processes"]
    table = next(s for s in healthy.sections if s.title == "Processes holding GPU memory")
    assert {row[4] for row in table.rows or []} == {"qwen"}  # each process named by its service
    assert leftover.status == "warn" and left
    [node] = leftover.data["nodes"]
    assert {p["pid"] for p in node["leftovers"]} == left
    table = next(s for s in leftover.sections if s.title == "Processes holding GPU memory")
    assert {int(row[0]) for row in table.rows or [] if row[4] == "LEFTOVER"} == left
    warning = next(s for s in leftover.sections if s.kind == "context")
    total = sum(p["memory_mib"] for p in node["leftovers"])
    assert warning.text is not None and warning.text.startswith(
        f"⚠ {len(left)} process(es) hold {total:,} MiB but belong to no running service")
    assert "pgrep -af 'VLLM::'" in warning.text
