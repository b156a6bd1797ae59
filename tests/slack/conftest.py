"""Fixtures for the Slack front end: a fake Slack, the real Bolt app, signed requests, Socket Mode."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import Runtime, runtime
from bot.slack.app import build_app, state_of
from bot.slack.client import retry_handlers
from bot.slack.runtime import SlackRuntime, slack_runtime
from bot.slack.serve import start_http
from config.models import BotConfig, Node, Service, SlackSettings
from tests import netguard

BOT_TOKEN = "xoxb-111-222-SecretBotTokenValue"
APP_TOKEN = "xapp-1-A111-222-SecretAppTokenValue"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
HUMAN = "UHUMAN1"


@pytest.fixture(scope="session", autouse=True)
def network_guard() -> Iterator[None]:
    """No test in this directory may reach an address outside loopback."""
    with netguard.guard():
        yield


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A developer's SLACK_* variables must not leak into the tests; state goes to a temp dir."""
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN_FILE",
                 "SLACK_APP_TOKEN_FILE", "SLACK_SIGNING_SECRET_FILE", "INFERBOT_SLACK_API_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fs = await FakeSlack().start()
    yield fs
    await fs.stop()


@pytest.fixture
async def web_client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.api_url, retry_handlers=retry_handlers())
    yield client
    if client.session is not None:
        await client.session.close()


def closed_port() -> int:
    """A loopback port nobody listens on (connection refused, fast)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable_config(tmp_path: Path) -> BotConfig:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    node = Node(name="gpu-a", host="127.0.0.1", port=closed_port(), user="root", known_hosts=str(known_hosts),
                timeout=2.0)
    return BotConfig(nodes=[node], services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service")])


@pytest.fixture
async def empty_runtime(web_client: AsyncWebClient) -> AsyncIterator[SlackRuntime]:
    """No nodes at all: enough for help, unknown text and the plumbing."""
    async with runtime(BotConfig(), with_store=False) as core:
        yield slack_runtime(core, web_client, jobs=None)


@pytest.fixture
async def unreachable_runtime(tmp_path: Path, web_client: AsyncWebClient) -> AsyncIterator[SlackRuntime]:
    async with runtime(unreachable_config(tmp_path), with_store=False) as core:
        yield slack_runtime(core, web_client, jobs=None)


class AppFactory:
    """Builds real Bolt apps on the fake Slack and cleans them up."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.apps: list[Any] = []

    def __call__(self, rt: Runtime, rate_limit: int = 10, process_before_response: bool = False,
                 settings: SlackSettings | None = None) -> Any:
        """An app on ``rt``: a Slack runtime as it is, or the Slack runtime on a core (no scheduler)."""
        slack = rt if isinstance(rt, SlackRuntime) else slack_runtime(rt, self.client, jobs=None)
        app = build_app(slack, settings or SlackSettings(rate_limit_per_minute=rate_limit),
                        process_before_response=process_before_response, signing_secret=SIGNING_SECRET)
        self.apps.append(app)
        return app

    async def drain(self) -> None:
        for app in self.apps:
            await state_of(app).drain(5.0)


@pytest.fixture
async def make_app(web_client: AsyncWebClient) -> AsyncIterator[AppFactory]:
    factory = AppFactory(web_client)
    yield factory
    await factory.drain()


# -- payloads ---------------------------------------------------------------------------------------------

_counter = iter(range(1, 1_000_000))


def event_body(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    n = next(_counter)
    return {"token": "legacy", "team_id": TEAM_ID, "api_app_id": "A0APP", "type": "event_callback",
            "event_id": event_id or f"Ev{n:08d}", "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
            "event": event}


def mention(text: str, user: str = HUMAN, channel: str = "C0CHAN", ts: str = "1700000000.000100",
            thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
    ev = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER_ID}> {text}", "ts": ts, "channel": channel,
          "event_ts": ts, **extra}
    if thread_ts:
        ev["thread_ts"] = thread_ts
    return ev


