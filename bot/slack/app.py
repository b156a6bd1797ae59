"""The Slack front end: a Bolt ``AsyncApp`` (Socket Mode by default, or the Events API over HTTP).

Every question — an app mention, a DM or ``/inferbot …`` — takes the same path as in the terminal:
``bot.dispatch.answer(text, runtime.context(asker))`` → ``Reply`` → ``bot.slack.blocks`` → posted in the
thread. Slack is acknowledged first; the SSH work runs afterwards in a task the bot keeps track of.

The package, one concern per module (each listener module has a ``register(app, bot)``, as in Bolt's
starter template):
  ``client``           tokens and the Web API client
  ``guards``           bots, edits, other workspaces, rate limits, Slack markup (never the store)
  ``posting``          the one posting path of answers and notices (blocks, or plain text if refused)
  ``blocks``           Block Kit rendering of a ``Reply``
  ``notifier``         the ``Notifier`` handlers post notices through
  ``restart_actions``  the restart buttons and confirmations
  ``home``, ``charts`` the App Home tab and chart uploads
  ``app``              this module: ``SlackBot`` (the state behind one app: event claims after the ack,
                       rate limits) and ``build_app``
  ``serve``            Socket Mode / HTTP, heartbeat, scheduler (``inferbot serve``)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.app import Runtime
from bot.dispatch import answer
from bot.slack import guards, home, restart_actions, suggest_actions
from bot.slack.blocks import (
    SlackMessage,
    attachment_sections,
    escape,
    failure_message,
    render_failure,
    render_messages,
)
from bot.slack.charts import upload_chart
from bot.slack.client import api_base_url, make_client, require_token, retry_handlers
from bot.slack.guards import RateLimiter, TtlSet, Verdict, rate_limit_text
from bot.slack.home_view import line_view
from bot.slack.posting import post_message
from bot.slack.render_memo import RenderMemo
from bot.understanding.markup import Message, read
from config.models import SlackSettings
from handlers.context import Asker
from handlers.reply import Attachment, Reply
from services.redact import Secret

log = logging.getLogger("inferbot.slack")

SLASH_COMMAND = "/inferbot"
RESTART_ACTIONS = ("restart_confirm", "restart_cancel")
ACK_TEXT = "Looking… :hourglass:"
CLAIM_PATIENCE_S = 120.0
"""How long an event's answer waits for its de-duplication claim while the state store does not answer
(a SQLite file locked by another process, PostgreSQL out of reach). The ack never waits for it."""
RATE_ACK_WAIT_S = 1.5
"""How long a slash command's ack waits for the rate-limit verdict (so a refusal can be the ack itself);
Slack wants the ack within 3 s, so past this it acks "Looking…" and the verdict comes after."""
UNCLAIMED_TEXT = ("Sorry — I could not take this question: my state database did not answer for {minutes} min "
                  "(the cause is in my log). Please ask again.")
OTHER_WORKSPACE_TEXT = "Sorry — inferbot answers only people of the workspace it is installed in."
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



RestartAction = Callable[[dict[str, Any], dict[str, Any], AsyncWebClient, Runtime, AsyncRespond],
                         Coroutine[Any, Any, None]]


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
        self.seen = TtlSet()  # event ids this process took in hand (claimed, or being claimed)
        self.limiter = RateLimiter(settings.rate_limit_per_minute)
        self.tasks: set[asyncio.Task[None]] = set()
        self.renders = RenderMemo()  # answers being posted, drawn once for every copy of a shared one
        self.registered = Registered()
        self.role: Callable[[], str | None] = lambda: None  # "leader" / "standby" once serving
        # What a restart button press runs (already acked); per app, so a test can put its own in.
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
        client = context.client
        event = body.get("event") if isinstance(body.get("event"), dict) else None
        user = str(context.actor_user_id or context.user_id or "")
        if event is not None and event.get("type") == "app_home_opened":
            if user and event.get("tab", "home") == "home":
                self.spawn(_publish_line(client, user, OTHER_WORKSPACE_TEXT), "refuse")
        elif event is not None and event.get("channel") and user:
            channel = str(event["channel"])
            if event.get("type") == "message":  # a DM: the line in the DM
                self.spawn(_say(client, channel, event.get("thread_ts"), OTHER_WORKSPACE_TEXT), "refuse")
            else:  # a mention: the line in its thread, for that person only
                self.spawn(_say(client, channel, event.get("thread_ts") or event.get("ts"), OTHER_WORKSPACE_TEXT,
                                ephemeral_to=user), "refuse")
        elif (body.get("container") or {}).get("type") == "view" and user:  # a button on the Home tab
            self.spawn(_publish_line(client, user, OTHER_WORKSPACE_TEXT), "refuse")
        elif context.respond is not None:
            self.spawn(_respond_line(context.respond, OTHER_WORKSPACE_TEXT), "refuse")
        return response

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
        client: AsyncWebClient, response_url: str | None = None,
    ) -> None:
        started = time.monotonic()
        asker = Asker(surface="slack", user_id=user, channel_id=channel, thread_ts=thread_ts)
        # Slack shows the cards, never the reply's data: the handlers leave the per-service JSON out.
        # Many people asking the same at once (an incident) share one answer: see bot/shared_answers.py.
        reply = await answer(text, self.runtime.context(asker, service_data=False), self.runtime.shared)
        if restart_actions.is_confirmation(reply) and await restart_actions.post_confirmation(
                self.runtime, client, channel, thread_ts, reply):
            # A restart confirmation: posted visibly by the restart wiring, which remembers its ts.
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "intent": reply.intent, "ms": int((time.monotonic() - started) * 1000),
                                            "outcome": "posted"})
            return
        with contextlib.ExitStack() as held:
            try:
                # Copies of one shared answer being posted at once are drawn once (bot/slack/render_memo.py).
                messages = held.enter_context(self.renders.messages(reply))
            except Exception as e:
                log.exception("rendering the answer for Slack failed",
                              extra={"event": "slack-render", "intent": reply.intent, "kind": kind})
                said = " ".join((text.plain if isinstance(text, Message) else text).split())
                asked = said if len(said) <= 80 else said[:79] + "…"
                messages = [failure_message(f"I could not lay out the answer to “{asked}” for Slack",
                                            f"{render_failure(e)} (logged). The terminal has it: "
                                            f"`inferbot ask \"{asked}\"` on the bot's host.")]
            if response_url:
                ok = await self.respond_messages(response_url, messages, client=client, channel=channel)
            else:
                ok = await self.post_messages(client, channel, thread_ts, messages)
        if ok and reply.attachments:
            ok = await self.upload(client, channel, thread_ts, reply, response_url)
        if ok and reply.chart is not None:
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
            await post_message(client, channel, thread_ts, m)
            return True
        except SlackApiError as e:
            reason = str(e.response.get("error") or e.response.status_code)
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
                resp = await hook.send_dict({"text": m.text, "blocks": m.blocks, "response_type": "in_channel",
                                             "replace_original": False, "parse": "none"})
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
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=escape(rate_limit_text(retry_in)),
                                          parse="none", link_names=False)
        except (TimeoutError, SlackClientError, OSError) as e:
            log.warning("could not post the rate-limit notice",
                        extra={"event": "slack-post", "channel": channel, "reason": type(e).__name__})
        log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                        "outcome": "rate-limited"})

    # -- one question from an event
    def on_question(self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
                    client: AsyncWebClient, event_id: str | None = None) -> None:
        """Take one question after the ack: claim its event, check the rate limit, answer."""
        self.spawn(self._question(kind=kind, text=text, user=user, channel=channel, thread_ts=thread_ts,
                                  client=client, event_id=event_id), kind)

    async def _question(self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
                        client: AsyncWebClient, event_id: str | None) -> None:
        if event_id:
            first = await self.first_delivery(event_id)
            if first is False:
                log.info("slack event ignored", extra={"event": "slack-ignored", "reason": "duplicate",
                                                       "user": user, "event_id": event_id})
                return
            if first is None:  # nobody could claim it: say so once, rather than answer it twice or never
                await _say(client, channel, thread_ts,
                           UNCLAIMED_TEXT.format(minutes=max(1, round(CLAIM_PATIENCE_S / 60))))
                return
        verdict = await self.check_rate(user)
        if verdict.allowed:
            await self.answer_and_post(kind=kind, text=text, user=user, channel=channel, thread_ts=thread_ts,
                                       client=client)
        elif verdict.notify:
            await self.refuse(kind=kind, user=user, channel=channel, thread_ts=thread_ts,
                              retry_in=verdict.retry_in, client=client)
        else:
            log.info("slack answer", extra={"event": "slack", "kind": kind, "user": user, "channel": channel,
                                            "outcome": "rate-limited-silent"})

    async def command(self, verdict: asyncio.Future[Verdict], *, text: str | Message, user: str, channel: str,
                      client: AsyncWebClient, response_url: str | None) -> None:
        """A slash command already acked "Looking…": its rate-limit verdict (maybe still coming), then the answer."""
        v = await verdict
        if v.allowed:
            await self.answer_and_post(kind="command", text=text, user=user, channel=channel, thread_ts=None,
                                       client=client, response_url=response_url)
            return
        log.info("slack answer", extra={"event": "slack", "kind": "command", "user": user, "channel": channel,
                                        "outcome": "rate-limited"})
        if response_url:
            hook = AsyncWebhookClient(url=response_url, retry_handlers=retry_handlers())
            try:
                await hook.send_dict({"text": escape(rate_limit_text(v.retry_in)), "response_type": "ephemeral",
                                      "replace_original": False, "parse": "none"})
            except (TimeoutError, SlackClientError, OSError) as e:
                log.warning("could not post the rate-limit notice",
                            extra={"event": "slack-post", "channel": channel, "reason": type(e).__name__})


async def _say(client: AsyncWebClient, channel: str, thread_ts: str | None, text: str,
               ephemeral_to: str | None = None) -> None:
    """One line of the bot's own (escaped) in a thread or DM, or only for ``ephemeral_to``; failures logged."""
    try:
        if ephemeral_to:
            await client.chat_postEphemeral(channel=channel, user=ephemeral_to, thread_ts=thread_ts, text=escape(text),
                                            parse="none", link_names=False)
        else:
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=escape(text), parse="none",
                                          link_names=False, unfurl_links=False, unfurl_media=False)
    except (TimeoutError, SlackClientError, OSError) as e:
        log.warning("could not post a line", extra={"event": "slack-post", "channel": channel,
                                                    "reason": type(e).__name__})


