"""The Slack front end: a Bolt ``AsyncApp`` (Socket Mode by default, or the Events API over HTTP).

Every question — an app mention, a DM or ``/inferbot …`` — takes the same path as in the terminal:
``bot.dispatch.answer(text, runtime.context(asker))`` → ``Reply`` → ``bot.slack.blocks`` → posted in the
thread through the runtime's ``Poster``. Slack is acknowledged first; the SSH work runs afterwards in a
task the bot keeps track of.

The package, one concern per module:
  ``client``           tokens and the Web API client (with slack_sdk's retry handlers)
  ``runtime``          ``SlackRuntime``: the core runtime with Slack's ports, built once and frozen
  ``poster``           the one way anything reaches Slack (answers, notices, charts, refusals, the Home tab)
  ``blocks``           Block Kit rendering of a ``Reply``
  ``guards``           bots, edits, other workspaces, rate limits (never the store): the middleware
  ``manifest``         registering a listener records what slack-manifest.yaml needs for it
  ``listeners/``       one module per thing people do, each with ``register(app, bot)``
  ``restart_actions``  posting a confirmation, and what its buttons run
  ``groups``           user groups for the restart permission
  ``home``, ``home_view``, ``charts``  the App Home tab, its view, chart uploads
  ``app``              this module: ``SlackBot`` (the state behind one app: event claims after the ack,
                       rate limits, the question path) and ``build_app``
  ``serve``            Socket Mode / HTTP, heartbeat, scheduler (``inferbot serve``)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.response import BoltResponse

from bot.dispatch import answer
from bot.slack import guards, restart_actions
from bot.slack.blocks import SlackMessage, escape, failure_message, render_failure
from bot.slack.charts import upload_chart
from bot.slack.groups import SlackGroups
from bot.slack.guards import RateLimiter, TtlSet, Verdict, rate_limit_text
from bot.slack.home_view import line_view
from bot.slack.listeners import SCOPES as LISTENER_SCOPES
from bot.slack.listeners import register_listeners
from bot.slack.listeners.command import SLASH_COMMAND
from bot.slack.manifest import Manifest, Registrar
from bot.slack.poster import SLACK_ERRORS, Poster, Where
from bot.slack.render_memo import RenderMemo
from bot.slack.restart_actions import RestartAction
from bot.slack.runtime import SlackRuntime
from bot.understanding.markup import Message
from config.models import SlackSettings
from handlers.context import Asker
from handlers.reply import Reply
from services.redact import Secret

log = logging.getLogger("inferbot.slack")

__all__ = ["SCOPES", "SLASH_COMMAND", "SlackBot", "bot_of", "build_app", "state_of"]

CLAIM_PATIENCE_S = 120.0
"""How long an event's answer waits for its de-duplication claim while the state store does not answer
(a SQLite file locked by another process, PostgreSQL out of reach). The ack never waits for it."""
UNCLAIMED_TEXT = ("Sorry — I could not take this question: my state database did not answer for {minutes} min "
                  "(the cause is in my log). Please ask again.")
OTHER_WORKSPACE_TEXT = "Sorry — inferbot answers only people of the workspace it is installed in."
# Bolt's own loggers: one base logger whose level every Bolt logger copies (Bolt would otherwise give each
# of its loggers the root level, and its request-verification middleware logs the request body at INFO).
BOLT_LOGGER = "inferbot.bolt"

SCOPES: dict[str, str] = {**LISTENER_SCOPES, **Poster.SCOPES, **SlackGroups.SCOPES}
"""Every OAuth scope the app asks for, and why: its listeners' events and command, and the Web API methods
of the Poster and the group lookup (each recorded as it is registered; the manifest test compares)."""


class SlackBot:
    """The state behind one ``AsyncApp``: the runtime, dedupe, rate limit and the answers in flight.

    With a state store, de-duplication and the rate limit live in the database (``services.store.shared_state``),
    so two replicas answer an event once and count a person's questions together; without one (tests,
    plumbing) they are this process's memory.
    """

    def __init__(self, rt: SlackRuntime, settings: SlackSettings,
                 role: Callable[[], str | None] = lambda: None) -> None:
        self.runtime = rt
        self.poster = rt.notifier  # every answer, line and refusal below goes through the runtime's Poster
        self.settings = settings
        self.seen = TtlSet()  # event ids this process took in hand (claimed, or being claimed)
        self.limiter = RateLimiter(settings.rate_limit_per_minute)
        self.tasks: set[asyncio.Task[None]] = set()
        self.renders = RenderMemo()  # answers being posted, drawn once for every copy of a shared one
        self.registered = Manifest()  # what the listeners registered, in manifest terms
        self.role = role  # "leader" / "standby" once serving (the scheduler's leadership), for /healthz
        # What a confirm/cancel click runs (already acked); per app, so a test can put its own in.
        self.restart_action: RestartAction = restart_actions.handle_restart_action

    async def first_delivery(self, event_id: str, patience_s: float | None = None) -> bool | None:
        """True for the first delivery of ``event_id`` to any replica, False for a later one (a Slack retry of
        an event already claimed, here or by another replica); None when the store did not answer for
        ``patience_s`` (default :data:`CLAIM_PATIENCE_S`; then nobody may have claimed it: the caller tells the
        person instead of answering).

        Runs after the ack. A delivery this process already took in hand is a duplicate at once; the claim
        in the store is tried again while the store does not answer, so a lock held by another process
        delays the answer instead of losing it.
        """
        if not self.seen.add(event_id):
            return False
        store = self.runtime.store
        if store is None:
            return True
        deadline = time.monotonic() + (CLAIM_PATIENCE_S if patience_s is None else patience_s)
        delay = 0.5
        while True:
            try:
                return await store.shared.claim_event(event_id, datetime.now(UTC))
            except Exception as e:  # the store's errors (locked, unreachable) are drivers' own classes
                if time.monotonic() + delay > deadline:
                    log.error("could not claim a Slack event: the state store did not answer",
                              exc_info=e, extra={"event": "slack-claim", "event_id": event_id})
                    return None
                log.warning("could not claim a Slack event yet; trying again",
                            extra={"event": "slack-claim", "event_id": event_id, "reason": type(e).__name__})
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def check_rate(self, user: str) -> Verdict:
        """The rate-limit verdict for one more answer to ``user`` (counted over every replica).

        When the store cannot say (locked, unreachable), the answer is allowed: the limit protects the nodes
        from a flood, and a store outage must not silence the bot.
        """
        if self.runtime.store is None:
            return self.limiter.check(user)
        try:
            v = await self.runtime.store.shared.rate_check(user, self.settings.rate_limit_per_minute)
        except Exception as e:
            log.warning("rate limit unavailable (state store); answering", exc_info=e,
                        extra={"event": "slack-rate", "user": user})
            return Verdict(True)
        return Verdict(v.allowed, v.retry_in, v.notify)

    # -- other workspaces
    def allowed_teams(self, context: AsyncBoltContext) -> frozenset[str]:
        """``[slack] allowed_teams``, else the app's own workspace (and org) as ``auth.test`` told Bolt."""
        if self.settings.allowed_teams:
            return frozenset(self.settings.allowed_teams)
        auth = context.authorize_result
        own = {auth.team_id, auth.enterprise_id if auth.team_id is None else None} if auth is not None else set()
        return frozenset(t for t in own if t)

    async def refuse_other_workspace(self, body: dict[str, Any], context: AsyncBoltContext) -> BoltResponse:
        """One line for a person of another workspace, wherever they asked; nothing else happens."""
        if "command" in body:
            return await context.ack(text=escape(OTHER_WORKSPACE_TEXT), response_type="ephemeral")
        response = await context.ack()
        event = body.get("event") if isinstance(body.get("event"), dict) else None
        user = str(context.actor_user_id or context.user_id or "")
        line = OTHER_WORKSPACE_TEXT
        if event is not None and event.get("type") == "app_home_opened":
            if user and event.get("tab", "home") == "home":
                self.spawn(self._publish_line(user, line), "refuse")
        elif event is not None and event.get("channel") and user:
            channel = str(event["channel"])
            if event.get("type") == "message":  # a DM: the line in the DM
                self.spawn(self._line(Where(channel, event.get("thread_ts")), line), "refuse")
            else:  # a mention: the line in its thread, for that person only
                where = Where(channel, event.get("thread_ts") or event.get("ts"))
                self.spawn(self._line(where, line, ephemeral_to=user), "refuse")
        elif (body.get("container") or {}).get("type") == "view" and user:  # a button on the Home tab
            self.spawn(self._publish_line(user, line), "refuse")
        elif body.get("response_url"):
            self.spawn(self._line(Where("", response_url=str(body["response_url"])), line), "refuse")
        return response

    async def _line(self, where: Where, text: str, ephemeral_to: str | None = None) -> None:
        await self.poster.line(where, text, ephemeral_to=ephemeral_to)

    async def _publish_line(self, user: str, text: str) -> None:
        """A Home tab holding only ``text`` (for someone who may see nothing else)."""
        try:
            await self.poster.publish(user, line_view(text))
        except SLACK_ERRORS as e:
            log.warning("views.publish failed", extra={"event": "slack-home", "user": user,
                                                       "reason": type(e).__name__})

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
        self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
        response_url: str | None = None,
    ) -> None:
        started = time.monotonic()
        asker = Asker(surface="slack", user_id=user, channel_id=channel, thread_ts=thread_ts)
        # Slack shows the cards, never the reply's data: the handlers leave the per-service JSON out.
        # Many people asking the same at once (an incident) share one answer: see bot/shared_answers.py.
        reply = await answer(text, self.runtime.context(asker, service_data=False), self.runtime.shared)
        if restart_actions.is_confirmation(reply) and await restart_actions.post_confirmation(
                self.runtime, channel, thread_ts, reply):
            # A restart confirmation: posted visibly by the restart wiring, which remembers its ts.
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "intent": reply.intent, "ms": int((time.monotonic() - started) * 1000),
                                            "outcome": "posted"})
            return
        where = Where(channel, thread_ts, response_url)
        with contextlib.ExitStack() as held:
            try:
                # Copies of one shared answer being posted at once are drawn once (bot/slack/render_memo.py).
                messages = held.enter_context(self.renders.messages(reply))
            except Exception as e:
                messages = _render_failed(e, reply, text, kind)
            ok = await self.poster.say(where, messages)
        if ok and reply.attachments:
            ok = await self.poster.attach(where, reply)
        if ok and reply.chart is not None:
            ok = await upload_chart(self.poster, where, reply)
        log.info("slack answer", extra={
            "event": "slack", "kind": kind, "user": user, "channel": channel, "intent": reply.intent,
            "messages": len(messages), "ms": int((time.monotonic() - started) * 1000),
            "outcome": "posted" if ok else "post-failed",
        })

    async def refuse(self, *, kind: str, user: str, where: Where, retry_in: int) -> None:
        """The rate-limit line (in the thread, or only for the asker at a response_url)."""
        await self.poster.line(where, rate_limit_text(retry_in))
        log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": where.channel,
                                        "outcome": "rate-limited"})

    # -- one question from an event
    def on_question(self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
                    event_id: str | None = None) -> None:
        """Take one question after the ack: claim its event, check the rate limit, answer."""
        self.spawn(self._question(kind=kind, text=text, user=user, channel=channel, thread_ts=thread_ts,
                                  event_id=event_id), kind)

    async def _question(self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
                        event_id: str | None) -> None:
        if event_id:
            first = await self.first_delivery(event_id)
            if first is False:
                log.info("slack event ignored", extra={"event": "slack-ignored", "reason": "duplicate",
                                                       "user": user, "event_id": event_id})
                return
            if first is None:  # nobody could claim it: say so once, rather than answer it twice or never
                await self.poster.line(Where(channel, thread_ts),
                                       UNCLAIMED_TEXT.format(minutes=max(1, round(CLAIM_PATIENCE_S / 60))))
                return
        verdict = await self.check_rate(user)
        if verdict.allowed:
            await self.answer_and_post(kind=kind, text=text, user=user, channel=channel, thread_ts=thread_ts)
        elif verdict.notify:
            await self.refuse(kind=kind, user=user, where=Where(channel, thread_ts), retry_in=verdict.retry_in)
        else:
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "outcome": "rate-limited-silent"})

    async def command(self, verdict: asyncio.Future[Verdict], *, text: str | Message, user: str, channel: str,
                      response_url: str | None) -> None:
        """A slash command already acked "Looking…": its rate-limit verdict (maybe still coming), then the answer."""
        v = await verdict
        if v.allowed:
            await self.answer_and_post(kind="command", text=text, user=user, channel=channel, thread_ts=None,
                                       response_url=response_url)
        elif response_url:
            await self.refuse(kind="command", user=user, where=Where(channel, response_url=response_url),
                              retry_in=v.retry_in)
        else:
            log.info("slack answer", extra={"event": "slack", "kind": "command", "user": user, "channel": channel,
                                            "outcome": "rate-limited"})


