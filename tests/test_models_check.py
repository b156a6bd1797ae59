"""Readiness via /v1/models with the API key the bot holds: the key travels on stdin, never in a command."""

from __future__ import annotations

import pytest

from bot.app import runtime
from services.node.probe import ProbeOptions, ProbeTarget, build_script, remote_command, stdin_for
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_e2e_settings import kimi

WITH_KEY = {"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT, "api_key_env": "KIMI_KEY"}
MODELS = ProbeOptions(journal_lines=0, gpus=False, models=True)


def test_key_is_on_stdin_not_in_the_command() -> None:
    targets = [ProbeTarget(unit="a.service", models=True), ProbeTarget(unit="b.service")]
    command = remote_command(build_script(targets, MODELS))
    assert "sk-" not in command and "IFS= read -r api_key_0" in command and '"$api_key_0"' in command
    assert stdin_for(targets, ["sk-secret-1", None]) == "sk-secret-1\n"
    with pytest.raises(ValueError):
        stdin_for(targets, ["evil\nkey", None])


async def test_models_listed_with_the_right_key(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIMI_KEY", KIMI_API_KEY)
    cluster = await make_cluster({"gpu-a": kimi()}, services=[WITH_KEY])
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        snap = await rt.cluster.snapshot(cluster.config.services, cluster.config.nodes, MODELS)
    st = snap.services[0]
    assert st.served_models is not None and "kimi-k2.5" in st.served_models and st.models_error is None
    assert KIMI_API_KEY not in st.model_dump_json()


async def test_refused_key_is_reported(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIMI_KEY", "sk-not-the-right-key")
    cluster = await make_cluster({"gpu-a": kimi()}, services=[WITH_KEY])
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        snap = await rt.cluster.snapshot(cluster.config.services, cluster.config.nodes, MODELS)
    st = snap.services[0]
    assert st.served_models is None and st.models_error is not None and "401" in st.models_error
    assert "sk-not-the-right-key" not in st.model_dump_json()
