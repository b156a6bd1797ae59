"""What reaches the listeners: redeliveries, bots, our own messages and duplicates are acked, not answered;
each person's questions are rate limited. (A message's Slack markup is read once, by ``bot.understanding.markup``.)

With a state store the de-duplication and the rate limit are rows in the database (``services.store.shared_state``),
so every replica sees the same; ``TtlSet`` and ``RateLimiter`` are the in-memory ones (no store).
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

log = logging.getLogger("inferbot.slack")


class Deliveries(Protocol):
    """Who remembers which events were answered (``SlackBot``: in the store, across replicas)."""

    async def first_delivery(self, event_id: str) -> bool: ...


class TtlSet:
    """Remembers keys for ``ttl`` seconds (at most ``size`` of them): same event id twice → one answer."""

    def __init__(self, ttl: float = 600.0, size: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def add(self, key: str) -> bool:
        """Record ``key``; False if it was already seen within the TTL."""
        now = self.clock()
        while self._seen and (next(iter(self._seen.values())) < now - self.ttl or len(self._seen) > self.size):
            self._seen.popitem(last=False)
        if key in self._seen:
            return False
        self._seen[key] = now
        return True


@dataclass
class Verdict:
    allowed: bool
    retry_in: int = 0
    notify: bool = False  # over the limit and not yet told so in this window


class RateLimiter:
    """At most ``per_minute`` answers per user in any 60 s; the first refusal in a window is answered."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute, self.clock = per_minute, clock
        self._hits: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}

    def check(self, user: str) -> Verdict:
        now = self.clock()
        hits = self._hits.setdefault(user, deque())
        while hits and hits[0] <= now - 60.0:
            hits.popleft()
        if len(hits) < self.per_minute:
            hits.append(now)
            self._told.pop(user, None)
            return Verdict(True)
        retry_in = max(1, math.ceil(hits[0] + 60.0 - now))
        told = self._told.get(user)
        notify = told is None or told <= now - 60.0
        if notify:
            self._told[user] = now
        return Verdict(False, retry_in, notify)


def rate_limit_text(retry_in: int) -> str:
    return f"You're asking faster than I can SSH — try again in {retry_in} s. :hourglass_flowing_sand:"


_ALLOWED_SUBTYPES = {None, "file_share", "thread_broadcast"}


def _retry_num(req: AsyncBoltRequest) -> int:
    values = req.headers.get("x-slack-retry-num") or []
    value = values[0] if values else None
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def ignored_reason(body: dict[str, Any], req: AsyncBoltRequest, context: AsyncBoltContext) -> str | None:
    """Why an Events API delivery gets no answer, or None to answer it."""
    if body.get("type") != "event_callback":
        return None
    # Socket Mode's first delivery carries retry_attempt 0 (header "0"); only > 0 is a redelivery.
    if _retry_num(req) > 0:
        return "retry"
    event = body.get("event") or {}
    if event.get("bot_id") or event.get("subtype") not in _ALLOWED_SUBTYPES:
        return "bot-or-subtype"
    if context.bot_user_id and event.get("user") == context.bot_user_id:
        return "self"
    if not event.get("user"):
        return "no-user"
    if event.get("type") == "message" and event.get("channel_type") != "im":
        return "not-a-dm"
    return None


def register(app: AsyncApp, bot: Deliveries) -> None:
    """Install the middleware that acks, without answering, what must not be answered."""

    @app.middleware
    async def ignore_noise(req: AsyncBoltRequest, body: dict[str, Any], context: AsyncBoltContext,
                           next_: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        reason = ignored_reason(body, req, context)
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if reason is None and event_id and not await bot.first_delivery(str(event_id)):
            reason = "duplicate"  # another replica (or an earlier delivery) took it
        if reason is None:
            await next_()
            return None
        event = body.get("event") or {}
        log.debug("slack event ignored", extra={"event": "slack-ignored", "reason": reason,
                                                 "type": event.get("type"), "user": event.get("user")})
        if reason in ("retry", "duplicate"):
            log.info("slack event ignored", extra={"event": "slack-ignored", "reason": reason,
                                                   "user": event.get("user"), "event_id": body.get("event_id")})
        ack: AsyncAck = context.ack
        return await ack()
