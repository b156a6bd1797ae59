"""``Cluster.answers``: the nodes' records handed over as they answer, each node once, nothing left running."""

from __future__ import annotations

import asyncio
import gc

import pytest

from bot.app import runtime
from bot.dispatch import answer
from handlers.context import Asker
from handlers.settings import SETTINGS_PROBE
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_e2e_settings import kimi

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _asking_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if "Cluster.answers" in repr(t.get_coro())]


async def test_a_hung_node_answers_last_and_the_cards_keep_the_targets_order(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi(), "gpu-c": kimi()})
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        await cluster.sims[name].wait_for(KIMI_UNIT, "ready", 45)
    nodes = [n.model_copy(update={"timeout": 2.0}) if n.name == "gpu-a" else n for n in cluster.config.nodes]
    cluster.config = cluster.config.model_copy(update={"nodes": nodes})
    async with runtime(cluster.config) as rt:
        # Connected first, so that the healthy nodes' answers race only gpu-a's 2 s and not their own handshakes
        # on a busy machine.
        async for _ in rt.cluster.answers(rt.config.services, rt.config.nodes, SETTINGS_PROBE, batch=1):
            pass
        cluster.sims["gpu-a"].set_hung_systemctl(True)  # the first target is the last to answer (its timeout)
        seen: list[str] = []
        async for batch in rt.cluster.answers(rt.config.services, rt.config.nodes, SETTINGS_PROBE, batch=1):
            seen += [report.node for _, report, _ in batch]
        assert sorted(seen) == ["gpu-a", "gpu-b", "gpu-c"] and seen[-1] == "gpu-a"
        reply = await answer("what are current settings?", rt.context(Asker(surface="json")))
    headers = [s.title or "" for s in reply.sections if s.kind == "header"]
    # "kimi on gpu-b", or the card of a node that did not answer: "gpu-a unreachable"
    assert [h.split(" on ")[1] if " on " in h else h.split()[0] for h in headers] == ["gpu-a", "gpu-b", "gpu-c"]
    states = {s["node"]: s["state"] for s in reply.data["services"]}
    assert states == {"gpu-a": "unreachable", "gpu-b": "ready", "gpu-c": "ready"}


async def test_a_caller_that_stops_early_calls_off_the_questions_still_out(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()})
    await cluster.sims["gpu-b"].wait_for(KIMI_UNIT, "ready", 45)
    cluster.sims["gpu-a"].set_hung_systemctl(True)
    async with runtime(cluster.config) as rt:
        stream = rt.cluster.answers(rt.config.services, rt.config.nodes, SETTINGS_PROBE, batch=1)
        async for batch in stream:
            assert [r.node for _, r, _ in batch] == ["gpu-b"]
            break
        await stream.aclose()
        assert _asking_tasks() == []  # gpu-a's question (hung for its 8 s timeout) was cancelled, not left


async def test_nothing_of_an_answer_outlives_it(make_cluster: MakeCluster) -> None:
    """No question task (and what it holds) stays alive after the answer: at 512 nodes they were ~0.3 MB
    kept until the next question."""
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()})
    await cluster.sims["gpu-b"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        reply = await answer("what are current settings?", rt.context(Asker(surface="slack")))
        assert reply.ok
        del reply
        gc.collect()
        left = [o for o in gc.get_objects() if isinstance(o, asyncio.Task) and "Cluster.answers" in repr(o)]
        assert left == []
