"""The follow's and the watchers' looks of this process: one at a time per load or node, asked by anyone.

A look is asked for by the scheduler (every ``[watch] poll`` for a load, every ``[watch] interval`` for a
node) and by the journal stream (a line said something happened: ``handlers/push.py``). Two looks at the
same load or node never run at once in this process (they would both judge the same change); a look asked
while one runs is served by one more look after it, however many asked meanwhile. What a look finds goes
out through the notice pipeline as always, exactly once per place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from handlers.context import Context
from handlers.follow import FollowStatus, poll_follow
from handlers.health_watch import check_states
from handlers.notify import Notifier
from handlers.watcher import watch_node
from services.models import ServiceState

T = TypeVar("T")
Seen = Callable[[str, float, list[ServiceState]], None]
"""What a look at a node saw: the node, when the look started (``time.monotonic()``), the states."""


class Coalesced:
    """Runs at most one call per key at a time; callers that ask during a run share the one run after it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._asked: dict[str, int] = {}
        self._started: dict[str, int] = {}
        self._last: dict[str, object] = {}

    async def run(self, key: str, call: Callable[[], Awaitable[T]]) -> T:
        """The result of a run of ``call`` that started after this was asked (this one, or another's)."""
        asked = self._asked[key] = self._asked.get(key, 0) + 1
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self._started.get(key, 0) >= asked:  # a run that started after we asked has just ended
                return self._last[key]  # type: ignore[return-value]
            before = self._started.get(key, 0)
            self._started[key] = self._asked[key]  # this run serves everyone who asked so far
            try:
                result = await call()
            except BaseException:
                self._started[key] = before  # it served nobody: whoever waits runs a look of their own
                raise
            self._last[key] = result
            return result


class Looks:
    """This process's looks at loads and nodes (see the module's text)."""

    def __init__(self, context: Callable[[], Context], notifier: Notifier) -> None:
        self._context = context
        self.notifier = notifier
        self.seen: Seen | None = None  # the journal streams' judge of silence (bot/push.py), when streaming
        self._runs = Coalesced()

    async def follow(self, key: str) -> FollowStatus:
        """One look at the load ``key`` (``service@node``): ``handlers.follow.poll_follow``."""
        return await self._runs.run(f"follow:{key}", lambda: poll_follow(self._context(), key, self.notifier))

    async def watch(self, node: str) -> list[str]:
        """One look at every service of ``node``: unplanned restarts, then the health checks; returns the
        follow keys it started."""
        return await self._runs.run(f"watch:{node}", lambda: self._watch(node))

    async def _watch(self, node: str) -> list[str]:
        started = time.monotonic()
        seen = self.seen

        async def after(ctx: Context, states: list[ServiceState], notifier: Notifier) -> None:
            if seen is not None:
                seen(node, started, states)
            await check_states(ctx, states, notifier)

        return await watch_node(self._context(), node, self.notifier, after=after)
