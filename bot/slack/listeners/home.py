"""The App Home tab: published when opened, and its two buttons, Refresh and Restart.

Publishing is the runtime's ``HomePublisher`` (``bot.slack.home``). A **Restart** click runs nothing: it
makes the same request ``restart kimi`` makes and posts the usual confirmation in a DM with the person (or
the first of ``restart_channels`` when the policy names some).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.slack.home_view import REFRESH, RESTART
from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar
from bot.slack.poster import SLACK_ERRORS
from bot.slack.restart_actions import is_confirmation, post_confirmation
from bot.slack.runtime import SlackRuntime
from handlers.context import Asker
from handlers.home import parse_key, restart_asker, restart_channel, restart_from_home
from handlers.reply import Reply, Section

log = logging.getLogger("inferbot.home")



def _friendly(reply: Reply) -> Reply:
    """A refusal as a DM: what was refused, why, and how it could be allowed."""
    head = Section(kind="context", text="You pressed Restart on the inferbot Home tab.")
    return reply.model_copy(update={"sections": [head, *reply.sections]})


async def restart_clicked(rt: SlackRuntime, user: str, value: str) -> None:
    """A Home **Restart** click (acknowledged): the ``restart kimi`` request, confirmation in a DM or channel."""
    base = rt.context(Asker(surface="slack", user_id=user))
    service = parse_key(base, value)
    target = restart_channel(base, service) if service is not None else None
    dm = await rt.notifier.open_dm(user)
    channel = target or dm
    if service is None or channel is None:
        where = dm or user
        text = ("refused: I could not open a DM with you to confirm the restart" if service is not None
                else f"refused: {value or 'that service'} is no longer in the config — open the Home tab again")
        await _tell(rt, where, Reply(intent="restart", ok=False, title="Restart refused", status="error",
                                     sections=[Section(kind="text", text=text)], error=text))
        return
    ctx = rt.context(restart_asker(base, service, user, dm))
    reply = await restart_from_home(ctx, value)
    if is_confirmation(reply):
        if await post_confirmation(rt, channel, None, reply):
            return
        reply = Reply(intent="restart", ok=False, title="Restart not asked", status="error",
                      sections=[Section(kind="text", text="Slack refused the confirmation message; try again.")])
    await _tell(rt, dm or user, _friendly(reply))


async def _tell(rt: SlackRuntime, channel: str, reply: Reply) -> None:
    try:
        await rt.notifier.post(channel, None, reply)
    except SLACK_ERRORS as e:
        log.warning("could not answer the Home click: %s", type(e).__name__)


def register(app: Registrar, bot: Host) -> None:
    """Listen to ``app_home_opened`` and the Home tab's buttons."""
    rt = bot.runtime
    publisher = rt.dashboards

    async def on_home_opened(body: dict[str, Any], event: dict[str, Any]) -> None:
        user = str(event.get("user") or "")
        if event.get("tab", "home") != "home" or not user:
            return  # the Messages tab: nothing to publish
        event_id = str(body.get("event_id") or "")

        async def once() -> None:
            if event_id and await bot.first_delivery(event_id) is False:
                return  # a retry of an open already published (a store that did not answer: publish anyway)
            await publisher.opened(user)

        bot.spawn(once(), "home")

    async def on_refresh(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        # Each Refresh probes every node: the same per-person limit as questions keeps a stuck mouse cheap.
        if user and (await bot.check_rate(user)).allowed:  # counted over every replica
            bot.spawn(publisher.publish_now(user), "home-refresh")
        elif user:
            log.info("home refresh rate-limited", extra={"event": "slack-home", "user": user})

    async def on_restart(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        log.info("slack action", extra={"event": "slack-action", "action": RESTART, "user": user})
        if user:
            bot.spawn(restart_clicked(rt, user, str(action.get("value") or "")), "home-restart")

    app.event("app_home_opened", on_home_opened, scope=None)  # no scope; conversations.open is the Poster's
    app.action((REFRESH,), on_refresh)
    app.action((RESTART,), on_restart)
