"""Slack wiring of confirmable requests (a restart, a benchmark…): posting the confirmation, and what a
click on its buttons runs.

``SlackBot.answer_and_post`` hands a confirmation reply to :func:`post_confirmation` (a visible message whose
ts is remembered, so the expiry job can rewrite it); the confirm/cancel listener
(``bot.slack.listeners.requests``) runs the app's ``restart_action``, :func:`handle_restart_action` unless a
test put its own in. No business rules here: they are the flow's, ``handlers/confirmable/``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.poster import SLACK_ERRORS, Where
from bot.slack.runtime import SlackRuntime
from handlers.confirmable.kind import CANCEL, CONFIRM
from handlers.context import Asker
from handlers.reply import Reply
from handlers.request_kinds import on_action

log = logging.getLogger("inferbot.restart")

RestartAction = Callable[[dict[str, Any], dict[str, Any], AsyncWebClient, SlackRuntime,
                          Callable[..., Awaitable[Any]]], Coroutine[Any, Any, None]]
"""What a confirm/cancel click runs, already acked: (action, body, Bolt's client, the runtime, Bolt's respond)."""


def is_confirmation(reply: Reply) -> bool:
    """True for a confirmation of a request, of any kind (it carries the two buttons and a request id)."""
    return bool(reply.data.get("request_id")) and any(a.action_id == CONFIRM for a in reply.actions)


async def post_confirmation(rt: SlackRuntime, channel: str, thread_ts: str | None, reply: Reply) -> bool:
    """Post the confirmation visibly in the thread and remember where it is; False if Slack refused it."""
    try:
        ts = await rt.notifier.post(channel, thread_ts, reply)
    except SLACK_ERRORS as e:
        log.warning("could not post the confirmation: %s", type(e).__name__)
        return False
    if rt.store is not None:
        await rt.store.requests.set_message(str(reply.data["request_id"]), channel, ts)
    return True


async def handle_restart_action(
    action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, runtime: SlackRuntime,
    respond: Callable[..., Awaitable[Any]],
) -> None:
    """A button press (already acknowledged): run the flow's one ``on_action`` and show its outcome.

    Everything it says goes through the runtime's Poster (Bolt's ``client`` and ``respond`` are for a hook
    that wants them).
    """
    action_id = str(action.get("action_id") or "")
    request_id = str(action.get("value") or "")
    user = str((body.get("user") or {}).get("id") or "")
    channel = str((body.get("channel") or {}).get("id") or "")
    container = body.get("container") or {}
    message_ts = str(container.get("message_ts") or (body.get("message") or {}).get("ts") or "")
    if action_id not in (CONFIRM, CANCEL) or not request_id:
        return
    asker = Asker(surface="slack", user_id=user or None, channel_id=channel or None,
                  thread_ts=container.get("thread_ts"))
    ctx = runtime.context(asker)
    if runtime.store is not None and message_ts and channel:
        req = await runtime.store.requests.get(request_id)
        if req is not None and not req.message_ts:
            await runtime.store.requests.set_message(request_id, channel, message_ts)
    outcome = await on_action(ctx, action_id, request_id)  # the request's kind says what the buttons confirm
    poster = runtime.notifier
    if outcome.message is not None and channel and message_ts:
        try:
            await poster.update(channel, message_ts, outcome.message)
        except SLACK_ERRORS as e:
            log.warning("could not rewrite the confirmation message: %s", type(e).__name__)
    if outcome.ephemeral and user:
        if channel:
            try:
                await poster.ephemeral(channel, user, outcome.ephemeral)
            except SLACK_ERRORS as e:
                log.warning("could not answer the click: %s", type(e).__name__)
        elif body.get("response_url"):
            await poster.line(Where("", response_url=str(body["response_url"])), outcome.ephemeral)
