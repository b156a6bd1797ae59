"""bot/slack/poster.py: the one way anything reaches Slack.

First the Poster on its own, against the fake Slack: blocks Slack refuses go again as plain text (by
chat.postMessage, chat.update and a response_url alike), other refusals reach the caller or the log, every
line is escaped and inert, slack_sdk's retry handlers cover the response_url too. Then every path that
posts, through the real Bolt app: point the fake at refusing blocks, and each one falls back to its plain
text — which only the Poster does, so each went through it. Lines that have no blocks carry the Poster's
marks instead (escaped, ``parse=none``, no ``link_names``, no unfurling).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import HUMAN, all_text, block_action, command_form, dm, event_body, mention, sign
from fake_slack import Call, FakeSlack
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

import bot.slack.app as slack_app
from bot.slack.app import state_of
from bot.slack.blocks import SlackMessage, render_messages
from bot.slack.poster import Poster, Where
from bot.slack.runtime import SlackRuntime
from config.models import SlackSettings
from handlers.audit import record
from handlers.context import Asker
from handlers.notice_pipeline import Notice, deliver
from handlers.notice_pipeline import Where as NoticeWhere
from handlers.reply import Action, Attachment, Chart, ChartPanel, ChartSeries, Reply, Section

REFUSED = {"ok": False, "error": "invalid_blocks"}
LIVE = "<!channel> see <https://evil.example|here> and <@U0SOMEONE>"
INERT_LIVE = "&lt;!channel&gt; see &lt;https://evil.example|here&gt; and &lt;@U0SOMEONE&gt;"


def answer_reply(title: str = "Status", text: str = "all fine", **extra: Any) -> Reply:
    return Reply(intent="status", title=title, status="ok", sections=[Section(kind="text", text=text)], **extra)


def refuse_blocks(fs: FakeSlack, method: str = "chat.postMessage") -> None:
    """The next ``method`` call is refused for its blocks (as Slack answers a block over its limits)."""
    if method.startswith("response:"):
        fs.fail_once(method, status=400, retry_after=None, body={"error": "invalid_blocks"})
    else:
        fs.fail_once(method, status=200, retry_after=None, body=REFUSED)


def fell_back(calls: list[Call], words: str) -> None:
    """The first call carried blocks and was refused; the second is the same message as plain text."""
    assert len(calls) == 2, [c.body for c in calls]
    first, second = calls
    assert first.body.get("blocks") not in (None, "", [], "[]")
    assert second.body.get("blocks") in (None, "", [], "[]")
    assert words in second.body["text"]


async def click(http: Any, payload: dict[str, Any]) -> None:
    """A signed button click, acked."""
    raw = urlencode({"payload": json.dumps(payload)})
    async with http.session.post(http.url + "/slack/events", data=raw, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(raw)}) as r:
        assert r.status == 200


def inert(call: Call) -> None:
    """The Poster's marks on a message: Slack makes nothing in it live."""
    assert call.body["parse"] == "none" and call.body.get("link_names") in (False, None)
    if call.method == "chat.postMessage":
        assert call.body["unfurl_links"] is False and call.body["unfurl_media"] is False


# ------------------------------------------------------------------------------------------------
# The Poster on its own


async def test_a_message_whose_blocks_are_refused_is_posted_as_its_text(fake_slack: FakeSlack,
                                                                        web_client: AsyncWebClient) -> None:
    [m] = render_messages(answer_reply())
    refuse_blocks(fake_slack)
    ts = await Poster(web_client).message("C0CHAN", "1700000000.000100", m)
    calls = fake_slack.calls_to("chat.postMessage")
    fell_back(calls, "Status")
    assert ts and all(c.body["thread_ts"] == "1700000000.000100" for c in calls)
    assert all(inert(c) is None for c in calls)


