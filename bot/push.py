"""The scheduler leader's journal streams (issue 26): push, with the polls as the safety net.

While this replica leads, one :class:`~services.node.journal_stream.NodeJournal` per node follows the
journal of every configured unit on it; what its lines say becomes looks at once
(``handlers/push.py`` → ``handlers/looks.py``), and the cursor of each handled batch is kept in the store,
so a restarted bot or a new leader resumes after the last entry whose looks were done.

The watchers' polls stay, and judge the streams:

- a node whose stream is up is polled every ``[watch] safety_interval`` instead of every ``interval``
  (:meth:`Push.due`); one whose stream is down, every ``interval``, as without push;
- a poll that reaches a node whose stream is down opens it again now (no waiting out the pause);
- a poll that sees a unit change state (active state, main PID, restarts, run) that the open stream said
  nothing about within :data:`SILENT_GRACE_S` declares that stream silent: it is opened again, from where
  it had got to (what it missed is after that point, so nothing is lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from handlers.context import Asker, Context
from handlers.looks import Looks
from handlers.push import on_entries
from services.models import ServiceState
from services.node.journal_stream import NodeJournal
from services.parse.journal import JournalEntry

if TYPE_CHECKING:
    from bot.app import Runtime

log = logging.getLogger("inferbot.push")

SILENT_GRACE_S = 5.0
"""How long after a poll saw a change the stream may still say it (its line may be on its way)."""
CLOCK_SLACK_S = 1.0
"""A line that arrived this long before the earlier poll started still counts as saying the change."""

Signature = tuple[str, int, int, str]


def _signature(st: ServiceState) -> Signature:
    # The state word, not the sub-state: systemd logs every change of the former, not of every sub-state.
    return (st.active.split(" ")[0], st.main_pid, st.restarts, st.invocation_id)


class Push:
    """One journal stream per node while this replica leads (see the module's text)."""

    def __init__(self, runtime: Runtime, looks: Looks, leading: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.looks = looks
        self._leading = leading
        self.journals: dict[str, NodeJournal] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._checks: set[asyncio.Task[None]] = set()
        self._looked: dict[str, float] = {}  # node → when its last look started (monotonic)
        self._states: dict[tuple[str, str], tuple[Signature, float]] = {}
        self.silent_restarts = 0  # streams the polls found silent (tests, the benchmark)

    def _context(self) -> Context:
        return self.runtime.context(Asker(surface="json"))

    def start(self) -> None:
        """Open a stream to every node that runs configured services."""
        config = self.runtime.config
        store = self.runtime.store
        if store is None:
            raise RuntimeError("the journal streams need the state store (their cursors)")
        self.looks.seen = self.seen
        for name in sorted({s.node for s in config.services}):
            units = sorted({s.unit for s in config.services_on(name)})

            async def cursor(name: str = name) -> str | None:
                return await store.journal_cursors.get(name)

            async def deliver(entries: list[JournalEntry], name: str = name) -> None:
                await self._deliver(name, entries)

            journal = NodeJournal(self.runtime.pool, config.node(name), units, cursor, deliver)
            self.journals[name] = journal
            self._tasks.append(asyncio.create_task(journal.run(), name=f"push:{name}"))

    async def stop(self, drain_s: float = 0.0) -> None:
        """Close every stream: at once when the lead is lost (``drain_s`` 0), else letting the batches being
        handled finish within ``drain_s`` (the bot stops). Entries read but not handled are left to the next
        leader or start, which reads them again from the kept cursor."""
        if self.looks.seen == self.seen:
            self.looks.seen = None
        if drain_s > 0:
            await asyncio.gather(*(j.close(drain_s) for j in self.journals.values()))
        tasks, self._tasks = self._tasks, []
        for task in [*tasks, *self._checks]:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.journals.clear()

    async def _deliver(self, node: str, entries: list[JournalEntry]) -> None:
        if not self._leading():
            return  # fencing: a replica that lost the lead judges nothing (its streams are being closed)
        ctx = self._context()
        await on_entries(ctx, self.looks, node, entries, later=self._later)
        if ctx.store is not None:
            await ctx.store.journal_cursors.put(node, entries[-1].cursor)

    def _later(self, looks: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._quietly(looks))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    @staticmethod
    async def _quietly(looks: Awaitable[None]) -> None:
        try:
            await looks
        except Exception:  # a follow-up look's trouble: the next poll looks again
            log.warning("a follow-up look after a journal line failed", exc_info=True)

    def due(self, node: str) -> bool:
        """Whether the watcher's scheduled poll of ``node`` runs now: always while its stream is down, every
        ``[watch] safety_interval`` while it is up (any look at the node counts)."""
        journal = self.journals.get(node)
        if journal is None or not journal.connected:
            return True
        watch = self.runtime.config.watch
        last = self._looked.get(node)
        # Half an interval of slack: a poll a moment early must not wait a whole interval more.
        return last is None or time.monotonic() - last >= watch.safety_interval - watch.interval / 2

    def seen(self, node: str, started: float, states: list[ServiceState]) -> None:
        """A look at ``node`` (started at ``started``) saw ``states``: judge its stream (``Looks.seen``)."""
        self._looked[node] = started
        journal = self.journals.get(node)
        if journal is None:
            return
        if not journal.connected:
            journal.kick()  # the node answers: no need to wait out the pause before the next attempt
            return
        for st in states:
            if st.state == "unreachable":
                continue
            key = (node, st.unit)
            sig = _signature(st)
            before = self._states.get(key)
            self._states[key] = (sig, started)
            if before is None or before[0] == sig:
                continue
            up_since = journal.connected_at
            if up_since is None or up_since > before[1]:
                continue  # the stream was not open the whole time: its backlog says it, from the cursor
            if not self._said(journal, st.unit, before[1]):
                task = asyncio.create_task(self._judge(journal, node, st.unit, before[1], up_since))
                self._checks.add(task)
                task.add_done_callback(self._checks.discard)

    @staticmethod
    def _said(journal: NodeJournal, unit: str, since: float) -> bool:
        return journal.unit_lines.get(unit, float("-inf")) >= since - CLOCK_SLACK_S

    async def _judge(self, journal: NodeJournal, node: str, unit: str, since: float, up_since: float) -> None:
        await asyncio.sleep(SILENT_GRACE_S)
        if journal.connected_at != up_since or self._said(journal, unit, since):
            return
        self.silent_restarts += 1
        log.warning("the journal stream of %s said nothing of a change of %s the poll saw: opening it again",
                    node, unit)
        journal.restart()
