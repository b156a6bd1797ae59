"""Socket Mode against the fake's websocket: connect, ack, answer, slash command, reconnect."""

from __future__ import annotations

from conftest import APP_TOKEN, all_text, block_action, command_form, event_body, mention
from fake_slack import FakeSlack


async def test_connects_through_apps_connections_open(fake_slack: FakeSlack, make_app, empty_runtime, socket_mode):
    handler = await socket_mode(make_app(empty_runtime))
    [call] = fake_slack.calls_to("apps.connections.open")
    assert call.headers["authorization"] == f"Bearer {APP_TOKEN}"  # the app token, same base URL
    assert await handler.client.is_connected()


async def test_mention_envelope_is_acked_and_answered(fake_slack: FakeSlack, make_app, empty_runtime, socket_mode):
    await socket_mode(make_app(empty_runtime))
    # Slack's first delivery carries retry_attempt 0: it must be answered.
    env = await fake_slack.send_envelope("events_api", event_body(mention("help", ts="1700000000.000500")),
                                         retry_attempt=0)
    ack = await fake_slack.wait_ack(env)
    assert ack == {"envelope_id": env}
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["thread_ts"] == "1700000000.000500"
    assert "what I can answer" in all_text(call.body["blocks"])


async def test_redelivered_envelope_is_acked_not_answered(fake_slack: FakeSlack, make_app, empty_runtime,
                                                          socket_mode):
    await socket_mode(make_app(empty_runtime))
    body = event_body(mention("help"))
    await fake_slack.wait_ack(await fake_slack.send_envelope("events_api", body))
    await fake_slack.wait_for("chat.postMessage")
    env = await fake_slack.send_envelope("events_api", body, retry_attempt=1, retry_reason="timeout")
    await fake_slack.wait_ack(env)  # acked, so Slack stops retrying
    await fake_slack.quiet(0.2)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1


async def test_a_retried_envelope_nobody_saw_is_answered(fake_slack: FakeSlack, make_app, empty_runtime,
                                                         socket_mode):
    await socket_mode(make_app(empty_runtime))
    # The first delivery went to a connection that died before acking it: Slack's retry is the only one.
    body = event_body(mention("help", ts="1700000000.000600"))
    env = await fake_slack.send_envelope("events_api", body, retry_attempt=1, retry_reason="timeout")
    assert await fake_slack.wait_ack(env) == {"envelope_id": env}
    [call] = await fake_slack.wait_for("chat.postMessage")
    assert call.body["thread_ts"] == "1700000000.000600"


async def test_slash_command_acked_at_once_then_answered_via_response_url(fake_slack: FakeSlack, make_app,
                                                                          empty_runtime, socket_mode):
    await socket_mode(make_app(empty_runtime))
    form = command_form("help", fake_slack.response_url("c1"))
    env = await fake_slack.send_envelope("slash_commands", form)
    ack = await fake_slack.wait_ack(env, within=1.0)
    assert "Looking" in ack["payload"]["text"]
    [call] = await fake_slack.wait_for("response:c1")
    assert call.body["response_type"] == "in_channel"
    assert "what I can answer" in all_text(call.body["blocks"])


async def test_slash_command_ack_is_not_delayed_by_a_slow_answer(fake_slack: FakeSlack, make_app, unreachable_runtime,
                                                                 socket_mode, monkeypatch):
    import asyncio

    import bot.slack.app as slack_app

    real = slack_app.answer

    async def slow(text, ctx, *_):
        await asyncio.sleep(0.5)  # SSH to a slow node
        return await real(text, ctx)

    monkeypatch.setattr(slack_app, "answer", slow)
    await socket_mode(make_app(unreachable_runtime, process_before_response=True))
    loop = asyncio.get_running_loop()
    started = loop.time()
    env = await fake_slack.send_envelope("slash_commands", command_form("help", fake_slack.response_url("c2")))
    await fake_slack.wait_ack(env, within=1.0)
    assert loop.time() - started < 0.4  # acked before the work
    await fake_slack.wait_for("response:c2")


async def test_disconnect_reconnects_and_keeps_answering(fake_slack: FakeSlack, make_app, empty_runtime,
                                                         socket_mode):
    await socket_mode(make_app(empty_runtime))
    await fake_slack.send_disconnect()
    await fake_slack.wait_for("apps.connections.open", 2)  # a fresh URL for the new connection
    await fake_slack.wait_connected(accepted=2)
    env = await fake_slack.send_envelope("events_api", event_body(mention("help")))
    await fake_slack.wait_ack(env)
    await fake_slack.wait_for("chat.postMessage")


async def test_restart_button_is_acked_and_reaches_the_hook(fake_slack: FakeSlack, make_app, empty_runtime,
                                                            socket_mode, monkeypatch):
    from bot.slack.app import state_of

    async def hook(action, body, client, runtime, respond):
        await respond(text=f"got {action['action_id']} {action['value']}", response_type="ephemeral",
                      replace_original=False)

    app = make_app(empty_runtime)
    state_of(app).restart_action = hook  # the hook is the app's own, not a module global
    await socket_mode(app)
    env = await fake_slack.send_envelope("interactive", block_action("restart_confirm", "kimi",
                                                                     fake_slack.response_url("a1")))
    assert await fake_slack.wait_ack(env, within=1.0) == {"envelope_id": env}
    [call] = await fake_slack.wait_for("response:a1")
    assert call.body["text"] == "got restart_confirm kimi"
    assert call.body["response_type"] == "ephemeral"
