"""A burst of people asking in Slack at once (issue 22, item 4): every answer arrives, none blames the node.

The real Bolt app over HTTP, the fake Slack, the simulated Kimi node behind a real sshd. What the node did is
counted by its sshd (one "Starting session: command" per exec request it served, LogLevel VERBOSE).
"""

from __future__ import annotations

import asyncio
import json

from bot.app import runtime
from config.models import AccessPolicy
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.slack.conftest import all_text, event_body, mention
from tests.slack.fake_slack import FakeSlack
from tests.test_burst import execs
from tests.test_e2e_settings import kimi

PEOPLE = 120


async def test_a_burst_of_status_mentions_is_answered_for_everyone_from_one_probe(
    fake_slack: FakeSlack, make_app, serve_http, make_cluster: MakeCluster
) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    sshd = cluster.sshds["gpu-a"]
    async with runtime(cluster.config) as rt:
        http = await serve_http(make_app(rt, rate_limit=1000))
        before = execs(sshd)
        posted = await asyncio.gather(*(
            http.post_event(event_body(mention("status kimi", user=f"U{i:08d}", ts=f"1700000000.{i:06d}")))
            for i in range(PEOPLE)))
        assert [status for status, _ in posted] == [200] * PEOPLE
        await fake_slack.wait_for("chat.postMessage", count=PEOPLE, within=120)
        await make_app.drain()
        after = execs(sshd)
    calls = fake_slack.calls_to("chat.postMessage")
    assert sorted(c.body["thread_ts"] for c in calls) == sorted(f"1700000000.{i:06d}" for i in range(PEOPLE))
    texts = [all_text(c.body.get("blocks") or []) + "\n" + str(c.body.get("text", "")) for c in calls]
    assert all("kimi on gpu-a" in t and "ready" in t for t in texts)
    assert not [t for t in texts if "unreachable" in t or "no answer" in t or "busy" in t]
    # The mentions reach the bot over a few hundred milliseconds: a question that arrives after a probe has
    # ended asks again. Far fewer than one per question, and never one per question.
    assert 1 <= after - before <= 4, after - before
    assert "Traceback" not in json.dumps([c.body for c in calls])


async def test_people_asking_at_once_each_get_their_own_help_and_one_shared_status(
    fake_slack: FakeSlack, make_app, serve_http, make_cluster: MakeCluster
) -> None:
    """Status is the same for everyone asking at once (one answer, drawn once); help is each asker's own: it
    lists restart only for who may restart (bot/shared_answers.py)."""
    alice, bob = "UALICE0001", "UBOB000002"
    cluster = await make_cluster({"gpu-a": kimi()}, access=AccessPolicy(restart_users=[alice]))
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        app = make_app(rt, rate_limit=1000)
        http = await serve_http(app)
        asks = [("help", alice if i % 2 else bob) for i in range(6)] + [("status kimi", bob)] * 12
        posted = await asyncio.gather(*(
            http.post_event(event_body(mention(text, user=user, ts=f"1700000001.{i:06d}")))
            for i, (text, user) in enumerate(asks)))
        assert [status for status, _ in posted] == [200] * len(asks)
        await fake_slack.wait_for("chat.postMessage", count=len(asks), within=120)
        await make_app.drain()
    by_thread = {c.body["thread_ts"]: c.body for c in fake_slack.calls_to("chat.postMessage")}
    helps = {asks[i][1]: all_text(by_thread[f"1700000001.{i:06d}"]["blocks"]) for i in range(6)}
    assert "restart a service" in helps[alice] and "restart a service" not in helps[bob]
    statuses = [json.dumps(by_thread[f"1700000001.{i:06d}"]["blocks"]) for i in range(6, len(asks))]
    assert len(set(statuses)) == 1 and "kimi on gpu-a" in statuses[0]