async def test_an_edit_whose_blocks_are_refused_is_made_with_its_text(fake_slack: FakeSlack,
                                                                      web_client: AsyncWebClient) -> None:
    refuse_blocks(fake_slack, "chat.update")
    await Poster(web_client).update("C0CHAN", "1700000000.000500", answer_reply("Cancelled by someone"))
    calls = fake_slack.calls_to("chat.update")
    fell_back(calls, "Cancelled by someone")
    assert {c.body["ts"] for c in calls} == {"1700000000.000500"}


async def test_a_response_url_that_refuses_the_blocks_gets_the_text(fake_slack: FakeSlack,
                                                                    web_client: AsyncWebClient) -> None:
    [m] = render_messages(answer_reply())
    refuse_blocks(fake_slack, "response:cmd")
    await Poster(web_client).respond(fake_slack.response_url("cmd"), m)
    calls = fake_slack.calls_to("response:cmd")
    fell_back(calls, "Status")
    assert all(c.body["response_type"] == "in_channel" and c.body["replace_original"] is False for c in calls)


async def test_any_other_refusal_reaches_the_caller(fake_slack: FakeSlack, web_client: AsyncWebClient) -> None:
    [m] = render_messages(answer_reply())
    poster = Poster(web_client)
    fake_slack.fail_once("chat.postMessage", status=200, retry_after=None,
                         body={"ok": False, "error": "channel_not_found"})
    with pytest.raises(SlackApiError):
        await poster.message("C0GONE", None, m)
    fake_slack.fail_once("response:old", status=404, retry_after=None, body={"error": "expired_url"})
    with pytest.raises(SlackClientError):
        await poster.respond(fake_slack.response_url("old"), m)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1 and len(fake_slack.calls_to("response:old")) == 1


async def test_the_response_url_is_retried_by_slack_sdks_handlers(fake_slack: FakeSlack,
                                                                  web_client: AsyncWebClient) -> None:
    [m] = render_messages(answer_reply())
    fake_slack.fail_once("response:busy", status=503, retry_after=None, body={"error": "service_unavailable"})
    await Poster(web_client).respond(fake_slack.response_url("busy"), m)  # no raise: the retry got through
    assert len(fake_slack.calls_to("response:busy")) == 2


async def test_an_answer_goes_to_the_response_url_five_times_then_to_the_channel(
        fake_slack: FakeSlack, web_client: AsyncWebClient) -> None:
    messages = [m for i in range(7) for m in render_messages(answer_reply(f"Part {i}"))]
    ok = await Poster(web_client).say(Where("C0CHAN", None, fake_slack.response_url("cmd")), messages)
    assert ok
    assert [c.body["text"].split("\n")[0] for c in fake_slack.calls_to("response:cmd")] == [
        f"✅ Part {i}" for i in range(5)]
    posted = fake_slack.calls_to("chat.postMessage")
    assert [c.body["text"].split("\n")[0] for c in posted] == ["✅ Part 5", "✅ Part 6"]
    assert {c.body["channel"] for c in posted} == {"C0CHAN"} and not any(c.body.get("thread_ts") for c in posted)


