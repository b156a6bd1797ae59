"""A reply's chart into the asking thread: drawn off the event loop, uploaded through the Poster.

The upload is ``files_upload_v2``, Slack's external upload flow: ``files.getUploadURLExternal`` (name,
length, alt text) → POST the bytes to the ``upload_url`` it returns → ``files.completeUploadExternal``
with the channel and thread. The text summary is already in the thread (the reply's own message).
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError

from bot.slack.poster import SLACK_ERRORS, Poster, Where
from handlers.reply import Reply

log = logging.getLogger("inferbot.slack")
ALT_TEXT_MAX = 1000  # Slack's limit for a file's alt text


async def upload_chart(poster: Poster, where: Where, reply: Reply) -> bool:
    """Draw ``reply.chart`` and upload it into ``where``'s thread; False when it could not be (said there)."""
    chart = reply.chart
    if chart is None:
        return True
    thread = Where(where.channel, where.thread_ts)  # a chart's failure is said in the thread, as the chart goes
    from bot.render_chart import render_png  # matplotlib only when a chart is drawn

    try:
        png = await asyncio.to_thread(render_png, chart)
    except Exception:
        log.exception("drawing the chart failed", extra={"event": "slack-chart", "intent": reply.intent})
        await poster.line(thread, "Sorry — I could not draw that chart (logged).")
        return False
    try:
        await poster.upload(where.channel, where.thread_ts, content=png, filename=chart.filename, title=chart.title,
                            alt_text=chart.alt_text[:ALT_TEXT_MAX])
        return True
    except SLACK_ERRORS as e:
        reason = str(e.response.get("error")) if isinstance(e, SlackApiError) else type(e).__name__
        log.warning("chart upload failed", extra={"event": "slack-chart", "channel": where.channel, "reason": reason})
    hint = " (invite me to the channel, or ask in a DM)" if reason in ("not_in_channel", "channel_not_found") else ""
    await poster.line(thread, f"I could not upload the chart: {reason}{hint}.")
    return False