async def _respond_line(respond: AsyncRespond, text: str) -> None:
    try:
        await respond(text=escape(text), response_type="ephemeral", replace_original=False)
    except (TimeoutError, SlackClientError, OSError) as e:
        log.warning("could not answer through the response_url", extra={"event": "slack-post",
                                                                          "reason": type(e).__name__})


async def _publish_line(client: AsyncWebClient, user: str, text: str) -> None:
    """A Home tab holding only ``text`` (for someone who may see nothing else)."""
    try:
        await client.views_publish(user_id=user, view=line_view(text))
    except (TimeoutError, SlackClientError, OSError) as e:
        log.warning("views.publish failed", extra={"event": "slack-home", "user": user, "reason": type(e).__name__})


def _attachment_messages(reply: Reply, att: Attachment) -> list[SlackMessage]:
    return render_messages(Reply(intent=reply.intent, title=att.title or att.filename, status=reply.status,
                                 sections=attachment_sections(att)))


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
    rt: Runtime,
    settings: SlackSettings,
    client: AsyncWebClient | None = None,
    process_before_response: bool = False,
    *,
    signing_secret: Secret | str | None = None,
) -> AsyncApp:
    """The Bolt app with every listener registered; tokens come from the environment unless ``client`` is given."""
    if client is None:
        client = make_client(require_token("SLACK_BOT_TOKEN", None), api_base_url(settings))
    secret = signing_secret.reveal() if isinstance(signing_secret, Secret) else signing_secret
    bolt_logger = logging.getLogger(BOLT_LOGGER)
    # Bolt logs request bodies (message texts) at INFO on a bad signature: keep it at WARNING unless debugging.
    bolt_logger.setLevel(logging.DEBUG if logging.getLogger().level == logging.DEBUG else logging.WARNING)
    app = InferbotApp(
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
    app.bot = bot
    restart_actions.ensure_slack_services(rt, client)  # notices and user-group lookups through this client
    reg = bot.registered

    # Bots, edits and other workspaces: acked, not answered. Duplicates (a Slack retry of an event another
    # delivery or replica claimed) are dropped after the ack, in on_question: the claim never holds the ack.
    guards.register(app, bot)

    async def on_mention(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext,
                         client: AsyncWebClient) -> None:
        bot.on_question(kind="mention", text=read(event.get("text", ""), "slack", context.bot_user_id),
                        user=event["user"], channel=event["channel"],
                        thread_ts=event.get("thread_ts") or event.get("ts"), client=client,
                        event_id=body.get("event_id"))

    async def on_dm(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext,
                    client: AsyncWebClient) -> None:
        bot.on_question(kind="dm", text=read(event.get("text", ""), "slack", context.bot_user_id),
                        user=event["user"], channel=event["channel"], thread_ts=event.get("thread_ts"),
                        client=client, event_id=body.get("event_id"))

    async def on_command(ack: AsyncAck, command: dict[str, Any], client: AsyncWebClient) -> None:
        user, channel = command.get("user_id", ""), command.get("channel_id", "")
        verdict = asyncio.ensure_future(bot.check_rate(user))
        # The verdict decides the ack's words when it comes in time; the ack never waits past Slack's 3 s.
        await asyncio.wait({verdict}, timeout=RATE_ACK_WAIT_S)
        if verdict.done() and not verdict.result().allowed:
            await ack(text=escape(rate_limit_text(verdict.result().retry_in)), response_type="ephemeral")
            log.info("slack answer", extra={"event": "slack", "kind": "command", "user": user,
                                            "channel": channel, "outcome": "rate-limited"})
            return
        await ack(text=ACK_TEXT, response_type="ephemeral")
        bot.spawn(bot.command(verdict, text=read(command.get("text", ""), "slack"), user=user, channel=channel,
                              client=client, response_url=command.get("response_url")), "command")

    async def on_restart(ack: AsyncAck, action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient,
                         respond: AsyncRespond) -> None:
        await ack()
        log.info("slack action", extra={"event": "slack-action", "action": action.get("action_id"),
                                        "user": (body.get("user") or {}).get("id")})
        bot.spawn(bot.restart_action(action, body, client, bot.runtime, respond), "action")

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
    home.register(app, bot)  # the App Home dashboard: app_home_opened, home_refresh, home_restart
    suggest_actions.register(app, bot)  # "Did you mean `status kimi`?": a click asks it
    app.error(on_error)
    return app


