"""Exactly-once notices: claim (an atomic insert) → post → mark sent, per (follow, place).

A failed post releases the claim so the next poll retries; a claim its claimer never finished (the process
died mid-post) is taken over after ``CLAIM_STALE_S``. Works across polls, bot restarts and replicas,
because the claim is a row in the store.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from handlers.context import Context
from handlers.notify import Notifier
from handlers.reply import Reply
from services.store.ports import Notices
from services.store.records import Follow

log = logging.getLogger("inferbot.follow")

CLAIM_STALE_S = 120.0
"""A notice claimed but not marked sent for this long belongs to a process that died mid-post."""


async def post_once(notices: Notices, key: str, place: str, notifier: Notifier, channel: str,
                    thread_ts: str | None, reply: Reply, now: datetime) -> str | None:
    """Post ``reply`` once for (follow ``key``, ``place``) across polls, restarts and replicas.

    Returns "sent" when it is (now or already) posted, None when it must be retried later.
    """
    if await notices.sent(key, place):
        return "sent"
    if not await notices.claim(key, place):
        claim = await notices.get(key, place)
        if claim is None or claim.sent_at is not None:
            return "sent" if claim is not None else None
        if (now - claim.claimed_at).total_seconds() < CLAIM_STALE_S:
            return None  # someone else is posting right now (or just crashed): look again next poll
        # The claimer died between claiming and posting: take over.
        await notices.release(key, place)
        if not await notices.claim(key, place):
            return None
    try:
        ts = await notifier.post(channel, thread_ts, reply)
    except Exception:
        log.warning("posting the %s notice of %s failed; will retry", place, key, exc_info=True)
        # Slack said no, so nothing was posted: the release must happen even if this step is being
        # cancelled (a stopping bot), or the notice waits CLAIM_STALE_S for the next process.
        await asyncio.shield(notices.release(key, place))
        return None
    await notices.mark_sent(key, place, ts)
    return "sent"


def places(ctx: Context, f: Follow) -> list[tuple[str, str, str | None]]:
    """Where the final notice goes: the thread the restart was asked in, and the notify channel."""
    out: list[tuple[str, str, str | None]] = []
    if f.reason == "restart" and f.thread_channel:
        out.append(("thread", f.thread_channel, f.thread_ts))
    if ctx.config.notify.channel:
        out.append(("notify", ctx.config.notify.channel, None))
    return out
