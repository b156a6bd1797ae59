"""bot/model_help.py: the cluster's own model places a message the rules cannot (issue 23, point 9).

A real sshd in front of the simulated node; its fake vLLM answers a structured chat completion with its own
keyword classifier (``services/sim/fake_classifier.py``, nothing of the bot's understanding), or with whatever
the test makes it say. Every answer is checked as a person sees it (``dispatch.answer``, the text and
``--json``'s data), and what went over SSH: the request travels on stdin, never on a command line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

from bot.render_text import render_text
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_restart import ALICE, access, bot

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

KEY_ENV = "INFERBOT_TEST_KIMI_KEY"
UNPLACED = "is the big model breathing"  # the rules place nothing here; the fake model reads "breathing" as status
HELPED = "(understood with the help of kimi)"


async def helper_cluster(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch,
                         understanding: dict[str, Any] | None) -> SimCluster:
    monkeypatch.setenv(KEY_ENV, KIMI_API_KEY)
    extra: dict[str, Any] = {"understanding": understanding} if understanding is not None else {}
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())},
                                 services=[{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT,
                                            "api_key_env": KEY_ENV}],
                                 access=access(), **extra)
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def chats(commands: list[str]) -> list[str]:
    return [c for c in commands if "/v1/chat/completions" in c]


async def ask(cluster: SimCluster, text: str) -> tuple[Any, list[str]]:
    from bot.dispatch import answer
    from handlers.context import Asker

    async with bot(cluster.config) as b:
        reply = await answer(text, b.rt.context(Asker(surface="cli", user_id=ALICE)))
        audit = await b.rt.store.audit.recent("kimi") if b.rt.store is not None else []
        assert audit == [], "nothing requested, nothing audited"
        return reply, b.commands


async def test_an_unplaced_message_is_placed_by_the_model_and_says_so(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "5s"})
    reply, commands = await ask(cluster, UNPLACED)
    assert reply.intent == "status" and reply.ok
    out = render_text(reply)
    assert HELPED in out and "kimi on gpu-a" in out
    understood = reply.data["understood"]
    assert understood["intent"] == "status" and understood["helped_by"] == "kimi" and not understood["asked"]
    out_json = json.loads(json.dumps(reply.to_json(out)))  # what `inferbot ask --json` prints
    assert out_json["data"]["understood"]["helped_by"] == "kimi" and HELPED in out_json["text"]
    [chat] = chats(commands)
    # The person's words and the key went on stdin only: the command line is the fixed template.
    assert all("breathing" not in c and KIMI_API_KEY not in c for c in commands)
    assert "curl -s -K -" in chat


async def test_a_name_the_model_returns_is_a_target(make_cluster: MakeCluster,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A name written on its own is already the rules' (its status): here the model names what it read.
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "5s"})
    cluster.sims["gpu-a"].set_live(KIMI_UNIT, chat_content='{"intent": "logs", "services": ["kimi"], '
                                                           '"nodes": ["gpu-a"]}')
    reply, _ = await ask(cluster, "anything spewing lately")
    assert reply.intent == "logs" and reply.ok
    assert (reply.data["understood"]["services"], reply.data["understood"]["nodes"]) == (["kimi"], ["gpu-a"])
    assert HELPED in render_text(reply) and "kimi" in render_text(reply)


async def test_off_by_default_the_model_is_never_asked(make_cluster: MakeCluster,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await helper_cluster(make_cluster, monkeypatch, None)
    reply, commands = await ask(cluster, UNPLACED)
    assert reply.intent == "help" and not reply.ok and chats(commands) == []
    assert "helped_by" not in reply.data["understood"] and HELPED not in render_text(reply)


async def test_a_placed_message_never_asks_the_model(make_cluster: MakeCluster,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "5s"})
    reply, commands = await ask(cluster, "status kimi")
    assert reply.intent == "status" and chats(commands) == [] and HELPED not in render_text(reply)


HOSTILE = [
    '{"intent": "restart", "services": ["kimi"], "nodes": []}',  # an order: never the model's to choose
    '{"intent": "bench", "services": ["kimi"], "nodes": []}',
    '{"intent": "status", "services": ["prod-db"], "nodes": []}',  # a name the config does not know
    '{"intent": "status", "services": [], "nodes": ["gpu-z"]}',
    '{"intent": "status", "services": [], "nodes": [], "run": "rm -rf /"}',  # more than the schema
    '{"intent": "launch_missiles", "services": [], "nodes": []}',
    "Sure! The user wants the status of kimi.",  # garbage, not JSON
    '{"intent": "status", "services": "kimi"',
]


async def test_a_hostile_answer_is_refused_and_the_message_stays_unplaced(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="inferbot")
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "5s"})
    for content in HOSTILE:
        cluster.sims["gpu-a"].set_live(KIMI_UNIT, chat_content=content)
        reply, commands = await ask(cluster, UNPLACED)
        assert len(chats(commands)) == 1, content  # it was asked, and its answer refused
        assert reply.intent == "help" and not reply.ok, content
        assert not [a for a in reply.actions if a.action_id == "restart_confirm"], content
        assert not [c for c in commands if "systemctl restart" in c], content
        assert "helped_by" not in reply.data["understood"] and HELPED not in render_text(reply), content
    # Each refusal is logged with its reason, never with the person's words or the model's answer.
    assert caplog.text.count("model help refused the answer of kimi") == len(HOSTILE)
    assert "breathing" not in caplog.text and "prod-db" not in caplog.text and "Sure!" not in caplog.text


async def test_a_slow_model_is_not_waited_for(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "1s"})
    cluster.sims["gpu-a"].set_live(KIMI_UNIT, chat_delay_s=8)
    started = time.monotonic()
    reply, _ = await ask(cluster, UNPLACED)
    # Not a benchmark: only that the answer did not wait for the model's 8 s (the bot's start-up included).
    assert time.monotonic() - started < 7
    assert reply.intent == "help" and "helped_by" not in reply.data["understood"]


async def test_a_service_that_is_not_ready_is_not_asked(make_cluster: MakeCluster,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await helper_cluster(make_cluster, monkeypatch, {"model": "kimi", "timeout": "5s"})
    cluster.sims["gpu-a"].set_live(KIMI_UNIT, health_status=503)
    await asyncio.sleep(0.6)  # the fake server reads its live file every 0.25 s
    reply, commands = await ask(cluster, UNPLACED)
    assert chats(commands) == [] and reply.intent == "help"
    assert "helped_by" not in reply.data["understood"]
