"""The slash command ``/inferbot …``: acked at once (with the rate-limit refusal itself when it is known in
time), answered through its ``response_url``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from bot.slack.blocks import escape
from bot.slack.guards import rate_limit_text
from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar
from bot.understanding.markup import read

log = logging.getLogger("inferbot.slack")

SLASH_COMMAND = "/inferbot"
ACK_TEXT = "Looking… :hourglass:"
RATE_ACK_WAIT_S = 1.5
"""How long a slash command's ack waits for the rate-limit verdict (so a refusal can be the ack itself);
Slack wants the ack within 3 s, so past this it acks "Looking…" and the verdict comes after."""
SCOPES = {"commands": "the /inferbot slash command"}


def register(app: Registrar, bot: Host) -> None:
    """Listen to :data:`SLASH_COMMAND`."""

    async def on_command(ack: AsyncAck, command: dict[str, Any]) -> None:
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
                              response_url=command.get("response_url")), "command")

    app.command(SLASH_COMMAND, on_command)
