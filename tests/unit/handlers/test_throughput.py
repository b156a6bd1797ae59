"""handlers/throughput.py: live tokens/s from two ``/metrics`` scrapes, requests, KV cache, and an idle server
said to be idle (not broken).

Two simulated Qwen nodes behind real sshds: one serving a steady ~900 tok/s with 24 requests running and 41 %
of its KV cache in use (the simulator's traffic profile, the independent truth), one with no traffic.
"""

from __future__ import annotations

import re

import pytest

from bot.app import runtime
from bot.dispatch import answer
from handlers.context import Asker, Context
from handlers.throughput import throughput_sections
from services.models import ServiceState
from services.sim.scenarios import QWEN_UNIT, qwen_node
from tests.conftest import MakeCluster
from tests.sshd import free_port

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_live_numbers_from_metrics_and_an_idle_server_said_idle(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster(
        {"gpu-b": qwen_node(fast=True, port=free_port(), traffic_tps=900.0),
         "gpu-c": qwen_node(fast=True, port=free_port(), traffic_tps=0.0, hostname="gpu-node-3")},
        services=[{"name": "qwen", "node": "gpu-b", "unit": QWEN_UNIT},
                  {"name": "qwen-idle", "node": "gpu-c", "unit": QWEN_UNIT}])
    for node in ("gpu-b", "gpu-c"):
        await cluster.sims[node].wait_for(QWEN_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        ctx: Context = rt.context(Asker(surface="cli"))
        reply = await answer("throughput", ctx)
    assert (reply.intent, reply.ok) == ("throughput", True)
    cards = [dict(s.fields or []) for s in reply.sections if s.kind == "fields"]
    busy, quiet = cards
    generation = float(busy["generation"].removesuffix(" tok/s").replace(",", ""))
    assert 700 < generation < 1100  # ~900 tok/s of traffic
    assert busy["requests"] == "24 running, 0 waiting"
    assert busy["KV cache"] == "41.0 % used"
    assert busy["source"].startswith("/metrics (two samples)")
    assert re.fullmatch(r"\d+ ms / \d+ ms", busy["TTFT p50 / p99"]) and re.fullmatch(r"\d+ ms / \d+ ms",
                                                                                    busy["ITL p50 / p99"])
    assert (quiet["generation"], quiet["requests"]) == ("0.0 tok/s", "0 running, 0 waiting")
    assert "TTFT p50 / p99" not in quiet  # no request, no latency to show
    # A ready server with no numbers at all is idle, not broken; one that is not ready says so instead of numbers.
    idle = ServiceState(service="qwen-idle", node="gpu-c", unit=QWEN_UNIT, state="ready", active="active (running)")
    assert dict(throughput_sections(idle, ctx)[1].fields or [])["live"] == (
        "idle — no requests, so vLLM logs no stats lines (that is not a problem)")
    loading = idle.model_copy(update={"service": "qwen", "node": "gpu-b", "state": "loading"})
    header, text, *_ = throughput_sections(loading, ctx)
    assert header.title == "qwen on gpu-b" and text.text == "active, loading\nno live throughput while not ready"
