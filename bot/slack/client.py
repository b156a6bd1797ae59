"""Slack tokens and the Web API client: read from the environment (or ``*_FILE``), held as ``Secret``.

The client carries slack_sdk's own retry handlers (rate limits, 5xx, connection errors). The Web API base
URL is configurable (tests point it at the fake Slack; GovSlack has its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from config.local_file import LocalFileError, read_secret_file
from config.models import SlackSettings
from services.redact import Secret

TOKEN_HELP = {
    "SLACK_BOT_TOKEN": "install the app to your workspace and copy the Bot User OAuth Token (xoxb-…) "
    "from OAuth & Permissions",
    "SLACK_APP_TOKEN": "create an app-level token with connections:write under Basic Information → "
    "App-Level Tokens (xapp-…)",
    "SLACK_SIGNING_SECRET": "copy the Signing Secret from Basic Information → App Credentials",
}
_TOKEN_PREFIX = {"SLACK_BOT_TOKEN": "xoxb-", "SLACK_APP_TOKEN": "xapp-"}


class MissingToken(Exception):
    """A token is missing or malformed; the message is one line saying how to get it."""


@dataclass(frozen=True)
class Tokens:
    """The secrets ``serve`` needs, held as ``Secret`` so they never print."""

    bot: Secret
    app: Secret | None = None
    signing: Secret | None = None


def read_secret(name: str, env: Mapping[str, str] | None = None) -> Secret | None:
    """``$NAME``, else the contents of the file named by ``$NAME_FILE`` (container secrets), else None."""
    env = os.environ if env is None else env
    value = env.get(name, "").strip()
    if value:
        return Secret(value)
    path = env.get(f"{name}_FILE", "").strip()
    if path:
        try:
            value = read_secret_file(path)
        except LocalFileError as e:  # a FIFO or /dev/zero is refused, not waited on or read without end
            raise MissingToken(f"{name}_FILE={path}: {e} — point it at the file holding the token") from None
        if value:
            return Secret(value)
        raise MissingToken(f"{name}_FILE={path} is empty: put the token in it ({TOKEN_HELP[name]})")
    return None


def require_token(name: str, env: Mapping[str, str] | None) -> Secret:
    s = read_secret(name, env)
    if s is None:
        raise MissingToken(f"{name} is not set: {TOKEN_HELP[name]} (or set {name}_FILE to a file holding it)")
    prefix = _TOKEN_PREFIX.get(name)
    if prefix and not s.reveal().startswith(prefix):
        raise MissingToken(f"{name} does not look like a {prefix}… token: {TOKEN_HELP[name]}")
    return s


def load_tokens(http: bool, env: Mapping[str, str] | None = None) -> Tokens:
    """The tokens for the chosen mode, from the environment only; ``MissingToken`` names the first missing."""
    bot = require_token("SLACK_BOT_TOKEN", env)
    if http:
        return Tokens(bot=bot, signing=require_token("SLACK_SIGNING_SECRET", env))
    return Tokens(bot=bot, app=require_token("SLACK_APP_TOKEN", env))


def api_base_url(settings: SlackSettings, env: Mapping[str, str] | None = None) -> str:
    """The Web API base URL: ``$INFERBOT_SLACK_API_URL``, else ``[slack] api_url``; always ends in ``/``."""
    env = os.environ if env is None else env
    url = env.get("INFERBOT_SLACK_API_URL", "").strip() or settings.api_url
    return url if url.endswith("/") else url + "/"


def retry_handlers() -> list[AsyncRetryHandler]:
    """slack_sdk's retry handlers: rate limits (honours Retry-After), connection errors, 500/503."""
    return [
        AsyncRateLimitErrorRetryHandler(max_retry_count=2),
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
    ]


WEB_API_TIMEOUT_S = 30  # slack_sdk's own default, for every call


def make_client(token: Secret, base_url: str) -> AsyncWebClient:
    """The Web API client every call goes through (Socket Mode's ``apps.connections.open`` included).

    Made in the running event loop (``inferbot serve``), it keeps one HTTP session for all its calls: without
    one, slack_sdk opens a session — a new TCP and TLS connection — for each call, and an answer is many
    ``chat.postMessage`` calls. Whoever made the client closes ``client.session`` when done (``serve`` does).
    """
    session = None
    with contextlib.suppress(RuntimeError):  # no running loop: a session per call, as slack_sdk does alone
        asyncio.get_running_loop()
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WEB_API_TIMEOUT_S))
    return AsyncWebClient(token=token.reveal(), base_url=base_url, retry_handlers=retry_handlers(),
                          logger=logging.getLogger("slack_sdk.web.async_client"), session=session,
                          timeout=WEB_API_TIMEOUT_S)