def dm(text: str, user: str = HUMAN, channel: str = "D0DM", ts: str = "1700000000.000200",
       thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
    ev = {"type": "message", "channel_type": "im", "user": user, "text": text, "ts": ts, "channel": channel,
          "event_ts": ts, **extra}
    if thread_ts:
        ev["thread_ts"] = thread_ts
    return ev


def command_form(text: str, response_url: str, user: str = HUMAN, channel: str = "C0CHAN") -> dict[str, str]:
    return {"token": "legacy", "team_id": TEAM_ID, "team_domain": "fake", "channel_id": channel,
            "channel_name": "ops", "user_id": user, "user_name": "human", "command": "/inferbot", "text": text,
            "api_app_id": "A0APP", "response_url": response_url, "trigger_id": "1.2.3"}


def block_action(action_id: str, value: str, response_url: str, user: str = HUMAN) -> dict[str, Any]:
    return {"type": "block_actions", "user": {"id": user}, "team": {"id": TEAM_ID}, "api_app_id": "A0APP",
            "channel": {"id": "C0CHAN"}, "container": {"type": "message", "message_ts": "1700000000.000900"},
            "response_url": response_url, "trigger_id": "1.2.3",
            "actions": [{"action_id": action_id, "block_id": "b1", "type": "button", "value": value,
                         "action_ts": "1700000001.000000"}]}


def all_text(blocks: list[dict[str, Any]]) -> str:
    """Every piece of text in a list of block dicts (for "is it in the answer" assertions)."""
    out: list[str] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "text" and isinstance(v, str):
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(blocks)
    return "\n".join(out)


# -- HTTP mode --------------------------------------------------------------------------------------------


def sign(body: str, ts: int | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    base = f"v0:{ts}:{body}".encode()
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": sig}


class HttpApp:
    """The app served by Bolt's real aiohttp adapter on 127.0.0.1."""

    def __init__(self, url: str, session: aiohttp.ClientSession) -> None:
        self.url = url
        self.session = session

    async def post_event(self, body: dict[str, Any], headers: dict[str, str] | None = None,
                         ts: int | None = None, secret: str = SIGNING_SECRET) -> tuple[int, str]:
        raw = json.dumps(body)
        h = {"Content-Type": "application/json", **sign(raw, ts, secret), **(headers or {})}
        async with self.session.post(self.url + "/slack/events", data=raw, headers=h) as r:
            return r.status, await r.text()

    async def post_form(self, form: dict[str, str]) -> tuple[int, str]:
        raw = urlencode(form)
        h = {"Content-Type": "application/x-www-form-urlencoded", **sign(raw)}
        async with self.session.post(self.url + "/slack/events", data=raw, headers=h) as r:
            return r.status, await r.text()

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.url + path) as r:
            return r.status, await r.text()


@pytest.fixture
async def serve_http() -> AsyncIterator[Any]:
    runners: list[Any] = []
    sessions: list[aiohttp.ClientSession] = []

    async def start(app: Any) -> HttpApp:
        runner = await start_http(app, "127.0.0.1", 0)
        runners.append(runner)
        host, port = runner.addresses[0][:2]
        session = aiohttp.ClientSession()
        sessions.append(session)
        return HttpApp(f"http://{host}:{port}", session)

    yield start
    for s in sessions:
        await s.close()
    for r in runners:
        await r.cleanup()


# -- Socket Mode ------------------------------------------------------------------------------------------


@pytest.fixture
async def socket_mode(fake_slack: FakeSlack) -> AsyncIterator[Any]:
    """``await socket_mode(app)`` connects the app to the fake's websocket (through apps.connections.open)."""
    import asyncio

    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handlers: list[Any] = []

    async def connect(app: Any) -> Any:
        handler = AsyncSocketModeHandler(app, APP_TOKEN)
        handlers.append(handler)
        await asyncio.wait_for(handler.connect_async(), 3)
        await fake_slack.wait_connected()
        return handler

    yield connect
    for h in handlers:
        await h.close_async()
