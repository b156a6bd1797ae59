"""Issue 23 through the real Bolt app and the fake Slack: what people actually type in Slack.

A restart that is struck through, quoted, in code, asked with a question mark or for later posts no
confirmation and audits nothing; emoji shortcodes and another person's mention cost no answer; a
suggestion's button asks its command as if the clicker typed it (a restart suggestion reaches the usual
confirmation, never a restart); "thanks!" gets one line.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_restart_slack import ALICE, ASKED_AT, OPS, OutageSlack, slack_bot, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
__all__ = ["slack_bot"]  # the fixture, shared with the restart flow's tests

NOT_ORDERS = [
    "~restart kimi~",
    "\n&gt; restart kimi\nis that all I need to type?",
    "```restart kimi```",
    "is it literally just `restart kimi`?",
    "restart kimi?",
    "restart kimi tomorrow",
    "restart kimi… actually no, wait",
    "~bounce kimi~ nvm it recovered",
]


def posted(fs: OutageSlack, ts: str) -> list[dict[str, Any]]:
    return [b for b in fs.delivered if b.get("channel") == OPS and b.get("thread_ts") == ts]


async def test_a_restart_that_is_not_an_order_posts_no_confirmation(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    asked = []
    for i, text in enumerate(NOT_ORDERS):
        ts = f"17000005{i:02d}.000100"
        await b.mention(text, user=ALICE, ts=ts)  # Alice may restart kimi
        asked.append((text, ts))
    await until(lambda: all(posted(fs, ts) for _, ts in asked), 30, "an answer to every message")
    for text, ts in asked:
        bodies = json.dumps(posted(fs, ts))
        assert "restart_confirm" not in bodies and "restart_cancel" not in bodies, text
    assert b.rt.store is not None
    assert [e.event for e in await b.rt.store.audit.recent("kimi")] == []  # not even requested
    # In doubt, it asks, and says what to type.
    bodies = json.dumps(posted(fs, asked[4][1]))
    assert "Did you want me to restart kimi?" in bodies and "restart kimi" in bodies


async def test_emoji_and_other_peoples_mentions_cost_no_answer(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    await b.mention("is kimi up? :eyes: cc <@U07ABCDEF> <!subteam^S0123|@infra>", ts="1700000600.000100")
    await until(lambda: posted(fs, "1700000600.000100"), 20, "the answer")
    bodies = json.dumps(posted(fs, "1700000600.000100"))
    assert "kimi on gpu-a" in bodies and "Unknown service" not in bodies and "I don't know" not in bodies


async def test_thanks_gets_one_line(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    await b.mention("thanks! :pray:", ts="1700000700.000100")
    await until(lambda: posted(fs, "1700000700.000100"), 20, "the answer")
    [body] = posted(fs, "1700000700.000100")
    assert len(body["text"].strip().splitlines()) == 1 and "what I can answer" not in json.dumps(body)


async def test_a_second_question_is_offered_and_its_button_answers_it(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    await b.mention("kimi status? also gpus", ts=ASKED_AT)
    await until(lambda: posted(fs, ASKED_AT), 20, "the status answer")
    first = json.dumps(posted(fs, ASKED_AT))
    assert "kimi on gpu-a" in first and "suggest_run" in first and "gpus kimi" in first
    await b.click("suggest_run", "gpus kimi", ALICE, "1700000000.000900")
    await until(lambda: any("GPU" in json.dumps(m) and "suggest_run" not in json.dumps(m)
                            for m in posted(fs, ASKED_AT)), 20, "the GPUs answer after the click")


async def test_a_restart_suggestion_clicked_asks_for_the_confirmation_and_restarts_nothing(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    await b.click("suggest_run", "restart kimi", ALICE, "1700000000.000900")
    await until(lambda: any("restart_confirm" in json.dumps(m.get("blocks", [])) for m in fs.delivered), 20,
                "the confirmation")
    assert b.rt.store is not None
    events = [e.event for e in await b.rt.store.audit.recent("kimi")]
    assert events == ["restart.requested"]  # asked for, never executed without Confirm
