"""The one progress message of a followed load, in the restart's thread: posted once, then edited.

Posting it is a notice like the others (``handlers/notice_pipeline.py``: once per load, across replicas and
restarts; its ts is kept on the follow). Editing it is not: an edit says nothing new to anyone, it only
keeps one message current, so it is paced by a claim of its own in the store (``StateStore.shared``: never
more often than ``PROGRESS_MIN_INTERVAL_S`` whoever polls) and a failed edit is simply made again later.
"""

from __future__ import annotations

import logging
from datetime import datetime

from handlers.common import fmt_duration
from handlers.context import Context, require_store
from handlers.notice_pipeline import Notice, Where, deliver
from handlers.notice_words import progress_reply, progress_text
from handlers.ports import Notifier
from services.models import ServiceState
from services.store.records import Follow

log = logging.getLogger("inferbot.follow")

PROGRESS_MIN_INTERVAL_S = 15.0
"""The progress message is edited at most this often (or when the phase changes): Slack's
``chat.update`` is a tier-3 method (~50/min per workspace) and people don't need more."""
ENDED = {"ready": "load finished after", "failed": "load ended after", "timeout": "stopped following after"}
"""The last edit's words: the notice carries the contract words (✅ is ready / ❌ failed), this must not repeat them."""


async def show_progress(ctx: Context, f: Follow, st: ServiceState, notifier: Notifier, now: datetime) -> Follow:
    """Post the progress message in the thread (once), or edit it (paced); returns the follow with its ts."""
    channel = f.thread_channel
    if not channel:
        return f
    store = require_store(ctx)
    reply = progress_reply(f, progress_text(f, st, now))
    if f.progress_message_ts is None:
        out = await deliver(ctx, notifier, Notice(f.key, Where("progress", channel, f.thread_ts), reply, f.service,
                                                  f.node), now)
        if out.done and out.ts:
            await store.follows.set_message(f.key, out.ts)
            f = f.model_copy(update={"progress_message_ts": out.ts})
            await store.shared.claim_progress_edit(f.key, st.phase, PROGRESS_MIN_INTERVAL_S, now)  # just posted
        return f
    # Pacing is a claim in the store: a new leader (or two pollers) never edits more often than this.
    if not await store.shared.claim_progress_edit(f.key, st.phase, PROGRESS_MIN_INTERVAL_S, now):
        return f
    try:
        await notifier.update(channel, f.progress_message_ts, reply)
    except Exception:
        log.warning("updating the progress message of %s failed", f.key, exc_info=True)
        await store.shared.release_progress_edit(f.key)
    return f


async def end_progress(ctx: Context, f: Follow, outcome: str, notifier: Notifier, now: datetime) -> None:
    """The last edit of the progress message, once the load ended (the notice itself is posted apart)."""
    fresh = await require_store(ctx).follows.get(f.key)
    if fresh is None or not fresh.progress_message_ts or not fresh.thread_channel:
        return
    took = fmt_duration((now - f.started_at).total_seconds())
    text = f"{f.service} on {f.node}: {ENDED.get(outcome, 'ended after')} {took} — see the notice"
    try:
        await notifier.update(fresh.thread_channel, fresh.progress_message_ts,
                              progress_reply(f, text, "ok" if outcome == "ready" else "error"))
    except Exception:
        log.warning("final edit of the progress message of %s failed", f.key, exc_info=True)
