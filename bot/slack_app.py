"""The Slack front end: a Bolt ``AsyncApp`` (Socket Mode by default, or the Events API over HTTP).

Every question — an app mention, a DM or ``/inferbot …`` — takes the same path as in the terminal:
``bot.dispatch.answer(text, runtime.context(asker))`` → ``Reply`` → ``bot.render_slack`` → posted in the
thread. Slack is acknowledged first; the SSH work runs afterwards in a task the bot keeps track of.

Public API:
  ``build_app(runtime, settings, client=None, process_before_response=False, *, signing_secret=None)``
  ``serve(config, http, host, port) -> int``           (``inferbot serve``)
  ``on_restart_action(action, body, client, runtime, respond)`` — the seam for the restart buttons
  ``load_tokens(http)``, ``api_base_url(settings)``, ``make_client(token, base_url)``, ``state_of(app)``
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import math
import os
import re
import signal
import sys
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.app import Runtime, runtime
from bot.dispatch import answer
from bot.render_slack import SlackMessage, attachment_sections, render_messages
from config.models import BotConfig, SlackSettings
from handlers.context import Asker
from handlers.reply import Attachment, Reply
from services.redact import Secret

log = logging.getLogger("inferbot.slack")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

SLASH_COMMAND = "/inferbot"
RESTART_ACTIONS = ("restart_confirm", "restart_cancel")
ACK_TEXT = "Looking… :hourglass:"
# Bolt's own loggers: one base logger whose level every Bolt logger copies (Bolt would otherwise give each
# of its loggers the root level, and its request-verification middleware logs the request body at INFO).
BOLT_LOGGER = "inferbot.bolt"

# Scopes, and why. The manifest test checks slack-manifest.yaml against these and the registered listeners.
SCOPES: dict[str, str] = {
    "app_mentions:read": "the app_mention event",
    "im:history": "the message.im event (DMs)",
    "chat:write": "chat.postMessage: every answer",
    "commands": "the /inferbot slash command",
    "files:write": "files.uploadV2: long output (logs) as a file in the thread",
    "usergroups:read": "usergroups.users.list: restart permission by user group (restart issue)",
    "im:write": "conversations.open: a Home-tab Restart is confirmed in a DM with the person",
}

_TOKEN_HELP = {
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
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise MissingToken(f"{name}_FILE={path}: cannot read it ({e.strerror})") from None
        if value:
            return Secret(value)
        raise MissingToken(f"{name}_FILE={path} is empty: put the token in it ({_TOKEN_HELP[name]})")
    return None


def _require(name: str, env: Mapping[str, str] | None) -> Secret:
    s = read_secret(name, env)
    if s is None:
        raise MissingToken(f"{name} is not set: {_TOKEN_HELP[name]} (or set {name}_FILE to a file holding it)")
    prefix = _TOKEN_PREFIX.get(name)
    if prefix and not s.reveal().startswith(prefix):
        raise MissingToken(f"{name} does not look like a {prefix}… token: {_TOKEN_HELP[name]}")
    return s


def load_tokens(http: bool, env: Mapping[str, str] | None = None) -> Tokens:
    """The tokens for the chosen mode, from the environment only; ``MissingToken`` names the first missing."""
    bot = _require("SLACK_BOT_TOKEN", env)
    if http:
        return Tokens(bot=bot, signing=_require("SLACK_SIGNING_SECRET", env))
    return Tokens(bot=bot, app=_require("SLACK_APP_TOKEN", env))


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


def make_client(token: Secret, base_url: str) -> AsyncWebClient:
    """The Web API client every call goes through (Socket Mode's ``apps.connections.open`` included)."""
    return AsyncWebClient(token=token.reveal(), base_url=base_url, retry_handlers=retry_handlers(),
                          logger=logging.getLogger("slack_sdk.web.async_client"))


# --------------------------------------------------------------------------------------------------------
# The restart-button seam


async def on_restart_action(
    action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, runtime: Runtime,
    respond: Callable[..., Awaitable[Any]],
) -> None:
    """Handle a ``restart_confirm`` / ``restart_cancel`` button press (already acknowledged).

    The restart issue replaces this function (or assigns ``bot.slack_app.on_restart_action``); the listeners
    look it up at call time. ``action`` is the pressed button (``action_id``, ``value``), ``body`` the whole
    ``block_actions`` payload, ``respond`` posts to its ``response_url``.
    """
    from bot.restart_slack import handle_restart_action

    await handle_restart_action(action, body, client, runtime, respond)


# --------------------------------------------------------------------------------------------------------
# Dedupe and rate limit


class TtlSet:
    """Remembers keys for ``ttl`` seconds (at most ``size`` of them): same event id twice → one answer."""

    def __init__(self, ttl: float = 600.0, size: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def add(self, key: str) -> bool:
        """Record ``key``; False if it was already seen within the TTL."""
        now = self.clock()
        while self._seen and (next(iter(self._seen.values())) < now - self.ttl or len(self._seen) > self.size):
            self._seen.popitem(last=False)
        if key in self._seen:
            return False
        self._seen[key] = now
        return True


@dataclass
class Verdict:
    allowed: bool
    retry_in: int = 0
    notify: bool = False  # over the limit and not yet told so in this window


class RateLimiter:
    """At most ``per_minute`` answers per user in any 60 s; the first refusal in a window is answered."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute, self.clock = per_minute, clock
        self._hits: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}

    def check(self, user: str) -> Verdict:
        now = self.clock()
        hits = self._hits.setdefault(user, deque())
        while hits and hits[0] <= now - 60.0:
            hits.popleft()
        if len(hits) < self.per_minute:
            hits.append(now)
            self._told.pop(user, None)
            return Verdict(True)
        retry_in = max(1, math.ceil(hits[0] + 60.0 - now))
        told = self._told.get(user)
        notify = told is None or told <= now - 60.0
        if notify:
            self._told[user] = now
        return Verdict(False, retry_in, notify)


def rate_limit_text(retry_in: int) -> str:
    return f"You're asking faster than I can SSH — try again in {retry_in} s. :hourglass_flowing_sand:"


# --------------------------------------------------------------------------------------------------------
# The bot


_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")
_ALLOWED_SUBTYPES = {None, "file_share", "thread_broadcast"}


def clean_text(text: str, bot_user_id: str | None) -> str:
    """The question as the person typed it: our own mention removed, Slack's link markup and entities undone."""
    def mention(m: re.Match[str]) -> str:
        return "" if m.group(1) == bot_user_id else m.group(0)

    def link(m: re.Match[str]) -> str:
        target, label = m.group(1), m.group(2)
        if target.startswith("#"):  # <#C123|general>
            return "#" + label if label else target
        if target.startswith("!"):  # <!here>
            return "@" + target[1:].split("^")[0]
        return label or target

    text = _MENTION.sub(mention, text or "")
    text = _LINK.sub(link, text)
    return " ".join(html.unescape(text).split())


@dataclass
class Registered:
    """What the app listens to, in manifest terms (the manifest test compares the two)."""

    events: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)
    actions: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=lambda: set(SCOPES))


