"""People of another workspace get one line and nothing else (issue 22, item 8): ``[slack] allowed_teams``,
by default the app's own workspace as ``auth.test`` says. Through the real Bolt app over signed HTTP.

The payloads are Slack's: a Slack Connect channel marks the event ``is_ext_shared_channel`` and names the
person's own workspace in ``event.user_team``; an org-wide (Enterprise Grid) app gets each workspace's
events with that workspace's ``team_id``; a click carries the clicker's ``user.team_id``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import HUMAN, all_text, block_action, command_form, event_body, mention, sign
from fake_slack import TEAM_ID, FakeSlack
from pydantic import ValidationError

from bot.slack.app import state_of
from config.models import SlackSettings

ONE_LINE = "Sorry — inferbot answers only people of the workspace it is installed in."
OTHER = "T0OTHER"
STRANGER = "U0STRANGER"


def connect_mention(text: str, ts: str = "1700000200.000100") -> dict[str, Any]:
    """A mention from a person of another workspace in a Slack Connect channel."""
    body = event_body(mention(text, user=STRANGER, ts=ts, team=OTHER, user_team=OTHER, source_team=OTHER))
    return {**body, "is_ext_shared_channel": True}


def org_home_opened(team: str) -> dict[str, Any]:
    """An org-wide app's Home opened in workspace ``team`` of the org."""
    body = event_body({"type": "app_home_opened", "user": STRANGER, "channel": "D0HOME", "tab": "home",
                       "event_ts": "1700000000.000100"})
    return {**body, "team_id": team, "authorizations": [{"team_id": team, "user_id": "UBOT", "is_bot": True}]}


async def post_action(http: Any, payload: dict[str, Any]) -> int:
    raw = urlencode({"payload": json.dumps(payload)})
    async with http.session.post(http.url + "/slack/events", data=raw, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(raw)}) as r:
        return r.status


async def test_a_slack_connect_mention_gets_one_line_and_no_answer(fake_slack: FakeSlack, make_app, empty_runtime,
                                                                  serve_http) -> None:
    app = make_app(empty_runtime)
    http = await serve_http(app)
    status, _ = await http.post_event(connect_mention("what are current settings?"))
    assert status == 200
    [line] = await fake_slack.wait_for("chat.postEphemeral")
    await state_of(app).drain(3)
    await fake_slack.quiet(0.3)
    assert line.body["user"] == STRANGER and line.body["thread_ts"] == "1700000200.000100"
    assert line.body["text"] == ONE_LINE
    assert fake_slack.calls_to("chat.postMessage") == []  # no answer, not even help
    # Someone of this workspace, in the same channel, is answered as ever.
    await http.post_event(event_body(mention("help", user=HUMAN, team=TEAM_ID, user_team=TEAM_ID)))
    [answer] = await fake_slack.wait_for("chat.postMessage")
    assert "what I can answer" in all_text(answer.body["blocks"])


async def test_a_slash_command_from_another_workspace_is_refused_in_its_ack(fake_slack: FakeSlack, make_app,
                                                                          empty_runtime, serve_http) -> None:
    http = await serve_http(make_app(empty_runtime))
    form = {**command_form("settings", fake_slack.response_url("other"), user=STRANGER), "team_id": OTHER}
    status, text = await http.post_form(form)
    assert status == 200 and json.loads(text)["text"] == ONE_LINE
    await fake_slack.quiet(0.5)
    assert fake_slack.calls_to("response:other") == []


async def test_a_click_from_another_workspace_runs_nothing(fake_slack: FakeSlack, make_app, empty_runtime,
                                                          serve_http) -> None:
    app = make_app(empty_runtime)
    clicked: list[str] = []

    async def hook(action: Any, body: Any, client: Any, runtime: Any, respond: Any) -> None:
        clicked.append(action["value"])

    state_of(app).restart_action = hook
    http = await serve_http(app)
    payload = block_action("restart_confirm", "r-123", fake_slack.response_url("click"), user=STRANGER)
    payload["user"]["team_id"] = OTHER
    assert await post_action(http, payload) == 200
    [line] = await fake_slack.wait_for("response:click")
    assert line.body["text"] == ONE_LINE and line.body["response_type"] == "ephemeral"
    await state_of(app).drain(3)
    assert clicked == []  # the restart's own checks never even ran
    # The same click by someone of this workspace reaches the restart flow.
    mine = block_action("restart_confirm", "r-123", fake_slack.response_url("mine"))
    mine["user"]["team_id"] = TEAM_ID
    assert await post_action(http, mine) == 200
    await state_of(app).drain(3)
    assert clicked == ["r-123"]


async def test_a_home_opened_in_another_workspace_of_the_org_shows_one_line(fake_slack: FakeSlack, make_app,
                                                                          empty_runtime, serve_http) -> None:
    app = make_app(empty_runtime)
    http = await serve_http(app)
    assert (await http.post_event(org_home_opened(OTHER)))[0] == 200
    [call] = await fake_slack.wait_for("views.publish")
    view = json.loads(call.body["view"]) if isinstance(call.body["view"], str) else call.body["view"]
    assert call.body["user_id"] == STRANGER and all_text(view["blocks"]) == ONE_LINE
    assert fake_slack.invalid_views == []


async def test_allowed_teams_lets_a_connected_workspace_in(fake_slack: FakeSlack, make_app, empty_runtime,
                                                          serve_http) -> None:
    app = make_app(empty_runtime, settings=SlackSettings(allowed_teams=[TEAM_ID, OTHER]))
    http = await serve_http(app)
    await http.post_event(connect_mention("help"))
    [answer] = await fake_slack.wait_for("chat.postMessage")
    assert "what I can answer" in all_text(answer.body["blocks"])
    assert fake_slack.calls_to("chat.postEphemeral") == []


def test_allowed_teams_takes_workspace_or_org_ids_only() -> None:
    assert SlackSettings(allowed_teams=["T01ABCDEF", "E01ORG"]).allowed_teams == ["T01ABCDEF", "E01ORG"]
    with pytest.raises(ValidationError, match="is not a Slack workspace id"):
        SlackSettings(allowed_teams=["acme.slack.com"])