async def test_an_answer_stops_at_the_first_message_slack_refuses_and_says_why_in_the_log(
        fake_slack: FakeSlack, web_client: AsyncWebClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    messages = [m for i in range(3) for m in render_messages(answer_reply(f"Part {i}"))]
    fake_slack.fail_once("chat.postMessage", status=200, retry_after=None,
                         body={"ok": False, "error": "not_in_channel"})
    assert await Poster(web_client).say(Where("C0CHAN", "1700000000.000100"), messages) is False
    assert len(fake_slack.calls_to("chat.postMessage")) == 1  # nothing after the refused part
    [failed] = [r for r in caplog.records if r.getMessage() == "could not post the answer"]
    assert failed.reason == "not_in_channel" and failed.part == 1 and failed.parts == 3  # type: ignore[attr-defined]


async def test_an_attachment_that_cannot_be_uploaded_is_posted_as_messages(fake_slack: FakeSlack,
                                                                           web_client: AsyncWebClient) -> None:
    reply = answer_reply(attachments=[Attachment(filename="kimi.log", title="Logs of kimi", content="line one\n")])
    fake_slack.fail_once("files.getUploadURLExternal", status=200, retry_after=None,
                         body={"ok": False, "error": "not_allowed"})
    assert await Poster(web_client).attach(Where("C0CHAN", "1700000000.000100"), reply)
    [post] = fake_slack.calls_to("chat.postMessage")
    assert "line one" in all_text(post.body["blocks"]) and post.body["thread_ts"] == "1700000000.000100"


@pytest.mark.parametrize("how", ["thread", "ephemeral", "response_url"])
async def test_a_line_of_the_bots_own_is_escaped_and_inert(fake_slack: FakeSlack, web_client: AsyncWebClient,
                                                           how: str) -> None:
    where = Where("C0CHAN", "1700000000.000100", fake_slack.response_url("r") if how == "response_url" else None)
    assert await Poster(web_client).line(where, LIVE, ephemeral_to=HUMAN if how == "ephemeral" else None)
    method = {"thread": "chat.postMessage", "ephemeral": "chat.postEphemeral", "response_url": "response:r"}[how]
    [call] = fake_slack.calls_to(method)
    assert call.body["text"] == INERT_LIVE
    inert(call)
    if how == "ephemeral":
        assert call.body["user"] == HUMAN and call.body["thread_ts"] == "1700000000.000100"
    if how == "response_url":
        assert call.body["response_type"] == "ephemeral" and "blocks" not in call.body


async def test_a_line_that_cannot_be_said_is_logged_not_raised(fake_slack: FakeSlack, web_client: AsyncWebClient,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    fake_slack.fail_once("chat.postMessage", status=200, retry_after=None,
                         body={"ok": False, "error": "is_archived"})
    assert await Poster(web_client).line(Where("C0OLD"), "hello") is False
    [failed] = [r for r in caplog.records if r.getMessage() == "could not post a line"]
    assert failed.reason == "is_archived"  # type: ignore[attr-defined]


async def test_a_notice_is_posted_whole_and_its_first_ts_returned(fake_slack: FakeSlack,
                                                                  web_client: AsyncWebClient) -> None:
    long = "\n".join(f"line {i:04d} " + "x" * 100 for i in range(400))  # more than one message
    ts = await Poster(web_client).post("C0NOTIFY", None, answer_reply("Logs", long))
    posts = fake_slack.calls_to("chat.postMessage")
    assert len(posts) > 1 and ts  # every part, in order; the ts is the first's
    first_ts = await Poster(web_client).post("C0NOTIFY", None, answer_reply("Short"))
    assert first_ts != ts


async def test_a_dm_channel_is_opened_or_none_is_said(fake_slack: FakeSlack, web_client: AsyncWebClient) -> None:
    poster = Poster(web_client)
    assert await poster.open_dm("U0ALICE") == "D0ALICE"
    fake_slack.fail_once("conversations.open", status=200, retry_after=None,
                         body={"ok": False, "error": "user_not_found"})
    assert await poster.open_dm("U0GONE") is None


# ------------------------------------------------------------------------------------------------
# Every path that posts goes through the Poster: through the real app, each one falls back


async def test_answers_to_a_mention_a_dm_and_a_suggestion_fall_back(fake_slack: FakeSlack, make_app: Any,
                                                                    empty_runtime: SlackRuntime,
                                                                    serve_http: Any) -> None:
    app = make_app(empty_runtime)
    http = await serve_http(app)
    for i, (body, words) in enumerate([(event_body(mention("help", ts="1700000001.000100")), "inferbot"),
                                       (event_body(dm("help", ts="1700000002.000100")), "inferbot")]):
        refuse_blocks(fake_slack)
        await http.post_event(body)
        await fake_slack.wait_for("chat.postMessage", 2 * (i + 1))
        await state_of(app).drain(3)
        fell_back(fake_slack.calls_to("chat.postMessage")[2 * i:2 * i + 2], words)
    refuse_blocks(fake_slack)
    await click(http, block_action("suggest_run", "help", fake_slack.response_url()))
    await fake_slack.wait_for("chat.postMessage", 6)
    await state_of(app).drain(3)
    fell_back(fake_slack.calls_to("chat.postMessage")[4:6], "inferbot")


async def test_a_slash_commands_answer_falls_back_at_its_response_url(fake_slack: FakeSlack, make_app: Any,
                                                                      empty_runtime: SlackRuntime,
                                                                      serve_http: Any) -> None:
    app = make_app(empty_runtime)
    http = await serve_http(app)
    refuse_blocks(fake_slack, "response:cmd")
    status, _ = await http.post_form(command_form("help", fake_slack.response_url("cmd")))
    assert status == 200
    await fake_slack.wait_for("response:cmd", 2)
    await state_of(app).drain(3)
    fell_back(fake_slack.calls_to("response:cmd"), "inferbot")


async def test_a_confirmation_falls_back_and_so_does_its_rewrite_on_a_click(
        fake_slack: FakeSlack, make_app: Any, store_runtime: SlackRuntime, serve_http: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    rt = store_runtime
    assert rt.store is not None
    now = datetime.now(UTC)
    rid = "r-0000000000aa"
    await rt.store.requests.create(rid, "kimi", "gpu-a", "vllm-kimi.service", HUMAN, "C0CHAN",
                                   "1700000000.000100", now, now + timedelta(minutes=5), False, kind="restart")
    confirmation = answer_reply("Restart kimi on gpu-a?", data={"request_id": rid},
                                actions=[Action(action_id="restart_confirm", text="Restart kimi", value=rid),
                                         Action(action_id="restart_cancel", text="Cancel", value=rid)])

    async def asked(text: Any, ctx: Any, *_: Any) -> Reply:  # what `restart kimi` answers once its checks passed
        return confirmation

    monkeypatch.setattr(slack_app, "answer", asked)
    app = make_app(rt)
    http = await serve_http(app)
    refuse_blocks(fake_slack)
    await http.post_event(event_body(mention("restart kimi", ts="1700000000.000100")))
    await fake_slack.wait_for("chat.postMessage", 2)
    await state_of(app).drain(3)
    fell_back(fake_slack.calls_to("chat.postMessage"), "Restart kimi on gpu-a?")
    req = await rt.store.requests.get(rid)
    assert req is not None and req.message_ts  # the text that was posted is the one the flow rewrites
    # The asker cancels it: the flow's rewrite of the message is an edit through the Poster.
    refuse_blocks(fake_slack, "chat.update")
    await click(http, block_action("restart_cancel", rid, fake_slack.response_url("click")))
    await fake_slack.wait_for("chat.update", 2)
    await state_of(app).drain(3)
    fell_back(fake_slack.calls_to("chat.update"), "Cancelled by")


async def test_notices_of_the_handlers_fall_back(fake_slack: FakeSlack, store_runtime: SlackRuntime) -> None:
    """The handlers' Notifier is the runtime's Poster: a notice of the pipeline, an audit mirror, an edit."""
    ctx = store_runtime.context(Asker(surface="slack", user_id=HUMAN, channel_id="C0CHAN"))
    ready = answer_reply("kimi on gpu-a is ready", data={"notice": "✅ kimi on gpu-a is ready", "kind": "ready"})
    refuse_blocks(fake_slack)
    done = await deliver(ctx, ctx.notifier, Notice("kimi@gpu-a", NoticeWhere("notify", "C0NOTIFY", None), ready,
                                                   "kimi", "gpu-a"))
    assert done.outcome == "sent", done
    fell_back(fake_slack.calls_to("chat.postMessage"), "kimi on gpu-a is ready")
    refuse_blocks(fake_slack, "chat.update")
    assert ctx.notifier is not None
    await ctx.notifier.update("C0NOTIFY", done.ts or "", ready)
    fell_back(fake_slack.calls_to("chat.update"), "kimi on gpu-a is ready")
    ctx.config = ctx.config.model_copy(update={"audit": ctx.config.audit.model_copy(update={"channel": "C0AUDIT"})})
    refuse_blocks(fake_slack)
    await record(ctx, "restart.requested", "kimi", "gpu-a", "asked")
    fell_back([c for c in fake_slack.calls_to("chat.postMessage") if c.body["channel"] == "C0AUDIT"], "audit:")


async def test_a_home_restart_refused_in_a_dm_falls_back(fake_slack: FakeSlack, make_app: Any,
                                                         empty_runtime: SlackRuntime, serve_http: Any) -> None:
    app = make_app(empty_runtime)
    http = await serve_http(app)
    refuse_blocks(fake_slack)
    pressed = block_action("home_restart", "kimi@gpu-a", fake_slack.response_url("home"))
    pressed["container"] = {"type": "view", "view_id": "V0HOME"}
    await click(http, pressed)
    await fake_slack.wait_for("chat.postMessage", 2)
    await state_of(app).drain(3)
    calls = fake_slack.calls_to("chat.postMessage")
    fell_back(calls, "Restart refused")
    assert {c.body["channel"] for c in calls} == {"D" + HUMAN.lstrip("UW")[:10]}  # the DM conversations.open gave


async def test_lines_without_blocks_carry_the_posters_marks(fake_slack: FakeSlack, make_app: Any,
                                                            serve_http: Any, store_runtime: SlackRuntime) -> None:
    """The rate-limit line, and the one line a person of another workspace gets."""
    app = make_app(store_runtime, settings=SlackSettings(rate_limit_per_minute=1))
    http = await serve_http(app)
    await http.post_event(event_body(mention("help", ts="1700000003.000100")))
    await fake_slack.wait_for("chat.postMessage", 1)
    await state_of(app).drain(3)
    await http.post_event(event_body(mention("help", ts="1700000004.000100")))  # one too many this minute
    await fake_slack.wait_for("chat.postMessage", 2)
    await state_of(app).drain(3)
    limited = fake_slack.calls_to("chat.postMessage")[-1]
    assert "faster than I can SSH" in limited.body["text"] and limited.body["thread_ts"] == "1700000004.000100"
    inert(limited)

    other = event_body(dm("help", user="U0STRANGER", ts="1700000005.000100"))
    other["event"]["user_team"] = "T0OTHER"
    await http.post_event(other)
    await fake_slack.wait_for("chat.postMessage", 3)
    await state_of(app).drain(3)
    stranger = fake_slack.calls_to("chat.postMessage")[-1]
    assert "only people of the workspace" in stranger.body["text"]
    inert(stranger)


async def test_a_chart_that_cannot_be_uploaded_is_said_through_the_poster(fake_slack: FakeSlack, make_app: Any,
                                                                          empty_runtime: SlackRuntime,
                                                                          serve_http: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    chart = Chart(filename="t.png", title="Throughput", alt_text="a chart", xlabel="time",
                  panels=[ChartPanel(ylabel="tok/s", series=[ChartSeries(name="generation", y=[1.0, 2.0],
                                                                        x=[now - timedelta(minutes=1), now])])])

    async def charted(text: Any, ctx: Any, *_: Any) -> Reply:
        return answer_reply("Throughput", chart=chart)

    monkeypatch.setattr(slack_app, "answer", charted)
    fake_slack.fail_once("files.getUploadURLExternal", status=200, retry_after=None,
                         body={"ok": False, "error": "not_in_channel"})
    app = make_app(empty_runtime)
    http = await serve_http(app)
    await http.post_event(event_body(mention("chart", ts="1700000006.000100")))
    await fake_slack.wait_for("chat.postMessage", 2, within=20)
    await state_of(app).drain(5)
    said = fake_slack.calls_to("chat.postMessage")[-1]
    assert "could not upload the chart: not_in_channel" in said.body["text"]
    assert said.body["thread_ts"] == "1700000006.000100"
    inert(said)


def test_a_slack_message_of_no_blocks_is_sent_without_blocks() -> None:
    m = SlackMessage(blocks_json=b"[]", text_utf8=b"x")
    assert m.blocks == [] and m.text == "x"