class SlackBot:
    """The state behind one ``AsyncApp``: the runtime, dedupe, rate limit and the answers in flight.

    With a state store, de-duplication and the rate limit live in the database (``services.store.shared_state``),
    so two replicas answer an event once and count a person's questions together; without one (tests,
    plumbing) they are this process's memory.
    """

    def __init__(self, rt: Runtime, settings: SlackSettings) -> None:
        self.runtime = rt
        self.settings = settings
        self.seen = TtlSet()
        self.limiter = RateLimiter(settings.rate_limit_per_minute)
        self.tasks: set[asyncio.Task[None]] = set()
        self.registered = Registered()
        self.role: Callable[[], str | None] = lambda: None  # "leader" / "standby" once serving

    async def first_delivery(self, event_id: str) -> bool:
        """True for the first delivery of ``event_id`` to any replica."""
        if self.runtime.store is None:
            return self.seen.add(event_id)
        from services.store.shared_state import claim_event

        return await claim_event(self.runtime.store, event_id, datetime.now(UTC))

    async def check_rate(self, user: str) -> Verdict:
        """The rate-limit verdict for one more answer to ``user`` (counted over every replica)."""
        if self.runtime.store is None:
            return self.limiter.check(user)
        from services.store.shared_state import rate_check

        v = await rate_check(self.runtime.store, user, self.settings.rate_limit_per_minute)
        return Verdict(v.allowed, v.retry_in, v.notify)

    # -- tasks
    def spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``coro`` after the ack; failures are logged, never raised into Bolt."""
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("slack %s failed", what, extra={"event": "slack-task", "what": what})

        task = asyncio.get_running_loop().create_task(guarded())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def drain(self, within: float = 10.0) -> None:
        """Wait (at most ``within`` seconds) for the answers in flight (shutdown, tests)."""
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=within)

    # -- answering
    async def answer_and_post(
        self, *, kind: str, text: str, user: str, channel: str, thread_ts: str | None,
        client: AsyncWebClient, response_url: str | None = None,
    ) -> None:
        started = time.monotonic()
        asker = Asker(surface="slack", user_id=user, channel_id=channel, thread_ts=thread_ts)
        reply = await answer(text, self.runtime.context(asker))
        from bot.restart_slack import is_confirmation, post_confirmation

        if is_confirmation(reply) and await post_confirmation(self.runtime, client, channel, thread_ts, reply):
            # A restart confirmation: posted visibly by the restart wiring, which remembers its ts.
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "intent": reply.intent, "ms": int((time.monotonic() - started) * 1000),
                                            "outcome": "posted"})
            return
        messages = render_messages(reply, attachments=False)
        if response_url:
            ok = await self.respond_messages(response_url, messages, client=client, channel=channel)
        else:
            ok = await self.post_messages(client, channel, thread_ts, messages)
        if ok and reply.attachments:
            ok = await self.upload(client, channel, thread_ts, reply, response_url)
        if ok and reply.chart is not None:
            from bot.chart_slack import upload_chart

            ok = await upload_chart(client, channel, thread_ts, reply)
        log.info("slack answer", extra={
            "event": "slack", "kind": kind, "user": user, "channel": channel, "intent": reply.intent,
            "messages": len(messages), "ms": int((time.monotonic() - started) * 1000),
            "outcome": "posted" if ok else "post-failed",
        })

    async def post_messages(self, client: AsyncWebClient, channel: str, thread_ts: str | None,
                            messages: list[SlackMessage]) -> bool:
        """``chat.postMessage`` each message in order; stop (and log why) at the first that fails."""
        for i, m in enumerate(messages):
            if not await self._post_one(client, channel, thread_ts, m, part=i + 1, parts=len(messages)):
                return False
        return True

    async def _post_one(self, client: AsyncWebClient, channel: str, thread_ts: str | None, m: SlackMessage,
                        part: int, parts: int) -> bool:
        try:
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, blocks=m.blocks, text=m.text,
                                          unfurl_links=False, unfurl_media=False)
            return True
        except SlackApiError as e:
            reason = str(e.response.get("error") or e.response.status_code)
            if reason in ("invalid_blocks", "msg_blocks_too_long", "invalid_blocks_format"):
                log.warning("Slack refused the blocks; posting the plain text instead",
                            extra={"event": "slack-post", "channel": channel, "reason": reason, "part": part})
                try:
                    await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=m.text,
                                                  unfurl_links=False, unfurl_media=False)
                    return True
                except SlackApiError as e2:
                    reason = str(e2.response.get("error") or e2.response.status_code)
                except (TimeoutError, SlackClientError, OSError) as e2:
                    reason = type(e2).__name__
        except (TimeoutError, SlackClientError, OSError) as e:
            reason = f"{type(e).__name__}: {e}" if isinstance(e, OSError) else type(e).__name__
        log.warning("could not post the answer", extra={
            "event": "slack-post", "channel": channel, "reason": reason, "part": part, "parts": parts})
        return False

    async def respond_messages(self, response_url: str, messages: list[SlackMessage], *,
                               client: AsyncWebClient, channel: str) -> bool:
        """Post to a slash command's ``response_url`` (Slack allows 5 posts per URL; the rest go by
        ``chat.postMessage``, which needs the bot in the channel — logged if it is not)."""
        hook = AsyncWebhookClient(url=response_url, retry_handlers=retry_handlers())
        for i, m in enumerate(messages):
            if i >= 5:
                return await self.post_messages(client, channel, None, messages[i:])
            try:
                resp = await hook.send(text=m.text, blocks=m.blocks, response_type="in_channel",
                                       replace_original=False)
                status: int | str = resp.status_code
            except (TimeoutError, SlackClientError, OSError) as e:
                status = type(e).__name__
            if status != 200:
                log.warning("could not post the answer to the response_url",
                            extra={"event": "slack-post", "channel": channel, "reason": str(status),
                                   "part": i + 1, "parts": len(messages)})
                return False
        return True

    async def upload(self, client: AsyncWebClient, channel: str, thread_ts: str | None, reply: Reply,
                     response_url: str | None) -> bool:
        """Attachments as files in the thread; if the upload fails, as further messages."""
        ok = True
        for att in reply.attachments:
            try:
                await client.files_upload_v2(channel=channel, thread_ts=thread_ts, content=att.content,
                                             filename=att.filename, title=att.title)
                continue
            except (TimeoutError, SlackApiError, SlackClientError, OSError) as e:
                reason = str(e.response.get("error")) if isinstance(e, SlackApiError) else type(e).__name__
                log.warning("file upload failed; posting it as messages",
                            extra={"event": "slack-upload", "channel": channel, "reason": reason})
            msgs = _attachment_messages(reply, att)
            if response_url:
                ok = await self.respond_messages(response_url, msgs, client=client, channel=channel) and ok
            else:
                ok = await self.post_messages(client, channel, thread_ts, msgs) and ok
        return ok

    async def refuse(self, *, kind: str, user: str, channel: str, thread_ts: str | None, retry_in: int,
                     client: AsyncWebClient) -> None:
        try:
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=rate_limit_text(retry_in))
        except (TimeoutError, SlackClientError, OSError) as e:
            log.warning("could not post the rate-limit notice",
                        extra={"event": "slack-post", "channel": channel, "reason": type(e).__name__})
        log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                        "outcome": "rate-limited"})

    # -- one question from an event
    async def on_question(self, *, kind: str, text: str, user: str, channel: str, thread_ts: str | None,
                          client: AsyncWebClient) -> None:
        verdict = await self.check_rate(user)
        if verdict.allowed:
            self.spawn(self.answer_and_post(kind=kind, text=text, user=user, channel=channel,
                                            thread_ts=thread_ts, client=client), kind)
        elif verdict.notify:
            self.spawn(self.refuse(kind=kind, user=user, channel=channel, thread_ts=thread_ts,
                                   retry_in=verdict.retry_in, client=client), kind)
        else:
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "outcome": "rate-limited-silent"})


def _attachment_messages(reply: Reply, att: Attachment) -> list[SlackMessage]:
    return render_messages(Reply(intent=reply.intent, title=att.title or att.filename, status=reply.status,
                                 sections=attachment_sections(att)))


_BOTS: weakref.WeakKeyDictionary[AsyncApp, SlackBot] = weakref.WeakKeyDictionary()


def state_of(app: AsyncApp) -> SlackBot:
    """The ``SlackBot`` behind an app made by ``build_app``."""
    return _BOTS[app]


def _retry_num(req: AsyncBoltRequest) -> int:
    values = req.headers.get("x-slack-retry-num") or []
    value = values[0] if values else None
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _ignored_reason(body: dict[str, Any], req: AsyncBoltRequest, context: AsyncBoltContext,
                    bot: SlackBot) -> str | None:
    """Why an Events API delivery gets no answer, or None to answer it."""
    if body.get("type") != "event_callback":
        return None
    # Socket Mode's first delivery carries retry_attempt 0 (header "0"); only > 0 is a redelivery.
    if _retry_num(req) > 0:
        return "retry"
    event = body.get("event") or {}
    if event.get("bot_id") or event.get("subtype") not in _ALLOWED_SUBTYPES:
        return "bot-or-subtype"
    if context.bot_user_id and event.get("user") == context.bot_user_id:
        return "self"
    if not event.get("user"):
        return "no-user"
    if event.get("type") == "message" and event.get("channel_type") != "im":
        return "not-a-dm"
    return None


def build_app(
    rt: Runtime,
    settings: SlackSettings,
    client: AsyncWebClient | None = None,
    process_before_response: bool = False,
    *,
    signing_secret: Secret | str | None = None,
) -> AsyncApp:
    """The Bolt app with every listener registered; tokens come from the environment unless ``client`` is given."""
    if client is None:
        client = make_client(_require("SLACK_BOT_TOKEN", None), api_base_url(settings))
    secret = signing_secret.reveal() if isinstance(signing_secret, Secret) else signing_secret
    bolt_logger = logging.getLogger(BOLT_LOGGER)
    # Bolt logs request bodies (message texts) at INFO on a bad signature: keep it at WARNING unless debugging.
    bolt_logger.setLevel(logging.DEBUG if logging.getLogger().level == logging.DEBUG else logging.WARNING)
    app = AsyncApp(
        client=client,
        signing_secret=secret or "",
        request_verification_enabled=bool(secret),  # Socket Mode needs none; HTTP mode always has one
        process_before_response=process_before_response,
        logger=bolt_logger,
        # Bolt names its app loggers after ``name`` and gives them the base logger's level: keep them under
        # inferbot.bolt, or it would silence our own "inferbot" loggers.
        name=BOLT_LOGGER,
    )
    bot = SlackBot(rt, settings)
    _BOTS[app] = bot
    from bot.restart_slack import ensure_slack_services

    ensure_slack_services(rt, client)  # restart issue: notices and user-group lookups through this client
    reg = bot.registered

    @app.middleware
    async def ignore_noise(req: AsyncBoltRequest, body: dict[str, Any], context: AsyncBoltContext,
                           next_: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        reason = _ignored_reason(body, req, context, bot)
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if reason is None and event_id and not await bot.first_delivery(str(event_id)):
            reason = "duplicate"  # another replica (or an earlier delivery) took it
        if reason is None:
            await next_()
            return None
        event = body.get("event") or {}
        log.debug("slack event ignored", extra={"event": "slack-ignored", "reason": reason,
                                                 "type": event.get("type"), "user": event.get("user")})
        if reason in ("retry", "duplicate"):
            log.info("slack event ignored", extra={"event": "slack-ignored", "reason": reason,
                                                   "user": event.get("user"), "event_id": body.get("event_id")})
        ack: AsyncAck = context.ack
        return await ack()

    async def on_mention(event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await bot.on_question(kind="mention", text=clean_text(event.get("text", ""), context.bot_user_id),
                        user=event["user"], channel=event["channel"],
                        thread_ts=event.get("thread_ts") or event.get("ts"), client=client)

    async def on_dm(event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient) -> None:
        await bot.on_question(kind="dm", text=clean_text(event.get("text", ""), context.bot_user_id),
                        user=event["user"], channel=event["channel"], thread_ts=event.get("thread_ts"),
                        client=client)

    async def on_command(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        user, channel = command.get("user_id", ""), command.get("channel_id", "")
        verdict = await bot.check_rate(user)
        if not verdict.allowed:
            await ack(text=rate_limit_text(verdict.retry_in), response_type="ephemeral")
            log.info("slack answer", extra={"event": "slack", "kind": "command", "user": user,
                                            "channel": channel, "outcome": "rate-limited"})
            return
        await ack(text=ACK_TEXT, response_type="ephemeral")
        bot.spawn(bot.answer_and_post(kind="command", text=clean_text(command.get("text", ""), None), user=user,
                                      channel=channel, thread_ts=None, client=client,
                                      response_url=command.get("response_url")), "command")

    async def on_restart(ack: AsyncAck, action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient,
                         respond: AsyncRespond) -> None:
        await ack()
        log.info("slack action", extra={"event": "slack-action", "action": action.get("action_id"),
                                        "user": (body.get("user") or {}).get("id")})
        # A module global, looked up at call time: the restart issue can replace the hook.
        bot.spawn(on_restart_action(action=action, body=body, client=client, runtime=bot.runtime, respond=respond),
                  "action")

    async def on_error(error: Exception, body: dict[str, Any]) -> None:
        # No body: it holds message texts.
        log.error("slack listener error: %s", type(error).__name__, exc_info=error,
                  extra={"event": "slack-error", "type": body.get("type") if isinstance(body, dict) else None})

    app.event("app_mention")(on_mention)
    reg.events.add("app_mention")
    app.event("message")(on_dm)
    reg.events.add("message.im")
    app.command(SLASH_COMMAND)(on_command)
    reg.commands.add(SLASH_COMMAND)
    for action_id in RESTART_ACTIONS:
        app.action(action_id)(on_restart)
        reg.actions.add(action_id)
    from bot.home_slack import register_home

    register_home(app, bot)  # the App Home dashboard: app_home_opened, home_refresh, home_restart
    app.error(on_error)
    return app


# --------------------------------------------------------------------------------------------------------
# Running it


def _heartbeat_path(config: BotConfig) -> Path:
    return config.state.directory() / "heartbeat"


def _touch(path: Path, role: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{time.time():.0f}{' ' + role if role else ''}\n", encoding="utf-8")


async def _heartbeat(path: Path, alive: Callable[[], Awaitable[bool]], every: float = 30.0,
                     role: Callable[[], str | None] = lambda: None) -> None:
    """Touch ``path`` while the app is connected/serving (the Docker HEALTHCHECK reads its age); the line
    says ``leader`` or ``standby``."""
    while True:
        try:
            if await alive():
                await asyncio.to_thread(_touch, path, role())
        except OSError as e:
            log.debug("heartbeat not written", extra={"reason": e.strerror})
        await asyncio.sleep(every)


async def health(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def http_app(app: AsyncApp) -> web.Application:
    """Bolt's aiohttp app on ``/slack/events`` (events, commands, interactivity) plus ``GET /healthz``
    (``ok``; ``ok leader`` / ``ok standby`` once the scheduler campaigns, also in ``X-Inferbot-Role``)."""
    web_app: web.Application = app.web_app(path="/slack/events")
    bot = _BOTS.get(app)

    async def health_role(request: web.Request) -> web.Response:
        role = bot.role() if bot is not None else None
        if role is None:
            return await health(request)
        return web.Response(text=f"ok {role}", headers={"X-Inferbot-Role": role})

    web_app.router.add_get("/healthz", health_role)
    return web_app


async def start_http(app: AsyncApp, host: str, port: int) -> web.AppRunner:
    """Serve the app over HTTP; the caller cleans up the returned runner."""
    runner = web.AppRunner(http_app(app), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def _check_auth(client: AsyncWebClient, app_token: Secret | None) -> str | None:
    """One line if a token is refused by Slack, else None (catches typos before Socket Mode loops forever)."""
    try:
        await client.auth_test()
    except SlackApiError as e:
        return f"SLACK_BOT_TOKEN was refused by Slack ({e.response.get('error')}): {_TOKEN_HELP['SLACK_BOT_TOKEN']}"
    if app_token is not None:
        try:
            await client.apps_connections_open(app_token=app_token.reveal())
        except SlackApiError as e:
            return (f"SLACK_APP_TOKEN was refused by Slack ({e.response.get('error')}): "
                    f"{_TOKEN_HELP['SLACK_APP_TOKEN']}")
    return None


async def serve(config: BotConfig, http: bool, host: str, port: int, *,
                stop: asyncio.Event | None = None) -> int:
    """Run the bot until SIGINT/SIGTERM (or ``stop``): Socket Mode by default, the Events API with ``http``."""
    try:
        tokens = load_tokens(http)
    except MissingToken as e:
        print(f"inferbot: {e}", file=sys.stderr)
        return EXIT_USAGE
    base_url = api_base_url(config.slack)
    client = make_client(tokens.bot, base_url)
    try:
        problem = await _check_auth(client, tokens.app)
    except (TimeoutError, SlackClientError, OSError) as e:
        problem = f"cannot reach the Slack Web API at {base_url} ({type(e).__name__})"
    if problem:
        print(f"inferbot: {problem}", file=sys.stderr)
        return EXIT_USAGE
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            signals.append(sig)
    try:
        return await _serve(config, http, host, port, tokens, client, stop)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        if client.session is not None:
            await client.session.close()


async def _serve(config: BotConfig, http: bool, host: str, port: int, tokens: Tokens, client: AsyncWebClient,
                 stop: asyncio.Event) -> int:
    async with runtime(config) as rt:
        from bot.replicas import open_leadership

        leadership = await open_leadership(rt)  # the schema is checked/upgraded here: one line if it can't be
        if isinstance(leadership, str):
            print(f"inferbot: {leadership}", file=sys.stderr)
            return EXIT_USAGE
        app = build_app(rt, config.slack, client=client, signing_secret=tokens.signing)
        bot = state_of(app)
        bot.role = lambda: leadership.role
        cleanup: Callable[[], Awaitable[None]]
        alive: Callable[[], Awaitable[bool]]
        if http:
            try:
                runner = await start_http(app, host, port)
            except OSError as e:
                print(f"inferbot: cannot listen on {host}:{port} ({e.strerror})", file=sys.stderr)
                return EXIT_FAILURE
            cleanup = runner.cleanup

            async def alive_http() -> bool:
                return True

            alive = alive_http
            log.info("serving", extra={"event": "serve", "mode": "http", "host": host, "port": port})
        else:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            assert tokens.app is not None
            handler = AsyncSocketModeHandler(app, tokens.app.reveal())  # needs the running loop
            try:
                await asyncio.wait_for(handler.connect_async(), 30)  # type: ignore[no-untyped-call]
            except TimeoutError:
                await handler.close_async()  # type: ignore[no-untyped-call]
                print("inferbot: could not open the Socket Mode connection within 30 s", file=sys.stderr)
                return EXIT_FAILURE
            cleanup = handler.close_async
            alive = handler.client.is_connected
            log.info("serving", extra={"event": "serve", "mode": "socket"})
        beat = asyncio.create_task(_heartbeat(_heartbeat_path(config), alive, role=bot.role))
        from bot.notifier_slack import SlackNotifier
        from bot.scheduler import BotScheduler

        # Restart issue: follow loads, watch for unplanned restarts, expire requests (jobs in the state DB).
        scheduler = BotScheduler(rt, rt.notifier or SlackNotifier(client))
        await scheduler.start(leadership=leadership)
        try:
            await stop.wait()
        finally:
            beat.cancel()
            await scheduler.shutdown()
            from bot.home_slack import HomePublisher

            if isinstance(rt.dashboards, HomePublisher):
                rt.dashboards.close()  # the App Home republisher's pending rounds (its state is in the store)
            await cleanup()
            await bot.drain()
    return EXIT_OK
