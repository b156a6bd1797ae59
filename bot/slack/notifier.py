"""The Slack ``Notifier``: notices, progress edits and ephemeral answers through the Bolt app's Web API client.

Replies are rendered by ``bot.slack.blocks`` (every string escaped; only the mentions handlers made with
``services.mentions`` are live) and posted through ``bot.slack.posting`` (blocks, or the plain text when
Slack refuses them, as answers are). A reply that cannot be rendered is still posted, as one line saying so
(the cause is logged). Failures to post raise (``SlackApiError``/``SlackClientError``) after slack_sdk's own
retry handlers (rate limits, 5xx, connection errors) gave up: the caller decides whether to retry later (the
follow job does, on its next poll).
"""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import SlackMessage, escape, failure_message, render_failure, render_messages
from bot.slack.posting import post_message, update_message
from handlers.notify import notice_text
from handlers.reply import Reply

log = logging.getLogger("inferbot.slack")


def notice_messages(reply: Reply) -> list[SlackMessage]:
    """``reply`` as Slack messages; if it cannot be laid out, one line with its notice and why (logged)."""
    try:
        return render_messages(reply)
    except Exception as e:
        log.exception("rendering a notice for Slack failed", extra={"event": "slack-render", "intent": reply.intent})
        return [failure_message(notice_text(reply), f"the full message could not be laid out ({render_failure(e)})")]


class SlackNotifier:
    """Posts, edits and ephemeral messages on Slack."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        """Post ``reply`` (in ``thread_ts`` when given); returns the ts of its first message."""
        first: str | None = None
        for m in notice_messages(reply):
            ts = await post_message(self.client, channel, thread_ts, m)
            first = first or ts
        assert first is not None  # render_messages always yields at least one message
        return first

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        """Rewrite the message ``ts`` with ``reply`` (its first part; edits are short by design)."""
        await update_message(self.client, channel, ts, notice_messages(reply)[0])

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        """A message only ``user`` sees (``text`` is escaped: only the bot's own mentions are live)."""
        await self.client.chat_postEphemeral(channel=channel, user=user, text=escape(text),
                                           parse="none", link_names=False)
