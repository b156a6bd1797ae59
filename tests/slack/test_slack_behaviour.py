"""What people get: DMs, help, unreachable nodes, retries, duplicates, bots, rate limit, long answers."""

from __future__ import annotations

import asyncio

import pytest
from conftest import HUMAN, all_text, block_action, dm, event_body, mention
from fake_slack import BOT_ID, BOT_USER_ID, FakeSlack

import bot.slack.app as slack_app
from bot.slack.app import state_of
from bot.slack.guards import RateLimiter, TtlSet
from bot.understanding.markup import plain_text, read
from handlers.reply import Action, Attachment, Reply, Section


async def test_dm_is_answered_in_the_dm(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(dm("help", channel="D0DM1")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["channel"] == "D0DM1"
    assert "thread_ts" not in call.body  # a top-level DM gets a top-level answer
    assert "what I can answer" in all_text(call.body["blocks"])


async def test_dm_in_a_thread_is_answered_in_the_thread(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(dm("help", thread_ts="1700000000.000007")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["thread_ts"] == "1700000000.000007"


async def test_unknown_text_gets_a_short_help(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    """Issue 23, point 8: not the whole table — what it may have meant, and "`help` for everything"."""
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("make me a sandwich")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    text = all_text(call.body["blocks"])
    assert "not sure what you meant" in text and "`help` for everything" in text
    assert "what I can answer" not in text and len(call.body["text"].strip().splitlines()) <= 4


async def test_unreachable_node_is_a_friendly_answer_in_the_thread(fake_slack: FakeSlack, make_app,
                                                                   unreachable_runtime, serve_http):
    http = await serve_http(make_app(unreachable_runtime))
    await http.post_event(event_body(mention("what are current settings?", ts="1700000000.000800")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["thread_ts"] == "1700000000.000800"
    text = all_text(call.body["blocks"])
    assert "gpu-a unreachable" in text and "— kimi" in text  # the node's card names the service it took with it
    assert "connection refused" in text
    assert "❌" in text
    assert "Traceback" not in text and "internal error" not in text


async def test_rate_limited_post_is_retried_and_answered_once(fake_slack: FakeSlack, make_app, empty_runtime,
                                                              serve_http):
    fake_slack.fail_once("chat.postMessage", status=429, retry_after=0)
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("help")))
    calls = await fake_slack.wait_for("chat.postMessage", 2)  # the 429, then the retry
    await fake_slack.quiet(0.1)
    assert len(fake_slack.calls_to("chat.postMessage")) == 2
    assert calls[0].body == calls[1].body  # the same message, posted once successfully


async def test_same_event_id_twice_answers_once(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("help"), event_id="EvSAME"))
    await http.post_event(event_body(mention("help"), event_id="EvSAME"))
    await fake_slack.wait_for("chat.postMessage")
    await fake_slack.quiet(0.2)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1


@pytest.mark.parametrize("event", [
    dm("help", user=BOT_USER_ID),  # the bot's own message
    dm("help", bot_id=BOT_ID),  # ... as Slack marks it
    dm("help", user="UOTHERBOT", bot_id="BOTHER", subtype="bot_message"),  # another bot
    dm("help", subtype="message_changed"),  # an edit
    {**dm("help"), "channel_type": "channel"},  # a channel message that is not a mention
    mention("help", user="UOTHERBOT", bot_id="BOTHER"),  # a bot mentioning us
])
async def test_bots_own_and_other_messages_are_ignored(fake_slack: FakeSlack, make_app, empty_runtime, serve_http,
                                                       event):
    http = await serve_http(make_app(empty_runtime))
    status, _ = await http.post_event(event_body(event))
    assert status == 200  # acked, so Slack does not retry
    await fake_slack.quiet(0.2)
    assert fake_slack.calls_to("chat.postMessage") == []


async def test_rate_limit_is_answered_politely_once(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime, rate_limit=2))
    for i in range(5):
        await http.post_event(event_body(mention("help", ts=f"1700000000.00010{i}")))
    await fake_slack.wait_for("chat.postMessage", 3)
    await fake_slack.quiet(0.2)
    calls = fake_slack.calls_to("chat.postMessage")
    assert len(calls) == 3  # two answers and one notice; the 4th and 5th question get nothing more
    notices = [c for c in calls if "faster than I can SSH" in c.body.get("text", "")]
    assert len(notices) == 1
    assert notices[0].body["thread_ts"] == "1700000000.000102"  # in the thread of the refused question
    assert "try again in" in notices[0].body["text"]
    # Another person is not affected.
    await http.post_event(event_body(mention("help", user="UOTHER")))
    await fake_slack.wait_for("chat.postMessage", 4)


def test_rate_limiter_window() -> None:
    now = [0.0]
    rl = RateLimiter(2, clock=lambda: now[0])
    assert rl.check("U").allowed and rl.check("U").allowed
    v = rl.check("U")
    assert not v.allowed and v.notify and v.retry_in == 60
    now[0] = 30.0
    v = rl.check("U")
    assert not v.allowed and not v.notify and v.retry_in == 30
    now[0] = 60.5
    assert rl.check("U").allowed


def test_ttl_set() -> None:
    now = [0.0]
    seen = TtlSet(ttl=10, clock=lambda: now[0])
    assert seen.add("a") and not seen.add("a")
    now[0] = 11
    assert seen.add("a")


def test_slack_markup_is_read_once_with_its_structure() -> None:
    """Mentions, channels and links are undone; quotes, code and strike are kept as marks (issue 23)."""
    assert plain_text("<@UBOT> what are current settings?") == "what are current settings?"
    assert plain_text("<@UBOT|inferbot>   status <#C123|ops> &lt;kimi&gt; &amp;") == "status <kimi> &"
    assert plain_text("logs <http://x.y/z|kimi>") == "logs kimi"
    m = read("&gt; restart kimi\n~bounce qwen~ and `restart kimi` then ```restart\nkimi```", "slack")
    marks = [(s.text.strip(), s.quoted, s.struck, s.code) for s in m.segments if s.text.strip()]
    assert ("restart kimi", True, False, False) in marks
    assert ("bounce qwen", False, True, False) in marks
    assert ("restart kimi", False, False, True) in marks
    assert ("restart\nkimi", False, False, True) in marks
    assert read(":wave: :+1:", "slack").emoji == ("wave", "+1") and read(":wave:", "slack").empty
    assert read("<@U07OTHER> restart kimi", "slack", "U0BOT").to_other
    assert not read("<@U0BOT> <@U07OTHER> says restart kimi", "slack", "U0BOT").to_other


def long_reply() -> Reply:
    sections: list[Section] = []
    for i in range(6):
        sections.append(Section(kind="header", title=f"svc{i} on gpu-{i}", status="ok"))
        sections.append(Section(kind="fields", fields=[(f"fact{j}", f"value-{i}-{j}") for j in range(12)]))
        for g in range(4):
            sections.append(Section(kind="table", title=f"Flags — group {g}", headers=["flag", "value"],
                                    rows=[[f"--flag-{i}-{g}-{r}", f"v{i}.{g}.{r}-" + "x" * 40] for r in range(60)]))
        sections.append(Section(kind="context", title="Warnings", text=f"⚠ warning for svc{i}"))
    return Reply(intent="settings", title="Current settings", status="ok", sections=sections,
                 actions=[Action(action_id="restart_confirm", text="Restart svc0", value="svc0", style="danger")])


async def test_long_answer_is_split_into_threaded_messages_and_nothing_is_lost(fake_slack: FakeSlack, make_app,
                                                                               empty_runtime, serve_http,
                                                                               monkeypatch):
    reply = long_reply()

    async def fake_answer(text, ctx, *_):
        return reply

    monkeypatch.setattr(slack_app, "answer", fake_answer)
    app = make_app(empty_runtime)
    http = await serve_http(app)
    await http.post_event(event_body(mention("what are current settings?", ts="1700000000.000900")))
    await fake_slack.wait_for("chat.postMessage")
    await state_of(app).drain(3)
    calls = fake_slack.calls_to("chat.postMessage")
    assert len(calls) > 1
    assert all(c.body["thread_ts"] == "1700000000.000900" for c in calls)
    assert all(len(c.body["blocks"]) <= 50 for c in calls)
    text = "\n".join(all_text(c.body["blocks"]) for c in calls)
    for i in range(6):
        for g in range(4):
            for r in range(60):
                assert f"--flag-{i}-{g}-{r}" in text
        for j in range(12):
            assert f"value-{i}-{j}" in text
        assert f"warning for svc{i}" in text
    assert [e["action_id"] for c in calls for b in c.body["blocks"] if b["type"] == "actions"
            for e in b["elements"]] == ["restart_confirm"]
    assert all(c.body["text"] for c in calls)


async def test_attachments_are_uploaded_as_files_in_the_thread(fake_slack: FakeSlack, make_app, empty_runtime,
                                                               serve_http, monkeypatch):
    log_text = "\n".join(f"line {i}" for i in range(500))

    async def fake_answer(text, ctx, *_):
        return Reply(intent="logs", title="logs kimi", sections=[Section(kind="text", text="500 lines")],
                     attachments=[Attachment(filename="kimi.log", title="kimi journal", content=log_text)])

    monkeypatch.setattr(slack_app, "answer", fake_answer)
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("logs kimi", ts="1700000000.000950")))
    [done] = await fake_slack.wait_for("files.completeUploadExternal")
    assert done.body["thread_ts"] == "1700000000.000950"
    [upload] = [c for c in fake_slack.calls if c.method.startswith("upload:")]
    assert upload.body["content"] == log_text


async def test_failed_upload_falls_back_to_messages(fake_slack: FakeSlack, make_app, empty_runtime, serve_http,
                                                    monkeypatch):
    log_text = "\n".join(f"line {i}" for i in range(300))

    async def fake_answer(text, ctx, *_):
        return Reply(intent="logs", title="logs kimi",
                     attachments=[Attachment(filename="kimi.log", title="kimi journal", content=log_text)])

    monkeypatch.setattr(slack_app, "answer", fake_answer)
    fake_slack.fail_once("files.getUploadURLExternal", status=200, retry_after=None,
                         body={"ok": False, "error": "missing_scope"})
    app = make_app(empty_runtime)
    http = await serve_http(app)
    await http.post_event(event_body(mention("logs kimi")))
    await fake_slack.wait_for("chat.postMessage", 2)
    await state_of(app).drain(3)
    text = "\n".join(all_text(c.body["blocks"]) for c in fake_slack.calls_to("chat.postMessage"))
    assert all(f"line {i}\n" in text + "\n" for i in range(300))


async def test_post_failure_is_logged_with_the_reason_and_does_not_crash(fake_slack: FakeSlack, make_app,
                                                                         empty_runtime, serve_http, caplog):
    caplog.set_level("INFO")
    fake_slack.fail_once("chat.postMessage", status=200, retry_after=None,
                         body={"ok": False, "error": "channel_not_found"})
    app = make_app(empty_runtime)
    http = await serve_http(app)
    await http.post_event(event_body(mention("help")))
    await fake_slack.wait_for("chat.postMessage")
    await state_of(app).drain(3)
    failed = [r for r in caplog.records if r.getMessage() == "could not post the answer"]
    assert failed and failed[0].reason == "channel_not_found"  # type: ignore[attr-defined]
    # ...and the app still answers the next question.
    await http.post_event(event_body(mention("help")))
    await fake_slack.wait_for("chat.postMessage", 2)


async def test_restart_action_hook_is_replaceable(fake_slack: FakeSlack, make_app, empty_runtime, serve_http,
                                                  monkeypatch):
    seen: list[tuple[str, str]] = []

    async def hook(action, body, client, runtime, respond):
        seen.append((action["action_id"], action["value"]))
        assert runtime is empty_runtime
        await client.chat_postMessage(channel=body["channel"]["id"], text="restarting")

    app = make_app(empty_runtime)
    state_of(app).restart_action = hook  # the hook is the app's own, not a module global
    http = await serve_http(app)
    import json
    from urllib.parse import urlencode

    from conftest import sign

    for action_id in ("restart_confirm", "restart_cancel"):
        raw = urlencode({"payload": json.dumps(block_action(action_id, "kimi", fake_slack.response_url()))})
        async with http.session.post(http.url + "/slack/events", data=raw, headers={
                "Content-Type": "application/x-www-form-urlencoded", **sign(raw)}) as r:
            assert r.status == 200
    await fake_slack.wait_for("chat.postMessage", 2)
    assert seen == [("restart_confirm", "kimi"), ("restart_cancel", "kimi")]


async def test_mention_ack_is_not_delayed_by_ssh_work(fake_slack: FakeSlack, make_app, empty_runtime, socket_mode,
                                                      monkeypatch):
    real = slack_app.answer

    async def slow(text, ctx, *_):
        await asyncio.sleep(0.5)
        return await real(text, ctx)

    monkeypatch.setattr(slack_app, "answer", slow)
    await socket_mode(make_app(empty_runtime, process_before_response=True))
    loop = asyncio.get_running_loop()
    started = loop.time()
    env = await fake_slack.send_envelope("events_api", event_body(mention("help")))
    await fake_slack.wait_ack(env, within=1.0)
    assert loop.time() - started < 0.4
    await fake_slack.wait_for("chat.postMessage")
    assert HUMAN
