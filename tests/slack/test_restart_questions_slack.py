"""Issue 10 through the real Bolt app and the fake Slack: an allowed person asking *about* restarts gets an
answer and never a Restart button; only the imperative posts the confirmation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_restart_slack import ALICE, BOB, OPS, OutageSlack, slack_bot, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
__all__ = ["slack_bot"]  # the fixture, shared with the restart flow's tests

QUESTIONS = ["why did kimi restart last night?", "when was the last restart of kimi", "who can restart kimi?",
             "did kimi restart overnight", "should I restart kimi?", "kimi restarted?", "restart history"]
NEGATIONS = ["don't restart kimi", "never restart kimi", "do not restart kimi"]


def posted(fs: OutageSlack, ts: str) -> list[dict[str, Any]]:
    return [b for b in fs.delivered if b.get("channel") == OPS and b.get("thread_ts") == ts]


async def test_allowed_user_asking_about_restarts_gets_no_restart_button(slack_bot: Any) -> None:
    fs = OutageSlack()
    b = await slack_bot(fs)
    asked: list[tuple[str, str]] = []
    for i, text in enumerate(QUESTIONS):
        ts = f"17000001{i:02d}.000100"
        await b.mention(text, user=ALICE, ts=ts)
        asked.append((text, ts))
    for i, text in enumerate(NEGATIONS):
        ts = f"17000002{i:02d}.000100"
        await b.mention(text, user=BOB, ts=ts)
        asked.append((text, ts))
    await until(lambda: all(posted(fs, ts) for _, ts in asked), 30, "an answer to every question")
    for text, ts in asked:
        bodies = json.dumps(posted(fs, ts))
        assert "restart_confirm" not in bodies and "restart_cancel" not in bodies, text
        assert ("who may restart" in bodies) if text in QUESTIONS else ("I won't restart anything" in bodies), text
    assert b.rt.store is not None
    assert [e.event for e in await b.rt.store.audit.recent("kimi")] == []  # nothing was even requested
    # The imperative, from the same person, still posts the confirmation.
    await b.mention("restart kimi", user=BOB, ts="1700000300.000100")
    await until(lambda: "restart_confirm" in json.dumps(posted(fs, "1700000300.000100")), 20, "the confirmation")
