"""The whole path in Slack: a mention or /inferbot → real Bolt → SSH to a simulated node behind sshd → blocks."""

from __future__ import annotations

import json

from bot.app import runtime
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.slack.conftest import all_text, command_form, event_body, mention
from tests.slack.fake_slack import FakeSlack
from tests.test_e2e_settings import kimi

SECRET_MARKERS = ("hf_", "sk-")


async def test_mention_over_http_answers_with_the_live_settings(
    fake_slack: FakeSlack, make_app, serve_http, make_cluster: MakeCluster
) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        http = await serve_http(make_app(rt))
        status, _ = await http.post_event(event_body(mention("what are current settings?", ts="1700000000.000900")))
        assert status == 200
        calls = await fake_slack.wait_for("chat.postMessage", within=40)
        await make_app.drain()
    assert all(c.body["thread_ts"] == "1700000000.000900" for c in calls)
    text = "\n".join(all_text(c.body["blocks"]) for c in calls)
    for needle in ("kimi on gpu-a", "--tensor-parallel-size", "131072", "NCCL_PROTO", "NCCL_BUFFSIZE",
                   "16777216", "CUDA_DEVICE_MAX_CONNECTIONS", "kimi_k2", "[redacted]", "✅"):
        assert needle in text, needle
    raw = json.dumps([c.body for c in calls])
    assert not any(m in raw for m in SECRET_MARKERS)


async def test_slash_command_in_socket_mode_answers_status_via_response_url(
    fake_slack: FakeSlack, make_app, socket_mode, make_cluster: MakeCluster
) -> None:
    cluster = await make_cluster({"gpu-a": kimi(shards=400, seconds_per_shard=0.05)})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "loading", 45)
    async with runtime(cluster.config) as rt:
        await socket_mode(make_app(rt))
        form = command_form("status kimi", fake_slack.response_url("s1"))
        env = await fake_slack.send_envelope("slash_commands", form)
        ack = await fake_slack.wait_ack(env, within=1.0)
        assert "Looking" in ack["payload"]["text"]
        [call] = await fake_slack.wait_for("response:s1", within=40)
        await make_app.drain()
    text = all_text(call.body["blocks"])
    assert "kimi on gpu-a" in text and "loading" in text and "⏳" in text
