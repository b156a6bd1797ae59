"""What reaches the listeners: bots, our own messages and edits are acked, not answered; people of another
workspace get one line and nothing else; each person's questions are rate limited; a message's Slack markup
is read once, by ``bot.understanding.markup``.

Nothing here touches the state store, so nothing here can hold an ack: the de-duplication of events (the
claim of an event id, shared by replicas) is made after the ack, by the listeners (``SlackBot.first_delivery``).
A Slack retry (``X-Slack-Retry-Num`` / Socket Mode ``retry_attempt``) is answered like a first delivery
unless its event id was already claimed.

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

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.slack.manifest import Registrar

log = logging.getLogger("inferbot.slack")


class Gate(Protocol):
    """What the middleware needs from the Slack bot: whose workspaces it serves, and how it refuses others."""

    def allowed_teams(self, context: AsyncBoltContext) -> frozenset[str]: ...

    async def refuse_other_workspace(self, body: dict[str, Any], context: AsyncBoltContext) -> BoltResponse: ...


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


def ignored_reason(body: dict[str, Any], context: AsyncBoltContext) -> str | None:
    """Why an Events API delivery gets no answer, or None to answer it (a retry is answered: its claim decides)."""
    if body.get("type") != "event_callback":
        return None
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


def actor_teams(body: dict[str, Any], context: AsyncBoltContext) -> set[str]:
    """Every workspace (or Enterprise Grid org) id the request gives for the person acting.

    Bolt's ``actor_team_id`` reads Slack Connect's ``user_team``/``team``; the raw fields are read too, so a
    field Bolt does not consult still counts (all of them must be allowed).
    """
    found: set[str] = set()

    def add(v: object) -> None:
        if isinstance(v, str) and v:
            found.add(v)

    add(context.actor_team_id)
    event = body.get("event")
    if isinstance(event, dict):
        for key in ("user_team", "source_team", "team"):
            add(event.get(key))
    else:
        add(body.get("team_id"))  # slash commands
        user, team = body.get("user"), body.get("team")
        if isinstance(user, dict):
            add(user.get("team_id"))  # interactivity: the clicker's own workspace
        if isinstance(team, dict):
            add(team.get("id"))
    return found


def other_workspace(body: dict[str, Any], context: AsyncBoltContext, allowed: frozenset[str]) -> str | None:
    """The first workspace id of the person acting that is not in ``allowed`` (``"unknown"`` when a Slack
    Connect event does not say which it is), or None when the request may be answered."""
    if body.get("type") not in ("event_callback", "block_actions", "view_submission", "view_closed") \
            and "command" not in body:
        return None  # url_verification and the like: nobody is asking anything
    if context.actor_enterprise_id and context.actor_enterprise_id in allowed:
        return None
    teams = actor_teams(body, context)
    for team in sorted(teams):
        if team not in allowed:
            return team
    if not teams and body.get("is_ext_shared_channel"):
        return "unknown"  # a connected workspace Slack does not name: refused rather than guessed
    return None


def register(app: Registrar, bot: Gate) -> None:
    """Install the middleware that acks, without answering, what must not be answered."""

    async def gate(req: AsyncBoltRequest, body: dict[str, Any], context: AsyncBoltContext,
                   next_: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        reason = ignored_reason(body, context)
        if reason is None:
            team = other_workspace(body, context, bot.allowed_teams(context))
            if team is not None:
                log.info("slack request from another workspace refused",
                         extra={"event": "slack-refused", "reason": "other-workspace", "team": team,
                                "user": context.actor_user_id or context.user_id})
                return await bot.refuse_other_workspace(body, context)
            await next_()
            return None
        event = body.get("event") or {}
        log.debug("slack event ignored", extra={"event": "slack-ignored", "reason": reason,
                                                 "type": event.get("type"), "user": event.get("user")})
        return await context.ack()

    app.middleware(gate)
