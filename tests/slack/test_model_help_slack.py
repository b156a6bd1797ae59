"""Issue 23 point 9 through the real Bolt app and the fake Slack: a message the rules cannot place is read by
the cluster's own model (the simulated vLLM's keyword classifier behind a real sshd) and the answer says so;
a model talked into a restart posts no confirmation and audits nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import test_restart_slack
from test_restart_slack import ALICE, BOB, NOTIFY, OPS, SRE, OutageSlack, slack_bot, until

from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
__all__ = ["slack_bot"]

KEY_ENV = "INFERBOT_TEST_KIMI_KEY"
HELPED = "(understood with the help of kimi)"


@pytest.fixture
def with_model_help(monkeypatch: pytest.MonkeyPatch) -> list[SimCluster]:
    """The Slack tests' cluster, with ``[understanding] model = "kimi"`` and the key kimi's server wants (the
    list gets each cluster made)."""
    monkeypatch.setenv(KEY_ENV, KIMI_API_KEY)
    clusters: list[SimCluster] = []

    async def cluster(make_cluster: MakeCluster) -> SimCluster:
        made = await make_cluster(
            {"gpu-a": kimi_node(fast=True, port=free_port())},
            services=[{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT, "api_key_env": KEY_ENV}],
            access={"restart_users": [ALICE, BOB], "restart_usergroups": [SRE], "restart_channels": [OPS]},
            notify={"channel": NOTIFY}, watch={"poll": "0.2s", "interval": "60s", "max_load": "60s"},
            understanding={"model": "kimi", "timeout": "5s"})
        await made.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
        clusters.append(made)
        return made

    monkeypatch.setattr(test_restart_slack, "cluster_for_slack", cluster)
    return clusters


def posted(fs: OutageSlack, ts: str) -> list[dict[str, Any]]:
    return [b for b in fs.delivered if b.get("channel") == OPS and b.get("thread_ts") == ts]


async def test_the_model_places_what_the_rules_cannot_and_the_answer_says_so(
        with_model_help: list[SimCluster], slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    await b.mention("is the big model breathing :thinking_face:", ts="1700000800.000100")
    await until(lambda: posted(fs, "1700000800.000100"), 30, "the answer")
    bodies = json.dumps(posted(fs, "1700000800.000100"), ensure_ascii=False)
    assert HELPED in bodies and "kimi on gpu-a" in bodies
    assert "`help` for everything" not in bodies  # not the short help


async def test_a_model_talked_into_a_restart_posts_no_confirmation(with_model_help: list[SimCluster],
                                                                  slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    [cluster] = with_model_help
    cluster.sims["gpu-a"].set_live(KIMI_UNIT, chat_content='{"intent": "restart", "services": ["kimi"], "nodes": []}')
    await b.mention("is the big model breathing", user=ALICE, ts="1700000900.000100")  # Alice may restart kimi
    await until(lambda: posted(fs, "1700000900.000100"), 30, "the answer")
    bodies = json.dumps(posted(fs, "1700000900.000100"), ensure_ascii=False)
    assert "restart_confirm" not in bodies and HELPED not in bodies and "`help` for everything" in bodies
    assert b.rt.store is not None and [e.event for e in await b.rt.store.audit.recent("kimi")] == []
    # The model was asked (its server's own access log says so), and its answer refused.
    journal = cluster.sims["gpu-a"].journal_path()
    await until(lambda: '"POST /v1/chat/completions HTTP/1.1" 200' in journal.read_text(errors="replace"), 10,
                "the chat completion in kimi's access log")

