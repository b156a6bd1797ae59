"""A mention of the bot in a channel, or a message in a DM with it: a question, answered in its thread."""

from __future__ import annotations

from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar
from bot.understanding.markup import read

SCOPES = {
    "app_mentions:read": "the app_mention event",
    "im:history": "the message.im event (DMs)",
}


def register(app: Registrar, bot: Host) -> None:
    """Listen to ``app_mention`` and to DMs (``message.im``)."""

    async def on_mention(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
        bot.on_question(kind="mention", text=read(event.get("text", ""), "slack", context.bot_user_id),
                        user=event["user"], channel=event["channel"],
                        thread_ts=event.get("thread_ts") or event.get("ts"), event_id=body.get("event_id"))

    async def on_dm(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
        bot.on_question(kind="dm", text=read(event.get("text", ""), "slack", context.bot_user_id),
                        user=event["user"], channel=event["channel"], thread_ts=event.get("thread_ts"),
                        event_id=body.get("event_id"))

    app.event("app_mention", on_mention, scope="app_mentions:read")
    # Bolt's "message" listener gets every message event the app is subscribed to; the manifest subscribes
    # to DMs only (guards.ignored_reason drops the rest).
    app.event("message", on_dm, subscription="message.im", scope="im:history")
