"""The bot's scheduler: APScheduler 3 (asyncio) with its job store in the bot's own database.

Jobs are ``bot.jobs`` functions with deterministic ids (``follow:<service>@<node>``, ``watch:<node>``,
``expire:<request_id>``, ``<kind>:<request_id>`` to settle a confirmable request) and ``replace_existing=True``,
so re-adding replaces instead of duplicating. A late run is still run (``misfire_grace_time=None``), piled-up
runs are coalesced into one, and a job never overlaps itself. On start-up the loads in flight are reconciled
from the store.

APScheduler 3 can't share a job store between two schedulers, so with replicas only the **leader**
(``services.store.leader``) runs one: it is started when this replica is elected and shut down the moment it
loses the lock (fencing). A standby still answers and may start a follow or a request (the store has
them); the leader's ``reconcile`` job picks those up within :data:`RECONCILE_S`, and a new leader rebuilds
every job from the database (the job store's rows and the follows and requests in flight).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot import jobs
from bot.push import Push
from services.store.leader import Leadership, SoleLeader
from services.store.schema import JOBSTORE_TABLE

if TYPE_CHECKING:
    from bot.app import Runtime

log = logging.getLogger("inferbot.scheduler")
JOB_DEFAULTS = {"misfire_grace_time": None, "coalesce": True, "max_instances": 1}
RECONCILE_S = 2.0
"""How often the leader looks for follows and requests another replica started."""
DRAIN_S = 10.0
"""A graceful stop lets the job steps in flight finish for this long before cancelling them: a step cut
between claiming a notice and recording it sent holds that notice back for ``CLAIM_STALE_S``."""
VOLATILE = "volatile"
"""The job store (in memory) of the jobs every new leader adds again: the watchers and the reconcile job.
In the database job store each of their runs costs a read and a rewrite of the job's row, work that grows with
the fleet (a watcher per node, every interval) and buys nothing, since every leader adds these jobs again."""


class BotScheduler:
    """Schedules follow, watch and expiry jobs; implements ``handlers.ports.Jobs``.

    Made before the runtime it serves (it is that runtime's ``jobs`` port) and started with it: the runtime
    its jobs run against, complete, is handed over once, at :meth:`start`.
    """

    def __init__(self, *, poll_s: float | None = None, watch_s: float | None = None) -> None:
        self._poll_s, self._watch_s = poll_s, watch_s
        self._run: jobs.Live | None = None  # what the jobs run against, from start() on
        self._sched: AsyncIOScheduler | None = None
        self.leadership: Leadership = SoleLeader()
        self._watch = False
        self.push: Push | None = None  # the journal streams (issue 26), while this replica leads
        self._terms = 0  # how many times this replica became the leader
        self.first_job_at: float | None = None  # time.time() of the first job this leader ran (bench)

    @property
    def runtime(self) -> Runtime:
        """The runtime the jobs run against (given at :meth:`start`)."""
        if self._run is None:
            raise RuntimeError("the scheduler has not been started")
        return self._run.runtime

    @property
    def poll_s(self) -> float:
        """How often a follow job polls its load."""
        return self._poll_s if self._poll_s is not None else self.runtime.config.watch.poll

    @property
    def watch_s(self) -> float:
        """How often a watcher looks at its node."""
        return self._watch_s if self._watch_s is not None else self.runtime.config.watch.interval

    def _new_scheduler(self) -> AsyncIOScheduler:
        assert self.runtime.store is not None
        store = SQLAlchemyJobStore(url=self.runtime.store.jobstore_url(), tablename=JOBSTORE_TABLE)
        return AsyncIOScheduler(jobstores={"default": store, VOLATILE: MemoryJobStore()},
                                job_defaults=dict(JOB_DEFAULTS), timezone=UTC)

    @property
    def _aps(self) -> AsyncIOScheduler:
        if self._sched is None:
            raise RuntimeError("the scheduler has not been started")
        return self._sched

    @property
    def leading(self) -> bool:
        """True while this replica is the scheduler leader (always, on SQLite)."""
        return self.leadership.role == "leader" and self._sched is not None and self._sched.running

    async def start(self, rt: Runtime, watch: bool | None = None, leadership: Leadership | None = None) -> None:
        """Run the jobs against ``rt`` and campaign for leadership (SQLite: lead at once); when elected,
        start, reconcile in-flight loads and add the watchers.

        ``rt`` is complete: its ``jobs`` is this scheduler, its ``notifier`` posts the notices, its store
        keeps the jobs.
        """
        if rt.store is None:
            raise RuntimeError("the scheduler needs the state store")
        if rt.jobs is not self:
            raise ValueError("start the scheduler with the runtime whose jobs it is")
        if rt.notifier is None:
            raise ValueError("the scheduler's jobs post notices: its runtime needs a notifier")
        self._run = jobs.Live(runtime=rt, notifier=rt.notifier, scheduler=self)
        self._sched = self._new_scheduler()
        jobs.register(self._run)
        self._watch = rt.config.watch.enabled if watch is None else watch
        if leadership is not None:
            self.leadership = leadership
        await self.leadership.start(self._elected, self._lost)

    async def _elected(self) -> None:
        if self._aps.running:
            return
        if self._terms:  # shut down after an earlier term: a fresh scheduler (and job store) for this one
            self._sched = self._new_scheduler()
        self._terms += 1
        self.first_job_at = None
        assert self.runtime.store is not None
        self.runtime.store.forget_watcher_memos()  # another replica may have led (and watched) meanwhile
        self.runtime.pool.keep_sessions(True)  # the watchers' persistent sessions: the leader's only
        self._aps.start()
        for job in self._aps.get_jobs(jobstore="default"):
            if job.id == "reconcile" or job.id.startswith("watch:"):  # kept there by an older inferbot
                self._aps.remove_job(job.id, jobstore="default")
        await self.reconcile()
        if self._watch:
            self.add_watches()
            self._start_push()
        self._aps.add_job(jobs.reconcile_job, "interval", seconds=RECONCILE_S, id="reconcile", jobstore=VOLATILE,
                            replace_existing=True, next_run_time=datetime.now(UTC))  # first act: catch up

    def _start_push(self) -> None:
        if self.runtime.config.watch.push and self.push is None and self._run is not None:
            self.push = Push(self.runtime, self._run.looks, lambda: self.leading)
            self._run.push = self.push
            self.push.start()

    async def _stop_push(self, drain_s: float = 0.0) -> None:
        push, self.push = self.push, None
        if self._run is not None:
            self._run.push = None
        if push is not None:
            await push.stop(drain_s)

    async def _lost(self) -> None:
        # Fencing: stop scheduling at once; the jobs stay in the store for the next leader, and the watcher's
        # queued baselines and memos are not written over the new leader's.
        if self._sched is not None and self._sched.running:
            self._sched.shutdown(wait=False)
            await asyncio.sleep(0)  # shutdown is scheduled with call_soon_threadsafe
        await self._stop_push()  # the journal streams are the leader's, like the sessions below
        # A standby keeps no channel open on any node: the watchers' sessions close (a poll still in flight
        # gets its answer, or none, and opens no new one).
        self.runtime.pool.keep_sessions(False)
        if self.runtime.store is not None:
            self.runtime.store.forget_watcher_memos(drop_pending=True)

    async def shutdown(self, drain_s: float = DRAIN_S) -> None:
        """Stop scheduling, let the steps in flight finish (up to ``drain_s``), write the watcher's queued
        writes, then give up leadership (jobs stay in the store for the next start). Still the leader while
        draining and writing, so no other replica runs the same steps meanwhile."""
        if self._sched is not None and self._sched.running and self._run is not None:
            self._sched.pause()
            await self._stop_push(drain_s)  # a batch of journal entries being handled may finish
            left = await self._run.drain(drain_s)
            if left:
                log.warning("stopping with %d scheduled step(s) still running: cancelled", left)
        if self.leading and self.runtime.store is not None:
            try:
                await self.runtime.store.flush_writes()  # the watcher's last writes, while still the leader
            except Exception:
                log.warning("the watcher's last samples and memos could not be written", exc_info=True)
        await self.leadership.stop()
        if self._run is None:
            return  # never started
        await self._lost()
        jobs.unregister(self._run)

    # -- handlers.ports.Jobs
    def follow(self, key: str) -> None:
        """Poll the load ``key`` every ``[watch] poll``, starting now (a standby leaves it to the leader)."""
        if not self.leading:
            return
        self._aps.add_job(jobs.poll_follow_job, "interval", seconds=self.poll_s, id=f"follow:{key}", args=[key],
                            replace_existing=True, next_run_time=datetime.now(UTC))

    def stop_follow(self, key: str) -> None:
        """Stop polling the load ``key``."""
        if not self.leading:
            return
        try:
            self._aps.remove_job(f"follow:{key}")
        except JobLookupError:
            pass

    def expire(self, request_id: str, at: datetime) -> None:
        """Expire the request ``request_id`` at ``at`` (a standby leaves it to the leader)."""
        if not self.leading:
            return
        self._aps.add_job(jobs.expire_request_job, "date", run_date=at, id=f"expire:{request_id}",
                            args=[request_id], replace_existing=True)

    def settle(self, kind: str, request_id: str, at: datetime) -> None:
        """Settle the request ``request_id`` of ``kind`` at ``at`` (its process may have stopped): job
        ``<kind>:<request_id>`` (``bench:…`` as an older inferbot named its benchmarks' jobs)."""
        self._aps.add_job(jobs.settle_request_job, "date", run_date=at, id=f"{kind}:{request_id}",
                            args=[request_id], replace_existing=True)

    # -- start-up
    async def reconcile(self) -> list[str]:
        """Re-add the follow job of every load still in flight in the store; returns the keys re-added."""
        store = self.runtime.store
        assert store is not None
        added: list[str] = []
        if not self.leading:
            return added
        for f in await store.follows.active():
            if self._aps.get_job(f"follow:{f.key}") is None:
                self.follow(f.key)
                added.append(f.key)
        for req in await store.requests.unfinished():
            if req.state == "pending" and self._aps.get_job(f"expire:{req.id}") is None:
                self.expire(req.id, req.expires_at)
            elif (req.state in ("confirmed", "running") and self._aps.get_job(f"{req.kind}:{req.id}") is None
                  and not self._settling(req.id)):
                self.settle(req.kind, req.id, datetime.now(UTC))  # its process may have stopped
        if added:
            log.info("reconciled loads in flight: %s", ", ".join(added))
        return added

    def _settling(self, request_id: str) -> bool:
        """Its settle step runs right now (APScheduler removed the date job when it started it): it schedules the
        next one itself, and one added meanwhile would only be skipped as a second instance."""
        return self._run is not None and request_id in self._run.settling

    def add_watches(self) -> None:
        """One unplanned-restart watcher per node that runs configured services."""
        nodes = sorted({s.node for s in self.runtime.config.services})
        for node in nodes:
            self._aps.add_job(jobs.watch_node_job, "interval", seconds=self.watch_s, id=f"watch:{node}",
                                args=[node], jobstore=VOLATILE, replace_existing=True, next_run_time=datetime.now(UTC))

    def job_ids(self) -> list[str]:
        """Ids of the scheduled jobs (tests, diagnostics)."""
        return sorted(j.id for j in self._aps.get_jobs())
