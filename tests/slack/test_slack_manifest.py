"""slack-manifest.yaml lists exactly what the app registers and uses: events, command, actions, scopes."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.slack.app import SCOPES, SLASH_COMMAND, state_of

MANIFEST = Path(__file__).resolve().parents[2] / "slack-manifest.yaml"


def test_manifest_matches_what_the_app_registers(make_app, empty_runtime):
    app = make_app(empty_runtime)
    reg = state_of(app).registered
    m = yaml.safe_load(MANIFEST.read_text())

    # Issue 13 adds the App Home dashboard: the app_home_opened event and the Home tab's two buttons.
    assert set(m["settings"]["event_subscriptions"]["bot_events"]) == reg.events == {
        "app_mention", "message.im", "app_home_opened"}
    commands = m["features"]["slash_commands"]
    assert {c["command"] for c in commands} == reg.commands == {SLASH_COMMAND}
    assert all(c["should_escape"] is False for c in commands)
    # Buttons need interactivity (no scope); it is on exactly when actions are registered.
    assert m["settings"]["interactivity"]["is_enabled"] is bool(reg.actions)
    # restart confirmation buttons, and the Home tab's Refresh and Restart buttons (issue 13)
    # ... and the buttons of a suggestion ("Did you mean `status kimi`?", issue 23)
    assert reg.actions == {"restart_confirm", "restart_cancel", "home_refresh", "home_restart", "suggest_run",
                           "suggest_run_2"}
    scopes = m["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes))
    assert set(scopes) == reg.scopes == set(SCOPES)
    # Every event needs its scope, and the command its scope.
    assert "app_mentions:read" in scopes and "im:history" in scopes and "commands" in scopes
    assert "user" not in m["oauth_config"]["scopes"]  # no user token
    assert m["settings"]["socket_mode_enabled"] is True
    assert m["features"]["bot_user"]["display_name"]
    assert m["features"]["app_home"]["messages_tab_enabled"] is True  # people can DM the bot
    assert m["features"]["app_home"]["messages_tab_read_only_enabled"] is False
    assert m["features"]["app_home"]["home_tab_enabled"] is True  # the fleet dashboard
    assert "im:write" in scopes  # conversations.open: a Home Restart is confirmed in a DM


def test_registered_listeners_are_in_bolt(make_app, empty_runtime):
    """The registry is not just a list we keep: Bolt has one listener per registered event/command/action."""
    app = make_app(empty_runtime)
    reg = state_of(app).registered
    listeners = app._async_listeners
    assert len(listeners) == len(reg.events) + len(reg.commands) + len(reg.actions)
