"""Scheduled job functions: module-level, taking only ids, so APScheduler can store them by reference.

APScheduler stores a job as ``"bot.jobs:poll_follow_job"`` plus pickled arguments, and a restarted bot
runs it again from the database. The live objects a job needs (runtime, notifier, the scheduler itself)
are not stored: start-up puts them in this module's registry (:func:`register`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from handlers.context import Asker, Context
from handlers.looks import Looks
from handlers.notify import Notifier
from handlers.request_kinds import expire_request, settle_request

if TYPE_CHECKING:
    from bot.app import Runtime

log = logging.getLogger("inferbot.jobs")


class Reconciler(Protocol):
    """What a job needs of the scheduler (bot/scheduler.py imports this module, never the reverse)."""

    first_job_at: float | None  # time.time() of the first job this leader ran (the failover bench reads it)

    @property
    def leading(self) -> bool: ...
    async def reconcile(self) -> list[str]: ...
    def settle(self, kind: str, request_id: str, at: datetime) -> None: ...


class SafetyNet(Protocol):
    """The journal streams' side of the watcher's poll (bot/push.py): whether a node's poll is due now."""

    def due(self, node: str) -> bool: ...


@dataclass
class Live:
    """What jobs run against in this process."""

    runtime: Runtime
    notifier: Notifier
    scheduler: Reconciler | None = None
    running: set[asyncio.Task[None]] = field(default_factory=set)  # the job steps in flight right now
    push: SafetyNet | None = None  # the leader's journal streams, when they run
    looks: Looks = field(init=False)  # every look at a load or a node, scheduled or pushed: one at a time each
    changing: tuple[float, frozenset[str]] = (0.0, frozenset())  # nodes in a settings change, and when read
    settling: set[str] = field(default_factory=set)  # requests whose settle step runs right now

    def __post_init__(self) -> None:
        self.looks = Looks(lambda: _context(self), self.notifier)

    def track(self) -> None:
        """Count the current job step as in flight until it ends (a graceful stop waits for it)."""
        task = asyncio.current_task()
        if task is not None and task not in self.running:
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    async def drain(self, within_s: float) -> int:
        """Wait up to ``within_s`` for the steps in flight to end; returns how many were still running."""
        pending = {t for t in self.running if not t.done()}
        if pending:
            _done, pending = await asyncio.wait(pending, timeout=within_s)
        return len(pending)


_live: Live | None = None


def register(live: Live) -> None:
    """Make ``live`` the objects every job of this process uses (one bot per process)."""
    global _live
    _live = live


def unregister(live: Live | None = None) -> None:
    """Forget the registered objects (only ``live``'s, when given)."""
    global _live
    if live is None or _live is live:
        _live = None


def current() -> Live | None:
    """The registered objects, if any."""
    return _live


def _leading() -> Live | None:
    """The live objects, if this replica may run scheduled steps now (fencing: a lost leader may not)."""
    live = _live
    if live is None:
        return None
    sched = live.scheduler
    if sched is not None:
        if not sched.leading:
            log.info("scheduled step skipped: not the leader", extra={"event": "leader", "role": "standby"})
            return None
        if sched.first_job_at is None:
            sched.first_job_at = time.time()
    live.track()
    return live


def _context(live: Live) -> Context:
    # Jobs act as the bot itself; handlers name it "inferbot" in the audit log.
    return live.runtime.context(Asker(surface="json"))


async def poll_follow_job(key: str) -> None:
    """Follow the load ``key`` (``service@node``) one more step."""
    if current() is None:
        log.warning("follow job %s ran before start-up registered the runtime", key)
        return
    live = _leading()
    if live is None:
        return
    status = await live.looks.follow(key)
    log.debug("follow %s: %s", key, status.line)


async def watch_node_job(node: str) -> None:
    """Look for unplanned restarts and hidden deaths on ``node``.

    Loads started elsewhere are picked up by ``reconcile_job`` (every ``RECONCILE_S``), not here: with a
    watcher per node, reconciling on every poll read the follows and requests hundreds of times a minute.
    """
    live = _leading()
    if live is None:
        return
    if live.push is not None and not live.push.due(node) and node not in await _changing(live):
        return  # its journal stream is up: the poll is the safety net, every [watch] safety_interval
    await live.looks.watch(node)


async def _changing(live: Live) -> frozenset[str]:
    """The nodes a settings change is running on, read at most every half ``[watch] interval``: a change's
    verification reads the watcher's notices (unhealthy, hung), which no journal line announces, so those nodes
    are polled every ``interval`` whatever their stream says."""
    at, nodes = live.changing
    store = live.runtime.store
    if store is None or time.monotonic() - at < live.runtime.config.watch.interval / 2:
        return nodes
    nodes = frozenset(s.node for ch in await store.changes.running() for s in ch.steps)
    live.changing = (time.monotonic(), nodes)
    return nodes


async def expire_request_job(request_id: str) -> None:
    """Expire a confirmable request (of any kind) nobody confirmed, and rewrite its message."""
    live = _leading()
    if live is None:
        return
    await expire_request(_context(live), request_id, live.notifier)


async def reconcile_job() -> None:
    """Pick up follows and requests another replica (or the terminal) started: only the leader schedules."""
    live = _leading()
    if live is not None and live.scheduler is not None:
        await live.scheduler.reconcile()


async def settle_request_job(request_id: str) -> None:
    """Finish a confirmable request (of any kind) a stopped process may have left confirmed or running."""
    live = _leading()
    if live is None:
        return
    live.settling.add(request_id)
    try:
        again = await settle_request(_context(live), request_id, live.notifier)
    finally:
        live.settling.discard(request_id)
    if again is not None and live.scheduler is not None:
        live.scheduler.settle(again.kind, request_id, again.at)


async def settle_bench_job(request_id: str) -> None:
    """:func:`settle_request_job` by the path an older inferbot stored its benchmark jobs under."""
    await settle_request_job(request_id)