def _render_failed(e: Exception, reply: Reply, text: str | Message, kind: str) -> list[SlackMessage]:
    """The answer that could not be laid out for Slack: one short answer saying so (logged)."""
    log.exception("rendering the answer for Slack failed",
                  extra={"event": "slack-render", "intent": reply.intent, "kind": kind})
    said = " ".join((text.plain if isinstance(text, Message) else text).split())
    asked = said if len(said) <= 80 else said[:79] + "…"
    return [failure_message(f"I could not lay out the answer to “{asked}” for Slack",
                            f"{render_failure(e)} (logged). The terminal has it: "
                            f"`inferbot ask \"{asked}\"` on the bot's host.")]


class InferbotApp(AsyncApp):
    """Bolt's app, carrying the ``SlackBot`` it was built with (no registry of apps on the side)."""

    bot: SlackBot


def state_of(app: AsyncApp) -> SlackBot:
    """The ``SlackBot`` behind an app made by ``build_app``."""
    bot = bot_of(app)
    if bot is None:
        raise KeyError("not an app made by build_app")
    return bot


def bot_of(app: AsyncApp) -> SlackBot | None:
    """The ``SlackBot`` behind ``app``, or None for a Bolt app not made by ``build_app``."""
    return app.bot if isinstance(app, InferbotApp) else None


