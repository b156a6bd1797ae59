"""The one way a message reaches Slack, for answers and notices alike.

``chat.postMessage`` / ``chat.update`` with the rendered blocks; when Slack refuses the blocks
(``invalid_blocks``, ``msg_blocks_too_long``…) the same message goes again as its plain text, so a reply
that renders badly is still read. The text is escaped by ``bot.slack.blocks`` like the blocks, and every
call says ``parse="none"`` and no ``link_names`` (Slack links no raw URL, ``#channel`` or ``@name`` in it).
Failures raise (``SlackApiError`` / ``SlackClientError`` after slack_sdk's own retry handlers gave up); the
caller decides whether to log, retry later or tell someone.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import SlackMessage

log = logging.getLogger("inferbot.slack")

BLOCKS_REFUSED = frozenset({"invalid_blocks", "msg_blocks_too_long", "invalid_blocks_format"})
"""Slack's errors that mean "these blocks, not this message": retried as plain text."""

def _refused_blocks(e: SlackApiError) -> str | None:
    reason = str(e.response.get("error") or e.response.status_code)
    return reason if reason in BLOCKS_REFUSED else None


async def post_message(client: AsyncWebClient, channel: str, thread_ts: str | None, m: SlackMessage) -> str:
    """Post ``m``; returns the message ts. Refused blocks → its plain text."""
    try:
        resp = await client.chat_postMessage(channel=channel, thread_ts=thread_ts,
                                             blocks=m.blocks, text=m.text,
                                             unfurl_links=False, unfurl_media=False, parse="none",
                                             link_names=False)
    except SlackApiError as e:
        reason = _refused_blocks(e)
        if reason is None:
            raise
        log.warning("Slack refused the blocks; posting the plain text instead",
                    extra={"event": "slack-post", "channel": channel, "reason": reason})
        resp = await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=m.text,
                                             unfurl_links=False, unfurl_media=False, parse="none",
                                             link_names=False)
    return str(resp.get("ts") or "")


async def update_message(client: AsyncWebClient, channel: str, ts: str, m: SlackMessage) -> None:
    """Rewrite message ``ts`` with ``m``. Refused blocks → plain text."""
    try:
        await client.chat_update(channel=channel, ts=ts, blocks=m.blocks, text=m.text, parse="none", link_names=False)
    except SlackApiError as e:
        reason = _refused_blocks(e)
        if reason is None:
            raise
        log.warning("Slack refused the blocks of an edit; editing with the plain text instead",
                    extra={"event": "slack-post", "channel": channel, "reason": reason})
        await client.chat_update(channel=channel, ts=ts, text=m.text, blocks=[], parse="none", link_names=False)
