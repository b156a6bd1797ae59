"""Slack wiring of confirmable requests (a restart, a benchmark…): user-group lookup, posting the confirmation,
and the button seam.

``bot.slack.app.on_restart_action`` delegates to :func:`handle_restart_action`; ``SlackBot.answer_and_post``
hands a confirmation reply to :func:`post_confirmation` (a visible message whose ts is remembered, so the
expiry job can rewrite it). No business rules here: they are the flow's, ``handlers/confirmable/``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import escape
from bot.slack.notifier import SlackNotifier
from handlers.confirmable.kind import CANCEL, CONFIRM
from handlers.context import Asker
from handlers.notify import Notifier
from handlers.reply import Reply
from handlers.request_kinds import on_action

if TYPE_CHECKING:
    from bot.app import Runtime

log = logging.getLogger("inferbot.restart")
GROUP_CACHE_S = 300.0


class SlackGroups:
    """User-group members from ``usergroups.users.list``, cached for ``ttl`` seconds per group."""

    def __init__(self, client: AsyncWebClient, ttl: float = GROUP_CACHE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.ttl, self.clock = client, ttl, clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self.calls = 0

    async def members(self, group_id: str) -> frozenset[str]:
        """The user ids in ``group_id`` (empty, and not cached, when Slack can't say)."""
        hit = self._cache.get(group_id)
        if hit is not None and self.clock() - hit[0] < self.ttl:
            return hit[1]
        self.calls += 1
        try:
            # POST (form-encoded), which every Web API method accepts; slack_sdk's helper would use GET.
            resp = await self.client.api_call("usergroups.users.list", data={"usergroup": group_id})
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as e:
            # Refuse rather than guess: a failed lookup means "not a member" this time.
            log.warning("usergroups.users.list failed for %s: %s", group_id, type(e).__name__)
            return frozenset()
        users = frozenset(str(u) for u in (resp.get("users") or []))
        self._cache[group_id] = (self.clock(), users)
        return users


def ensure_slack_services(rt: Runtime, client: AsyncWebClient) -> None:
    """Give the runtime a Slack notifier and group lookup unless the front end set its own."""
    if rt.notifier is None:
        rt.notifier = SlackNotifier(client)
    if rt.groups is None:
        rt.groups = SlackGroups(client)


def is_confirmation(reply: Reply) -> bool:
    """True for a confirmation of a request, of any kind (it carries the two buttons and a request id)."""
    return bool(reply.data.get("request_id")) and any(a.action_id == CONFIRM for a in reply.actions)


async def post_confirmation(rt: Runtime, client: AsyncWebClient, channel: str, thread_ts: str | None,
                            reply: Reply) -> bool:
    """Post the confirmation visibly in the thread and remember where it is; False if Slack refused it."""
    ensure_slack_services(rt, client)
    notifier: Notifier = rt.notifier or SlackNotifier(client)
    try:
        ts = await notifier.post(channel, thread_ts, reply)
    except (SlackApiError, SlackClientError, OSError, TimeoutError) as e:
        log.warning("could not post the confirmation: %s", type(e).__name__)
        return False
    if rt.store is not None:
        await rt.store.requests.set_message(str(reply.data["request_id"]), channel, ts)
    return True


async def handle_restart_action(
    action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, runtime: Runtime,
    respond: Callable[..., Awaitable[Any]],
) -> None:
    """A button press (already acknowledged): run the flow's one ``on_action`` and show its outcome."""
    ensure_slack_services(runtime, client)
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
    notifier: Notifier = runtime.notifier or SlackNotifier(client)
    if outcome.message is not None and channel and message_ts:
        try:
            await notifier.update(channel, message_ts, outcome.message)
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as e:
            log.warning("could not rewrite the confirmation message: %s", type(e).__name__)
    if outcome.ephemeral and user:
        try:
            if channel:
                await notifier.ephemeral(channel, user, outcome.ephemeral)
            else:
                await respond(text=escape(outcome.ephemeral), response_type="ephemeral", replace_original=False)
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as e:
            log.warning("could not answer the click: %s", type(e).__name__)
