"""The two buttons of a confirmable request's confirmation (a restart, a benchmark…): confirm and cancel.

Acked at once; the click runs after the ack as the app's ``restart_action``
(``bot.slack.restart_actions.handle_restart_action``: the flow's one ``on_action``, whatever the kind).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar
from handlers.confirmable.kind import CANCEL, CONFIRM

log = logging.getLogger("inferbot.slack")

ACTIONS = (CONFIRM, CANCEL)  # "restart_confirm", "restart_cancel": contracts, whatever the request's kind


def register(app: Registrar, bot: Host) -> None:
    """Listen to the confirm and cancel buttons."""

    async def on_click(ack: AsyncAck, action: dict[str, Any], body: dict[str, Any], client: AsyncWebClient,
                       respond: AsyncRespond) -> None:
        await ack()
        log.info("slack action", extra={"event": "slack-action", "action": action.get("action_id"),
                                        "user": (body.get("user") or {}).get("id")})
        # Looked up at the click: the hook is the app's own, and a test may have put its own in.
        bot.spawn(bot.restart_action(action, body, client, bot.runtime, respond), "action")

    app.action(ACTIONS, on_click)
