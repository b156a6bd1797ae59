"""The Slack ``Notifier``: notices, progress edits and ephemeral answers through the Bolt app's Web API client.

Replies are rendered by ``bot.slack.blocks`` and posted through ``bot.slack.posting`` (blocks, or the plain
text when Slack refuses them, as answers are) (which escapes ``<`` ``>`` ``&``); Slack mentions that handlers
write on purpose — ``<@U…>``, ``<#C…>``, ``<!subteam^S…>``, always built from Slack ids, never from message
text — are turned back into real mentions here. Failures raise (``SlackApiError``/``SlackClientError``)
after slack_sdk's own retry handlers (rate limits, 5xx, connection errors) gave up: the caller decides
whether to retry later (the follow job does, on its next poll).
"""

from __future__ import annotations

import re
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import SlackMessage, render_messages
from bot.slack.posting import post_message, update_message
from handlers.reply import Reply

_ESCAPED_MENTION = re.compile(r"&lt;(@[UW][A-Z0-9]{2,}|#[CG][A-Z0-9]{2,}|!subteam\^S[A-Z0-9]{2,})&gt;")


def unescape_mentions(text: str) -> str:
    """``&lt;@U123&gt;`` → ``<@U123>`` (only id-shaped mentions; everything else stays escaped)."""
    return _ESCAPED_MENTION.sub(r"<\1>", text)


def _blocks(m: SlackMessage) -> list[dict[str, Any]]:
    def fix(o: Any) -> Any:
        if isinstance(o, dict):
            if o.get("type") == "mrkdwn" and isinstance(o.get("text"), str):
                return {**o, "text": unescape_mentions(o["text"])}
            return {k: fix(v) for k, v in o.items()}
        if isinstance(o, list):
            return [fix(v) for v in o]
        return o

    return [fix(b) for b in m.block_dicts()]


class SlackNotifier:
    """Posts, edits and ephemeral messages on Slack."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        """Post ``reply`` (in ``thread_ts`` when given); returns the ts of its first message."""
        first: str | None = None
        for m in render_messages(reply):
            ts = await post_message(self.client, channel, thread_ts, m, blocks=_blocks(m))
            first = first or ts
        assert first is not None  # render_messages always yields at least one message
        return first

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        """Rewrite the message ``ts`` with ``reply`` (its first part; edits are short by design)."""
        m = render_messages(reply)[0]
        await update_message(self.client, channel, ts, m, blocks=_blocks(m))

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        """A message only ``user`` sees."""
        await self.client.chat_postEphemeral(channel=channel, user=user, text=text)