def build_app(
    rt: SlackRuntime,
    settings: SlackSettings,
    process_before_response: bool = False,
    *,
    signing_secret: Secret | str | None = None,
    role: Callable[[], str | None] = lambda: None,
) -> AsyncApp:
    """The Bolt app on ``rt`` (posting through ``rt``'s Poster and its client), every listener registered.

    ``role`` says "leader" or "standby" once the scheduler campaigns (``/healthz``).
    """
    secret = signing_secret.reveal() if isinstance(signing_secret, Secret) else signing_secret
    bolt_logger = logging.getLogger(BOLT_LOGGER)
    # Bolt logs request bodies (message texts) at INFO on a bad signature: keep it at WARNING unless debugging.
    bolt_logger.setLevel(logging.DEBUG if logging.getLogger().level == logging.DEBUG else logging.WARNING)
    app = InferbotApp(
        client=rt.notifier.client,
        signing_secret=secret or "",
        request_verification_enabled=bool(secret),  # Socket Mode needs none; HTTP mode always has one
        process_before_response=process_before_response,
        logger=bolt_logger,
        # Bolt names its app loggers after ``name`` and gives them the base logger's level: keep them under
        # inferbot.bolt, or it would silence our own "inferbot" loggers.
        name=BOLT_LOGGER,
    )
    bot = SlackBot(rt, settings, role)
    app.bot = bot
    registrar = Registrar(app, bot.registered)
    # Bots, edits and other workspaces: acked, not answered. Duplicates (a Slack retry of an event another
    # delivery or replica claimed) are dropped after the ack, in on_question: the claim never holds the ack.
    guards.register(registrar, bot)
    register_listeners(registrar, bot)
    registrar.uses(Poster.SCOPES)  # answers, notices, files, DMs: whoever posts, the app needs them
    registrar.uses(SlackGroups.SCOPES)  # a restart's permission by user group

    async def on_error(error: Exception, body: dict[str, Any]) -> None:
        # No body: it holds message texts.
        log.error("slack listener error: %s", type(error).__name__, exc_info=error,
                  extra={"event": "slack-error", "type": body.get("type") if isinstance(body, dict) else None})

    app.error(on_error)
    return app
