"""HTTP mode (Events API) through Bolt's real aiohttp server on loopback, signed like Slack signs."""

from __future__ import annotations

import time

from conftest import HUMAN, all_text, command_form, event_body, mention
from fake_slack import FakeSlack


async def test_signed_mention_gets_a_threaded_answer(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    status, _ = await http.post_event(event_body(mention("help", ts="1700000000.000100")))
    assert status == 200
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["channel"] == "C0CHAN"
    assert call.body["thread_ts"] == "1700000000.000100"  # in the thread of the mention
    text = all_text(call.body["blocks"])
    assert "what I can answer" in text and "settings" in text  # the help card
    assert call.body["text"]  # plain-text fallback
    assert call.headers["authorization"] == "Bearer xoxb-111-222-SecretBotTokenValue"


async def test_mention_inside_a_thread_answers_in_that_thread(fake_slack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("help", ts="1700000000.000300", thread_ts="1700000000.000001")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["thread_ts"] == "1700000000.000001"


async def test_bad_signature_is_401_and_nothing_posted(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    status, _ = await http.post_event(event_body(mention("help")), secret="wrong-secret")
    assert status == 401
    await fake_slack.quiet(0.2)
    assert fake_slack.calls == []  # not even auth.test


async def test_stale_timestamp_is_401_and_nothing_posted(fake_slack: FakeSlack, make_app, empty_runtime,
                                                         serve_http):
    http = await serve_http(make_app(empty_runtime))
    status, _ = await http.post_event(event_body(mention("help")), ts=int(time.time()) - 301)
    assert status == 401
    await fake_slack.quiet(0.2)
    assert fake_slack.calls == []


async def test_a_retry_is_answered_unless_its_event_was_claimed(fake_slack: FakeSlack, make_app, empty_runtime,
                                                                 serve_http):
    http = await serve_http(make_app(empty_runtime))
    body = event_body(mention("help", ts="1700000000.000101"))
    assert (await http.post_event(body))[0] == 200
    await fake_slack.wait_for("chat.postMessage")
    # Slack's redelivery of the same event (it thought we were too slow): acked, not answered again.
    status, _ = await http.post_event(body, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert status == 200
    # A retry of an event whose first delivery never reached us (or any replica) is the only delivery: answered.
    lost = event_body(mention("help", ts="1700000000.000102"))
    status, _ = await http.post_event(lost, headers={"X-Slack-Retry-Num": "2", "X-Slack-Retry-Reason": "http_error"})
    assert status == 200
    calls = await fake_slack.wait_for("chat.postMessage", 2)
    await fake_slack.quiet(0.3)
    assert len(fake_slack.calls_to("chat.postMessage")) == 2
    assert sorted(c.body["thread_ts"] for c in calls) == ["1700000000.000101", "1700000000.000102"]


async def test_slash_command_over_http(fake_slack: FakeSlack, make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    status, text = await http.post_form(command_form("help", fake_slack.response_url("cmd1")))
    assert status == 200 and "Looking" in text  # the immediate ack
    [call] = await fake_slack.wait_for("response:cmd1")
    assert call.body["response_type"] == "in_channel"
    assert "what I can answer" in all_text(call.body["blocks"])
    assert fake_slack.calls_to("chat.postMessage") == []


async def test_healthz(make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    assert await http.get("/healthz") == (200, "ok")


async def test_url_verification(make_app, empty_runtime, serve_http):
    http = await serve_http(make_app(empty_runtime))
    status, text = await http.post_event({"type": "url_verification", "challenge": "abc123", "token": "x"})
    assert status == 200 and "abc123" in text


async def test_bad_signature_does_not_log_the_message_text(fake_slack, make_app, empty_runtime, serve_http, caplog):
    caplog.set_level("INFO")
    http = await serve_http(make_app(empty_runtime))
    await http.post_event(event_body(mention("my very private question", user=HUMAN)), secret="nope")
    assert "my very private question" not in caplog.text
