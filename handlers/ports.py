"""What handlers need of the world outside a reply, as protocols the front ends implement.

``bot/`` provides the Slack notifier (``bot/slack/poster.py``), the APScheduler jobs
(``bot/scheduler.py``) and the App Home dashboards; the terminal and the tests use the notifiers of
``handlers/notify.py``. The composition root puts them into each ``Context``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from handlers.reply import Reply


class Notifier(Protocol):
    """Where notices go. ``post`` returns the message ts (Slack) or a local id; it raises on failure."""

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str: ...
    async def update(self, channel: str, ts: str, reply: Reply) -> None: ...
    async def ephemeral(self, channel: str, user: str, text: str) -> None: ...


class Jobs(Protocol):
    """Scheduling of follow-ups (jobs take only ids, so they survive a restart of the bot)."""

    def follow(self, key: str) -> None: ...
    def stop_follow(self, key: str) -> None: ...
    def expire(self, request_id: str, at: datetime) -> None: ...


class Dashboards(Protocol):
    """The open App Home dashboards: told when something they show changed (they republish, paced)."""

    async def changed(self, what: str) -> None: ...
