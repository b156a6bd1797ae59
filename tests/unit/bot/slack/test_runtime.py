"""bot/slack/runtime.py: the Slack runtime, built once on the core, complete and frozen; the app and its
listeners run on that one object."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from conftest import event_body, mention
from fake_slack import FakeSlack
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import runtime
from bot.slack.app import build_app, state_of
from bot.slack.groups import SlackGroups
from bot.slack.home import HomePublisher
from bot.slack.poster import Poster
from bot.slack.runtime import SlackRuntime, slack_runtime
from config.models import BotConfig, SlackSettings
from handlers.context import Asker
from handlers.notify import RecordingNotifier


class Jobs:
    def follow(self, key: str) -> None: ...
    def stop_follow(self, key: str) -> None: ...
    def expire(self, request_id: Any, at: Any) -> None: ...


async def test_every_port_is_slacks_and_handlers_get_them_all(web_client: AsyncWebClient, tmp_path: Path) -> None:
    jobs = Jobs()
    async with runtime(BotConfig.model_validate({"state": {"dir": str(tmp_path)}})) as core:
        rt = slack_runtime(core, web_client, jobs=jobs)
        assert isinstance(rt.notifier, Poster) and rt.notifier.client is web_client
        assert isinstance(rt.groups, SlackGroups) and rt.groups.client is web_client
        assert isinstance(rt.dashboards, HomePublisher) and rt.dashboards.poster is rt.notifier
        assert rt.jobs is jobs and (rt.config, rt.pool, rt.cluster, rt.store) == (core.config, core.pool,
                                                                                  core.cluster, core.store)
        ctx = rt.context(Asker(surface="slack", user_id="U1"))
        assert (ctx.notifier, ctx.jobs, ctx.groups, ctx.dashboards, ctx.store) == (rt.notifier, jobs, rt.groups,
                                                                                   rt.dashboards, core.store)
        # The Home tab reads with the core and the group lookup: it posts nothing, schedules nothing, and
        # needs no way back to this runtime.
        reader = rt.dashboards.runtime
        assert (reader.notifier, reader.jobs, reader.dashboards) == (None, None, None)
        assert reader.groups is rt.groups and reader.store is core.store


async def test_it_is_frozen_and_built_only_on_a_core(web_client: AsyncWebClient, empty_runtime: SlackRuntime) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        empty_runtime.notifier = Poster(web_client)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        empty_runtime.jobs = Jobs()  # type: ignore[misc]
    with pytest.raises(ValueError, match="core runtime"):
        slack_runtime(empty_runtime, web_client, jobs=None)  # a runtime that has ports already
    with pytest.raises(ValueError, match="core runtime"):
        slack_runtime(empty_runtime.with_ports(notifier=RecordingNotifier()), web_client, jobs=None)


async def test_the_app_runs_on_the_runtime_it_was_given(fake_slack: FakeSlack, empty_runtime: SlackRuntime,
                                                        serve_http: Any) -> None:
    app = build_app(empty_runtime, SlackSettings(), signing_secret="s3cret")
    bot = state_of(app)
    assert bot.runtime is empty_runtime and bot.poster is empty_runtime.notifier
    assert app.client is empty_runtime.notifier.client  # Bolt's own calls (auth.test) and the Poster's: one client
    http = await serve_http(app)
    assert (await http.post_event(event_body(mention("help")), secret="s3cret"))[0] == 200
    [answer] = await fake_slack.wait_for("chat.postMessage")
    await bot.drain(3)
    assert answer.headers["authorization"] == f"Bearer {empty_runtime.notifier.client.token}"
