"""End to end over a real sshd: "what are current settings?" against simulated vLLM nodes in every state."""

from __future__ import annotations

import json
import logging

import pytest

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from handlers.context import Asker
from services.sim.scenarios import KIMI_UNIT, NodeScenario, fast_profile, kimi_node, kimi_unit
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port

SECRETS = ("hf_", "sk-kimi", "sk-")


async def ask(cluster: SimCluster, text: str = "what are current settings?") -> tuple[dict, str]:
    async with runtime(cluster.config) as rt:
        reply = await answer(text, rt.context(Asker(surface="json")))
    out = render_text(reply)
    return reply.to_json(out), out


def no_secrets(*texts: str) -> None:
    for text in texts:
        assert "hf_" not in text and "sk-" not in text, text


def kimi(restart: str = "on-failure", **profile: object) -> NodeScenario:
    """The Kimi node with a fast load on a free port; ``profile`` overrides load knobs."""
    scenario = kimi_node(fast=True, port=free_port())
    if profile or restart != "on-failure":
        scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, restart=restart,
                                      profile=fast_profile(**profile))
    return scenario


async def test_ready_service_full_settings(make_cluster: MakeCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert data["intent"] == "settings" and data["ok"] is True
    assert svc["state"] == "ready" and svc["reason"] is None
    assert svc["model"] == "/shared/kimi-k2.5-int4"
    assert svc["flags"]["tensor-parallel-size"] == "8"
    assert svc["flags"]["max-model-len"] == "131072"
    assert svc["flags"]["gpu-memory-utilization"] == "0.95"
    assert svc["flags"]["tool-call-parser"] == "kimi_k2" and svc["flags"]["reasoning-parser"] == "kimi_k2"
    assert svc["flags"]["enable-auto-tool-choice"] is True
    assert svc["flags"]["api-key"] == ["[redacted]"]
    assert "model" not in svc["flags"]
    env = svc["env"]
    assert env["NCCL_PROTO"] == "LL" and env["NCCL_ALGO"] == "Ring" and env["NCCL_P2P_LEVEL"] == "SYS"
    assert env["NCCL_MAX_NCHANNELS"] == "16" and env["NCCL_BUFFSIZE"] == "16777216"
    assert env["NCCL_NTHREADS"] == "512" and env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert env["HF_TOKEN"] == "[redacted]" and env["VLLM_API_KEY"] == "[redacted]"
    for ambient in ("PATH", "INVOCATION_ID", "JOURNAL_STREAM", "LANG", "HOME"):
        assert ambient not in env
    assert svc["version"] == "0.20.1"
    assert len(svc["gpus"]) == 8 and svc["gpus"][0]["memory_total_mib"] == 97887
    assert svc["settings_source"] == "process"
    assert svc["since"].endswith("Z")
    # The text answer is never truncated: every flag and variable is in it.
    for needle in ("--tensor-parallel-size", "--max-model-len", "131072", "NCCL_BUFFSIZE", "16777216",
                   "CUDA_DEVICE_MAX_CONNECTIONS", "kimi_k2", "active, ready"):
        assert needle in text
    no_secrets(text, json.dumps(data), caplog.text)


async def test_loading_state_with_reason(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(shards=400, seconds_per_shard=0.05)})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "loading", 45)
    data, text = await ask(cluster, "settings for kimi")
    svc = data["data"]["services"][0]
    assert svc["state"] == "loading"
    assert "connection refused" in svc["reason"]
    assert "active, loading — started" in text
    assert svc["flags"]["tensor-parallel-size"] == "8"  # settings are there while loading


async def test_failed_load_is_failed(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(restart="no", fail_at="startup")})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "failed", 45)
    data, _ = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "failed"
    assert "Result=exit-code" in svc["reason"]


async def test_stopped_service_settings_from_unit(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    await sim.stop_unit(KIMI_UNIT)
    await sim.wait_for(KIMI_UNIT, "stopped", 45)
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "stopped" and svc["reason"]
    assert svc["settings_source"] == "unit"
    assert svc["flags"]["tensor-parallel-size"] == "8" and svc["env"]["NCCL_ALGO"] == "Ring"
    assert svc["env"]["HF_TOKEN"] == "[redacted]"
    no_secrets(text, json.dumps(data))


async def test_unit_not_found(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster(
        {"gpu-a": kimi()},
        services=[{"name": "ghost", "node": "gpu-a", "unit": "vllm-ghost.service"}],
    )
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "failed" and "not found" in svc["reason"]
    assert "vllm-ghost.service" in text
