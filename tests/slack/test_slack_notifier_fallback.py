"""Notices take the answers' posting path: blocks Slack refuses are posted again as plain text (issue 11)."""

from __future__ import annotations

from fake_slack import FakeSlack
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.poster import Poster
from handlers.reply import Reply, Section

READY = Reply(intent="notice", title="kimi on gpu-a is ready — loaded in 29m 14s", status="ok",
              sections=[Section(kind="text", text="first token in 0.41 s")],
              data={"notice": "✅ kimi on gpu-a is ready — loaded in 29m 14s"})


async def test_a_notice_whose_blocks_are_refused_is_posted_as_text(fake_slack: FakeSlack,
                                                                     web_client: AsyncWebClient) -> None:
    fake_slack.fail_once("chat.postMessage", status=200, body={"ok": False, "error": "invalid_blocks"})
    ts = await Poster(web_client).post("C0NOTIFY1", None, READY)
    first, second = fake_slack.calls_to("chat.postMessage")
    assert first.body.get("blocks") and not second.body.get("blocks")
    assert "kimi on gpu-a is ready" in second.body["text"] and ts


async def test_a_progress_edit_whose_blocks_are_refused_is_made_as_text(fake_slack: FakeSlack,
                                                                        web_client: AsyncWebClient) -> None:
    fake_slack.fail_once("chat.update", status=200, body={"ok": False, "error": "msg_blocks_too_long"})
    await Poster(web_client).update("C0NOTIFY1", "1700000000.000100", READY)
    first, second = fake_slack.calls_to("chat.update")
    assert first.body.get("blocks") and second.body.get("blocks") in (None, "", [], "[]")
    assert "kimi on gpu-a is ready" in second.body["text"]


async def test_any_other_refusal_still_raises(fake_slack: FakeSlack, web_client: AsyncWebClient) -> None:
    from slack_sdk.errors import SlackApiError

    fake_slack.fail_once("chat.postMessage", status=200, body={"ok": False, "error": "channel_not_found"})
    try:
        await Poster(web_client).post("C0NOTIFY1", None, READY)
    except SlackApiError as e:
        assert e.response["error"] == "channel_not_found"
    else:
        raise AssertionError("a refusal other than the blocks must reach the caller (it retries next poll)")
    assert len(fake_slack.calls_to("chat.postMessage")) == 1
