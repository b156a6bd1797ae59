"""The one way a notice leaves the bot: a pipeline of small stages, each with one job.

already done → silence → someone to post → claim → post → settle (mark sent, or release to retry)

A :class:`Notice` is one message for one place (the restart's thread, the notify channel), named by a key
and a place that make it exactly once: the claim is a row in the store (``StateStore.notices``), so it holds
across polls, bot restarts, leader changes and replicas. Each stage either hands the notice on (returns
None) or ends its delivery with a :class:`Delivered` outcome, like Alertmanager's notify pipeline (mute,
dedup, retry, set-notifies), without its in-process retries: a notice that could not be posted is retried
by whoever delivers it next — the next poll, or a pushed event — and the words are the caller's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from handlers.audit import record
from handlers.context import Context
from handlers.notify import notice_text
from handlers.ports import Notifier
from handlers.reply import Reply
from handlers.silence import silence_words
from services.store.ports import Notices, StateStore
from services.store.records import Notice as ClaimRow

log = logging.getLogger("inferbot.notices")

CLAIM_STALE_S = 120.0
"""A notice claimed but not marked sent for this long belongs to a process that died mid-post."""
HELD_TS = "silenced"
"""The ``ts`` recorded for a notice a silence held back (it is done for that place, and never posted)."""
MAY_BE_SILENCED = frozenset({"unplanned", "unhealthy", "hung"})
"""The kinds a silence holds back: the news it is set for. Failures and answers to a person are always posted."""


@dataclass(frozen=True, slots=True)
class Where:
    """Where a notice goes: its place (the exactly-once name: ``thread``, ``notify``, ``bench:thread``,
    ``unhealthy:<start>:<since>``…), the channel and the thread in it."""

    place: str
    channel: str
    thread_ts: str | None = None


@dataclass(frozen=True, slots=True)
class Notice:
    """One notice for one place: what it is about (``key``), where, the words (``reply``), whose it is."""

    key: str
    """A follow key (``kimi@gpu-a``), ``health:kimi@gpu-a``, ``bench:<request>``, ``restart:<request>``."""
    where: Where
    reply: Reply
    service: str
    node: str
    closes_held: bool = False
    """The ✅ that ends a notice a silence held back (its ⚠️): held too, whether or not the silence still runs."""
    details: Callable[[], Awaitable[Reply]] | None = None
    """The whole message, built only when it is about to be posted (the journal lines cost a probe)."""

    @property
    def kind(self) -> str:
        """``ready``, ``failed``, ``unplanned``, ``unhealthy``, ``bench.ok``… (the reply's ``data["kind"]``)."""
        return str(self.reply.data.get("kind") or "")

    @property
    def text(self) -> str:
        """The one-line notice (the contract words)."""
        return notice_text(self.reply)


class Outcome(StrEnum):
    """How one delivery ended."""

    SENT = "sent"
    ALREADY_SENT = "already_sent"
    HELD = "held"
    """Held back by a silence (audited as ``notice.suppressed`` once), or closing a notice that was."""
    RETRY = "retry"
    """The post failed and the claim was released: the next delivery tries again."""
    BUSY = "busy"
    """Another process claimed it moments ago and is posting it."""
    NOT_HERE = "not_here"
    """This process cannot post (the terminal): left to one that can, claiming nothing."""


@dataclass(frozen=True, slots=True)
class Delivered:
    """The outcome of a delivery, and the message's ts when it is posted (now or earlier)."""

    outcome: Outcome
    ts: str | None = None

    @property
    def done(self) -> bool:
        """Nothing is left to do for this notice in this place."""
        return self.outcome in (Outcome.SENT, Outcome.ALREADY_SENT, Outcome.HELD)


@dataclass(slots=True)
class Delivery:
    """A notice on its way through the stages (what the post stage learned rides to the settle stage)."""

    ctx: Context
    store: StateStore
    notifier: Notifier | None
    notice: Notice
    now: datetime
    ts: str | None = None
    failed: bool = False


Stage = Callable[[Delivery], Awaitable[Delivered | None]]
"""Ends the delivery with an outcome, or hands it on (None)."""


def _earlier(row: ClaimRow) -> Delivered:
    """A notice an earlier delivery finished: posted (with its ts), or held back by a silence."""
    return Delivered(Outcome.HELD) if row.ts == HELD_TS else Delivered(Outcome.ALREADY_SENT, row.ts)


async def already_done(d: Delivery) -> Delivered | None:
    """Posted before, or held back before: said once, never again."""
    row = await d.store.notices.get(d.notice.key, d.notice.where.place)
    return None if row is None or row.sent_at is None else _earlier(row)


async def silence(d: Delivery) -> Delivered | None:
    """A silenced kind while its service is silenced (or the ✅ of a held ⚠️): held, and audited once."""
    n = d.notice
    if n.kind not in MAY_BE_SILENCED and not n.closes_held:
        return None
    s = await d.store.silences.active_for(n.service, n.node, d.now)
    if s is None and not n.closes_held:
        return None
    if await d.store.notices.claim(n.key, n.where.place):
        await d.store.notices.mark_sent(n.key, n.where.place, HELD_TS)
        if s is not None:
            await record(d.ctx, "notice.suppressed", n.service, n.node, f"{n.text} — not posted: {silence_words(s)}",
                         who="inferbot", where=d.ctx.config.notify.channel or "inferbot")
    return Delivered(Outcome.HELD)


async def someone_to_post(d: Delivery) -> Delivered | None:
    """Without a notifier (the terminal) nothing is claimed: a process that can post will."""
    return Delivered(Outcome.NOT_HERE) if d.notifier is None else None


async def claim(d: Delivery) -> Delivered | None:
    """The right to post, once per (key, place); a claim whose claimer died mid-post is taken over."""
    notices, key, place = d.store.notices, d.notice.key, d.notice.where.place
    if await notices.claim(key, place):
        return None
    row = await notices.get(key, place)
    if row is None:
        return Delivered(Outcome.BUSY)  # released between the two reads: the next delivery claims it
    if row.sent_at is not None:
        return _earlier(row)
    if (d.now - row.claimed_at).total_seconds() < CLAIM_STALE_S:
        return Delivered(Outcome.BUSY)
    await notices.release(key, place)
    return None if await notices.claim(key, place) else Delivered(Outcome.BUSY)


async def post(d: Delivery) -> Delivered | None:
    """Post it through the front end's notifier; a failure is noted for the settle stage."""
    assert d.notifier is not None  # someone_to_post saw to it
    n = d.notice
    try:
        reply = await n.details() if n.details is not None else n.reply
        d.ts = await d.notifier.post(n.where.channel, n.where.thread_ts, reply)
    except Exception:
        log.warning("posting the %s notice of %s failed; will retry", n.where.place, n.key, exc_info=True)
        d.failed = True
    return None


async def settle(d: Delivery) -> Delivered | None:
    """Mark it sent, or give the claim back so that the next delivery posts it."""
    key, place = d.notice.key, d.notice.where.place
    if d.failed:
        # Slack said no, so nothing was posted: the release must happen even if this step is being
        # cancelled (a stopping bot), or the notice waits CLAIM_STALE_S for the next process.
        await asyncio.shield(d.store.notices.release(key, place))
        return Delivered(Outcome.RETRY)
    await d.store.notices.mark_sent(key, place, d.ts)
    return Delivered(Outcome.SENT, d.ts)


PIPELINE: tuple[Stage, ...] = (already_done, silence, someone_to_post, claim, post, settle)


async def deliver(ctx: Context, notifier: Notifier | None, notice: Notice, now: datetime | None = None) -> Delivered:
    """Take ``notice`` through the pipeline once; ``notifier`` None: decide, but leave the posting."""
    if ctx.store is None:
        raise RuntimeError("a notice needs the state store (its claim is a row there)")
    d = Delivery(ctx, ctx.store, notifier, notice, ctx.now() if now is None else now)
    for stage in PIPELINE:
        out = await stage(d)
        if out is not None:
            return out
    raise AssertionError("the settle stage always ends a delivery")  # pragma: no cover


async def deliver_all(ctx: Context, notifier: Notifier | None, notices: Iterable[Notice],
                      now: datetime | None = None) -> list[Delivered]:
    """Deliver each notice in turn (one per place, in order): the outcome of each."""
    return [await deliver(ctx, notifier, notice, now) for notice in notices]


def all_done(outcomes: Iterable[Delivered]) -> bool:
    """Nothing is left to do in any place (also when there was no place)."""
    return all(out.done for out in outcomes)


def any_held(outcomes: Iterable[Delivered]) -> bool:
    """A silence held the notice back (in some place)."""
    return any(out.outcome is Outcome.HELD for out in outcomes)


def to_notify(ctx: Context, place: str) -> list[Where]:
    """The notify channel as the one place of a notice (none when ``[notify] channel`` is not set)."""
    channel = ctx.config.notify.channel
    return [Where(place, channel)] if channel else []


async def was_held(notices: Notices, key: str, place: str) -> bool:
    """True when the notice of ``key`` in ``place`` was held back by a silence (not posted)."""
    row = await notices.get(key, place)
    return row is not None and row.ts == HELD_TS
