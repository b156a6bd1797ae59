"""How handlers speak outside a reply: post, update and ephemeral messages, and scheduling follow-ups.

Handlers only see the protocols of ``handlers/ports.py`` (typed fields of ``Context``); ``bot/`` provides the Slack
implementation (``bot/slack/poster.py``) and the APScheduler one (``bot/scheduler.py``). The
recording and printing notifiers here serve the terminal and the tests.
"""

from __future__ import annotations

import itertools
import logging
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from handlers.ports import Dashboards, Jobs, Notifier
from handlers.reply import Reply
from services import mentions

__all__ = ["Dashboards", "Jobs", "Notifier", "PrintNotifier", "RecordingNotifier"]

if TYPE_CHECKING:
    from handlers.context import Context
    from services.access import GroupLookup

def notice_text(reply: Reply) -> str:
    """The one-line notice a reply stands for (``data["notice"]`` when set, else the title)."""
    return str(reply.data.get("notice") or reply.title)


@dataclass
class Posted:
    """One message as a recording notifier keeps it."""

    channel: str
    thread_ts: str | None
    ts: str
    reply: Reply
    updates: list[Reply] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The current text (after updates)."""
        return notice_text(self.updates[-1] if self.updates else self.reply)


class RecordingNotifier:
    """Keeps every message in memory; ``fail_next`` makes the next N posts raise (an outage)."""

    def __init__(self) -> None:
        self.posts: list[Posted] = []
        self.ephemerals: list[tuple[str, str, str]] = []
        self.fail_next = 0
        self.failures = 0
        self._ids = itertools.count(1)

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        """Record a post (or fail, when an outage is being simulated)."""
        if self.fail_next > 0:
            self.fail_next -= 1
            self.failures += 1
            raise ConnectionError("simulated outage")
        ts = f"{1700000000 + next(self._ids)}.000100"
        self.posts.append(Posted(channel=channel, thread_ts=thread_ts, ts=ts, reply=reply))
        return ts

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        """Record an update of an earlier post."""
        for p in self.posts:
            if p.ts == ts and p.channel == channel:
                p.updates.append(reply)
                return
        self.posts.append(Posted(channel=channel, thread_ts=None, ts=ts, reply=reply, updates=[reply]))

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        """Record an ephemeral message."""
        self.ephemerals.append((channel, user, text))

    def texts(self, channel: str | None = None, thread_ts: str | None = None) -> list[str]:
        """Current texts of posts, optionally only in ``channel`` / ``thread_ts``."""
        return [p.text for p in self.posts
                if (channel is None or p.channel == channel) and (thread_ts is None or p.thread_ts == thread_ts)]


class PrintNotifier(RecordingNotifier):
    """The terminal's notifier: records like the recording one and prints each notice as a line."""

    def __init__(self, out: TextIO | None = None) -> None:
        super().__init__()
        self._out = out or sys.stdout

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        """Print the notice line."""
        ts = await super().post(channel, thread_ts, reply)
        print(mentions.plain(notice_text(reply)), file=self._out, flush=True)
        return ts


def notifier_of(ctx: Context) -> Notifier | None:
    """The notifier injected into ``ctx`` (None when the front end has none)."""
    return ctx.notifier


def jobs_of(ctx: Context) -> Jobs | None:
    """The job scheduler injected into ``ctx`` (None outside ``serve``)."""
    return ctx.jobs


def groups_of(ctx: Context) -> GroupLookup:
    """The user-group lookup injected into ``ctx`` (no groups when none was given)."""
    return ctx.groups


async def dashboards_changed(ctx: Context, what: str) -> None:
    """Tell the open dashboards that ``what`` (e.g. ``kimi@gpu-a``) changed; never raises into the caller."""
    d = ctx.dashboards
    if d is None:
        return
    try:
        await d.changed(what)
    except Exception:  # a dashboard that cannot be refreshed must not stop a follow or the watcher
        logging.getLogger("inferbot.home").warning("could not refresh the dashboards", exc_info=True)
