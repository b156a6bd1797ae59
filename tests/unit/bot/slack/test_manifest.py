"""bot/slack/manifest.py and the listeners of bot/slack/listeners/: registering a listener is recording it.

Through the real Bolt app served over signed HTTP: whatever a registration recorded, Bolt routes to a
listener (200), and whatever it did not record, Bolt has no listener for (404) — each listener module on an
app of its own, and the whole app. (slack-manifest.yaml against the record: tests/slack/test_slack_manifest.py.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import HUMAN, SIGNING_SECRET, block_action, command_form, dm, event_body, mention, sign
from fake_slack import FakeSlack
from slack_bolt.app.async_app import AsyncApp

from bot.slack.app import SlackBot, state_of
from bot.slack.listeners import command, home, questions, requests, suggestions
from bot.slack.manifest import Manifest, Registrar
from bot.slack.runtime import SlackRuntime
from config.models import SlackSettings

EVENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "app_mention": lambda: event_body(mention("help")),
    "message.im": lambda: event_body(dm("help")),
    "app_home_opened": lambda: event_body({"type": "app_home_opened", "user": HUMAN, "tab": "home",
                                           "channel": "D0HOME", "event_ts": "1700000000.000300"}),
    "reaction_added": lambda: event_body({"type": "reaction_added", "user": HUMAN, "reaction": "eyes",
                                          "item": {"type": "message", "channel": "C0CHAN", "ts": "1.2"}}),
}
ACTIONS = ("restart_confirm", "restart_cancel", "suggest_run", "suggest_run_2", "home_refresh", "home_restart",
           "not_ours")
COMMANDS = ("/inferbot", "/other")


async def routed(http: Any, fake: FakeSlack) -> Manifest:
    """What Bolt routes to a listener of the app behind ``http``: every event, button and command above that
    is answered 200 (404: no listener)."""
    seen = Manifest()
    for name, body in EVENTS.items():
        status, _ = await http.post_event(body())
        assert status in (200, 404), (name, status)
        if status == 200:
            seen.events.add(name)
    for action_id in ACTIONS:
        raw = urlencode({"payload": json.dumps(block_action(action_id, "help", fake.response_url(action_id)))})
        async with http.session.post(http.url + "/slack/events", data=raw, headers={
                "Content-Type": "application/x-www-form-urlencoded", **sign(raw)}) as r:
            assert r.status in (200, 404), (action_id, r.status)
            if r.status == 200:
                seen.actions.add(action_id)
    for cmd in COMMANDS:
        status, _ = await http.post_form({**command_form("help", fake.response_url("cmd")), "command": cmd})
        assert status in (200, 404), (cmd, status)
        if status == 200:
            seen.commands.add(cmd)
    return seen


async def nothing(*_: Any) -> None:
    """A confirm/cancel click that runs nothing (this is about routing)."""


@pytest.mark.parametrize("module, events, commands, actions, scopes", [
    pytest.param(questions, {"app_mention", "message.im"}, set(), set(), {"app_mentions:read", "im:history"},
                 id="questions"),
    pytest.param(command, set(), {"/inferbot"}, set(), {"commands"}, id="command"),
    pytest.param(requests, set(), set(), {"restart_confirm", "restart_cancel"}, set(), id="requests"),
    pytest.param(suggestions, set(), set(), {"suggest_run", "suggest_run_2"}, set(), id="suggestions"),
    pytest.param(home, {"app_home_opened"}, set(), {"home_refresh", "home_restart"}, set(), id="home"),
])
async def test_each_listener_module_records_exactly_what_it_registers(
        module: ModuleType, events: set[str], commands: set[str], actions: set[str], scopes: set[str],
        fake_slack: FakeSlack, empty_runtime: SlackRuntime, serve_http: Any) -> None:
    app = AsyncApp(client=empty_runtime.notifier.client, signing_secret=SIGNING_SECRET)
    bot = SlackBot(empty_runtime, SlackSettings())
    bot.restart_action = nothing
    manifest = Manifest()
    module.register(Registrar(app, manifest), bot)
    assert (manifest.events, manifest.commands, manifest.actions, manifest.scopes) == (events, commands, actions,
                                                                                      scopes)
    seen = await routed(await serve_http(app), fake_slack)
    assert (seen.events, seen.commands, seen.actions) == (manifest.events, manifest.commands, manifest.actions)
    await bot.drain(5)


async def test_the_whole_app_routes_what_its_manifest_records_and_nothing_else(
        fake_slack: FakeSlack, make_app: Any, empty_runtime: SlackRuntime, serve_http: Any) -> None:
    app = make_app(empty_runtime)
    bot = state_of(app)
    bot.restart_action = nothing
    seen = await routed(await serve_http(app), fake_slack)
    reg = bot.registered
    assert (seen.events, seen.commands, seen.actions) == (reg.events, reg.commands, reg.actions)
    assert reg.events == {"app_mention", "message.im", "app_home_opened"}
    # The Web API scopes come with what calls the methods: the Poster and the group lookup.
    assert {"chat:write", "files:write", "im:write", "usergroups:read"} <= reg.scopes
    await bot.drain(5)


async def test_a_registrar_registers_with_bolt_and_records_in_one_call(fake_slack: FakeSlack, web_client: Any,
                                                                      serve_http: Any) -> None:
    app = AsyncApp(client=web_client, signing_secret=SIGNING_SECRET)
    manifest = Manifest()
    registrar = Registrar(app, manifest)
    heard: list[str] = []

    async def on_dm(event: dict[str, Any]) -> None:
        heard.append(event["text"])

    registrar.event("message", on_dm, subscription="message.im", scope="im:history")
    registrar.uses({"chat:write": "why"})
    assert manifest == Manifest(events={"message.im"}, scopes={"im:history", "chat:write"})
    http = await serve_http(app)
    assert (await http.post_event(event_body(dm("hello there"))))[0] == 200
    assert heard == ["hello there"]
