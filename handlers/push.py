"""What a node's journal says, turned into looks now instead of at the next poll (issue 26).

A journal line is a reason to look, never the verdict: the looks are the follow's and the watchers' own
(``handlers/looks.py``), with their probes and checks, and every notice still goes through the notice
pipeline. So a line read twice, or late, costs a look and nothing else.

- the service manager's lines about a unit (started, stopped, main process exited, failed, restart
  scheduled, deactivated) and an engine's death → the watcher looks at the node (unplanned restarts,
  crashes whatever ``RestartSec=``, exit 0 after an engine death), then the loads it started are looked at;
- "Application startup complete." and the load's own failures → the followed load is looked at (the ✅
  needs ``/health`` and the smoke completion as always; ``/health`` may answer a moment after the line, so
  the look is made again a few times, shortly after, until the load is over);
- a systemd line about a followed unit → that load is looked at too (a load that failed says ❌ at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from handlers.context import Context
from handlers.follow import follow_key
from handlers.looks import Looks
from services.parse.journal import JournalEntry

log = logging.getLogger("inferbot.push")

READY_RETRIES_S = (0.1, 0.2, 0.4, 0.8)
"""After a readiness line, the load is looked at again after these pauses while it is not over (the API
server logs the line just before its socket listens)."""
HEALTH_RECHECK_S = 2.0
"""After an engine's death line, the node is looked at again this often until the health watcher has had
``[watch] unhealthy_polls`` looks (a server kept alive with a dead engine is ⚠️ unhealthy)."""
WATCH_EVENTS = frozenset({"main_exited", "unit_changed", "engine_died"})
FOLLOW_EVENTS = frozenset({"ready", "load_failed", "main_exited", "unit_changed"})

Later = Callable[[Awaitable[None]], None]
"""Runs looks that follow up on a batch on their own (the stream's owner keeps and ends them)."""


async def on_entries(ctx: Context, looks: Looks, node: str, entries: list[JournalEntry],
                     later: Later | None = None) -> None:
    """Look at what ``entries`` (of ``node``'s journal, in order) say happened; returns once the looks are done.

    The health watcher's further looks after an engine's death are handed to ``later``: waiting for them here
    would hold back the next lines (the ``Deactivated`` of an exit 0 comes a moment after the death). Without
    ``later`` they are awaited here too.
    """
    units = {s.unit: s for s in ctx.config.services_on(node)}
    watch = died = False
    follows: dict[str, bool] = {}  # follow key → a readiness line was among its entries
    for entry in entries:
        service = units.get(entry.unit)
        if service is None or entry.event is None:
            continue
        if entry.event in WATCH_EVENTS:
            watch = True
            died = died or entry.event == "engine_died"
        if entry.event in FOLLOW_EVENTS:
            key = follow_key(service.name, node)
            follows[key] = follows.get(key, False) or entry.event == "ready"
    if watch:
        for key in await looks.watch(node):  # an unplanned restart or a crash: its ⚠️ now, not at the next poll
            follows.setdefault(key, False)
    if follows:
        await asyncio.gather(*(_follow(ctx, looks, key, ready) for key, ready in follows.items()))
    if died and ctx.config.watch.unhealthy_polls > 1:
        rechecks = _health_rechecks(looks, node, ctx.config.watch.unhealthy_polls - 1)
        if later is None:
            await rechecks
        else:
            later(rechecks)


async def _health_rechecks(looks: Looks, node: str, times: int) -> None:
    for _ in range(times):
        await asyncio.sleep(HEALTH_RECHECK_S)
        await looks.watch(node)


async def _follow(ctx: Context, looks: Looks, key: str, ready: bool) -> None:
    if ctx.store is None:
        return
    f = await ctx.store.follows.get(key)
    if f is None or not f.active:
        return  # nobody follows this load: the watcher's look (if any) said what there was to say
    status = await looks.follow(key)
    for pause in READY_RETRIES_S if ready else ():
        if status.finished or status.outcome is not None:
            return
        await asyncio.sleep(pause)
        status = await looks.follow(key)
