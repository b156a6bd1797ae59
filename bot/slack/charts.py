"""A reply's chart into the asking thread: drawn off the event loop, uploaded with ``files_upload_v2``.

``files_upload_v2`` is Slack's external upload flow: ``files.getUploadURLExternal`` (name, length,
alt text) → POST the bytes to the ``upload_url`` it returns → ``files.completeUploadExternal`` with
the channel and thread. The text summary is already in the thread (the reply's own message).
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import escape
from handlers.reply import Reply

log = logging.getLogger("inferbot.slack")
ALT_TEXT_MAX = 1000  # Slack's limit for a file's alt text


async def upload_chart(client: AsyncWebClient, channel: str, thread_ts: str | None, reply: Reply) -> bool:
    """Draw ``reply.chart`` and upload it into ``channel`` (in ``thread_ts``); False (logged) on failure."""
    chart = reply.chart
    if chart is None:
        return True
    from bot.render_chart import render_png  # matplotlib only when a chart is drawn

    try:
        png = await asyncio.to_thread(render_png, chart)
    except Exception:
        log.exception("drawing the chart failed", extra={"event": "slack-chart", "intent": reply.intent})
        return await _say(client, channel, thread_ts, "Sorry — I could not draw that chart (logged).")
    try:
        await client.files_upload_v2(channel=channel, thread_ts=thread_ts, content=png, filename=chart.filename,
                                     title=chart.title, alt_txt=chart.alt_text[:ALT_TEXT_MAX])
        return True
    except (TimeoutError, SlackApiError, SlackClientError, OSError) as e:
        reason = str(e.response.get("error")) if isinstance(e, SlackApiError) else type(e).__name__
        log.warning("chart upload failed", extra={"event": "slack-chart", "channel": channel, "reason": reason})
    hint = " (invite me to the channel, or ask in a DM)" if reason in ("not_in_channel", "channel_not_found") else ""
    return await _say(client, channel, thread_ts, f"I could not upload the chart: {reason}{hint}.")


async def _say(client: AsyncWebClient, channel: str, thread_ts: str | None, text: str) -> bool:
    try:
        await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=escape(text), parse="none",
                                      link_names=False)
    except (TimeoutError, SlackClientError, OSError):
        log.warning("could not say the chart failed", extra={"event": "slack-chart", "channel": channel})
    return False
