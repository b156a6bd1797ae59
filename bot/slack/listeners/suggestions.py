"""The buttons of a suggestion ("Did you mean `status kimi`?", a second question offered): a click asks the
suggested command as if the clicker had typed it in that thread — the same path, the same guards (the rate
limit, who may restart: a ``restart kimi`` suggestion posts the usual confirmation, never a restart).

The button's value is a command the bot built from the config's names (``bot.understanding``), and it is
read again like any typed message: nothing in it is trusted beyond that.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar
from handlers.help import SUGGEST_ACTIONS

log = logging.getLogger("inferbot.slack")
MAX_VALUE = 200  # a suggestion is a short command; anything longer was not ours


def clicked(body: dict[str, Any], action: dict[str, Any]) -> tuple[str, str, str, str | None] | None:
    """(command, user, channel, thread) of a suggestion click, or None when it lacks one of them."""
    value = str(action.get("value") or "").strip()
    user = str((body.get("user") or {}).get("id") or "")
    channel = str((body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or "")
    container = body.get("container") or {}
    message = body.get("message") or {}
    thread = container.get("thread_ts") or message.get("thread_ts") or container.get("message_ts") or None
    if not value or len(value) > MAX_VALUE or not user or not channel:
        return None
    return value, user, channel, str(thread) if thread else None


def register(app: Registrar, bot: Host) -> None:
    """Listen to the suggestion buttons."""

    async def on_suggestion(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        got = clicked(body, action)
        log.info("slack action", extra={"event": "slack-action", "action": action.get("action_id"),
                                        "user": (body.get("user") or {}).get("id")})
        if got is None:
            return
        text, user, channel, thread = got
        bot.on_question(kind="suggestion", text=text, user=user, channel=channel, thread_ts=thread)

    app.action(SUGGEST_ACTIONS, on_suggestion)
