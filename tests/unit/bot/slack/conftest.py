"""The Slack front end's unit tests drive the real Bolt app against the fake Slack of ``tests/slack``: its
fixtures and helpers are those of ``tests/slack/conftest.py`` (one fake, one way of signing requests)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

SLACK_TESTS = Path(__file__).resolve().parents[3] / "slack"
if str(SLACK_TESTS) not in sys.path:
    sys.path.insert(0, str(SLACK_TESTS))

from conftest import (  # noqa: E402  (tests/slack/conftest.py, found through the path above)
    HUMAN,
    clean_env,
    empty_runtime,
    fake_slack,
    make_app,
    network_guard,
    serve_http,
    web_client,
)

from bot.app import runtime  # noqa: E402
from bot.slack.runtime import SlackRuntime, slack_runtime  # noqa: E402
from config.models import BotConfig  # noqa: E402

__all__ = ["clean_env", "empty_runtime", "fake_slack", "make_app", "network_guard", "serve_http", "web_client"]


def kimi_config(tmp_path: Path) -> BotConfig:
    """One service on a node nobody listens on (nothing here asks it), the state in ``tmp_path``, and the
    asker allowed to restart it."""
    return BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.1", "port": 9, "user": "root", "timeout": 2.0}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "state": {"dir": str(tmp_path / "state")}, "watch": {"enabled": False},
        "access": {"restart_users": [HUMAN]},
    })


@pytest.fixture
async def store_runtime(tmp_path: Path, web_client: AsyncWebClient) -> AsyncIterator[SlackRuntime]:
    """The Slack runtime on a SQLite state store, no scheduler."""
    async with runtime(kimi_config(tmp_path)) as core:
        rt = slack_runtime(core, web_client, jobs=None)
        yield rt
        rt.dashboards.close()
