"""handlers/logs.py: the last lines of a service's journal, each whole — a long answer as a file in Slack, at
most 200 lines, and "which service?" rather than every service's logs at once.

A simulated Qwen node behind a real sshd; its journal (the start-up log of vLLM, then its stats lines) is the
truth the answer is checked against, read from the simulated node's journal file.
"""

from __future__ import annotations

import pytest

from bot.app import runtime
from bot.dispatch import answer
from handlers.context import Args, Asker, Request
from handlers.logs import handle
from services.sim.scenarios import QWEN_UNIT, qwen_node
from tests.conftest import MakeCluster
from tests.sshd import free_port

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_the_last_lines_whole_capped_and_attached_when_long(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-b": qwen_node(fast=True, port=free_port(), traffic_tps=0.0)},
                                 services=[{"name": "qwen", "node": "gpu-b", "unit": QWEN_UNIT},
                                           {"name": "qwen2", "node": "gpu-b", "unit": "vllm-other.service"}])
    sim = cluster.sims["gpu-b"]
    await sim.wait_for(QWEN_UNIT, "ready", 45)
    journal = sim.journal_path().read_text()
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="cli"))
        default = await answer("logs qwen", ctx)
        capped = await answer("last 500 lines of qwen logs", ctx)
        which = await handle(ctx, Request(intent="logs", services=list(cluster.config.services), nodes=[],
                                          args=Args(lines=10)))
    # The longest line of vLLM's start-up log, as the node's journal holds it: shown whole, never cut.
    engine = next(line.split("\t", 4)[4] for line in journal.splitlines() if "Initializing a V1 LLM engine" in line)
    assert len(engine) > 800

    [header, code] = default.sections
    lines = (code.text or "").splitlines()
    assert header.title == "qwen on gpu-b — last 30 lines" and len(lines) == 30 and default.attachments == []

    assert capped.sections[0].title is not None and capped.sections[0].title.endswith("lines (capped at 200 lines)")
    [attached] = capped.attachments
    every = attached.content.splitlines()
    assert attached.filename == "qwen-gpu-b.log" and 40 < len(every) <= 200
    assert capped.sections[1].title == "newest 10 lines (all attached)"
    assert (capped.sections[1].text or "").splitlines() == every[-10:]
    assert "\n".join(lines) in attached.content  # the same journal, newest last (it may have grown since)
    assert any(line.endswith(engine) for line in every)

    assert (which.ok, which.title, which.error) == (False, "Which service?", "name one service")
    assert which.sections[0].text == "Name the service whose logs you want — e.g. “logs qwen”. Known: qwen, qwen2."
