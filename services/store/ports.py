"""What the rest of the bot may ask of the state store: one narrow protocol per aggregate, and the bundle.

Handlers receive the store through ``Context.store`` typed as :class:`StateStore` and reach one repository
by its attribute (``ctx.store.locks.acquire(...)``); a helper that needs one aggregate takes only its
protocol (``was_held(notices: Notices, ...)``). This module imports no SQLAlchemy: a question from the
terminal imports it with the handlers and opens the database only when it is used
(docs/architecture.md, "Lazy imports"). The implementations are the repositories of ``services/store/``
(``locks.py``, ``requests.py``…), composed by :class:`services.store.store.Store`.

Everything that must be correct when two processes race is a single atomic statement guarded by the
database: locks (conditional ``UPDATE`` / ``INSERT`` against a primary key), request transitions
(compare-and-set ``UPDATE … WHERE state IN (…)``) and claims (``INSERT`` against a unique key). All
datetimes are timezone-aware UTC, in and out (naive datetimes are refused with ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Protocol

from pydantic import JsonValue

from services.models import ServiceState
from services.store.records import (
    AuditEntry,
    BenchRun,
    ChangeRecord,
    ConfirmableRequest,
    Follow,
    FollowReason,
    HealthMemo,
    LoadOutcome,
    LoadRecord,
    LockRecord,
    MetricPoint,
    Notice,
    RateVerdict,
    RequestKind,
    RestartRecord,
    SettingsSnapshot,
    Silence,
    SmokeCheck,
    WatchState,
)

__all__ = ["Audit", "BenchRuns", "Changes", "Follows", "HealthMemos", "HomeViews", "JournalCursors", "Loads",
           "Locks", "MetricSamples", "Notices", "Requests", "Restarts", "SharedState", "Silences", "SmokeChecks",
           "Snapshots", "StateStore", "Watches"]


class Locks(Protocol):
    """Named locks with an owner and an expiry (a restart's ``restart:<service>@<node>``, a benchmark's)."""

    async def acquire(self, name: str, owner: str, ttl_s: float, now: datetime) -> bool:
        """Take lock ``name`` for ``owner`` until ``now + ttl_s``; True when taken.

        Atomic across processes and replicas: succeeds when the lock is free, expired
        (``expires_at <= now``) or already held by ``owner`` (which renews it).
        """
        ...

    async def release(self, name: str, owner: str) -> bool:
        """Release lock ``name`` if ``owner`` holds it; True when something was released."""
        ...

    async def holder(self, name: str, now: datetime) -> str | None:
        """Who holds lock ``name`` at ``now`` (None when free or expired)."""
        ...

    async def get(self, name: str, now: datetime) -> LockRecord | None:
        """Lock ``name`` with its owner and times, if held at ``now`` (None when free or expired)."""
        ...

    async def clear(self, name: str, owner: str | None = None) -> LockRecord | None:
        """Remove lock ``name`` whoever holds it (or only if ``owner`` does); returns what was removed."""
        ...


class Requests(Protocol):
    """Confirmable requests of every kind (restart, bench, …): one state machine, ``records.REQUEST_TRANSITIONS``."""

    async def create(self, request_id: str, service: str, node: str, unit: str, requested_by: str | None,
                     channel: str | None, thread_ts: str | None, created_at: datetime, expires_at: datetime,
                     force: bool, message_ts: str | None = None, *, kind: RequestKind) -> bool:
        """Store a new request of ``kind`` in state ``pending``; False when ``request_id`` already exists.

        A kind the store was not told of (``Store(request_kinds=...)``) is refused with ``ValueError``.
        """
        ...

    async def get(self, request_id: str) -> ConfirmableRequest | None:
        """The request ``request_id`` (with its kind), if it exists."""
        ...

    async def transition(self, request_id: str, from_states: AbstractSet[str], to_state: str, actor: str | None,
                         at: datetime) -> bool:
        """Move a request from one of ``from_states`` to ``to_state``: an atomic compare-and-set.

        True for exactly one caller however many race (two clicks, two replicas, a redelivered click).
        A move to ``confirmed`` also requires the request not to have expired (``at < expires_at``).
        Every (from, to) pair must be allowed by ``REQUEST_TRANSITIONS`` (else ``ValueError``).
        """
        ...

    async def set_message(self, request_id: str, channel: str, ts: str) -> bool:
        """Remember where the confirmation message of a request is (to rewrite it later)."""
        ...

    async def unfinished(self) -> list[ConfirmableRequest]:
        """Requests not yet in a final state (pending, confirmed, running), oldest first: for start-up."""
        ...


class Restarts(Protocol):
    """Restarts inferbot executed (for cooldowns)."""

    async def record(self, service: str, node: str, at: datetime, by: str | None, forced: bool) -> None:
        """Remember that service@node was restarted (by inferbot) at ``at``."""
        ...

    async def last(self, service: str, node: str) -> RestartRecord | None:
        """The newest restart recorded for service@node, if any."""
        ...

    async def last_at(self, service: str, node: str) -> datetime | None:
        """When inferbot last restarted service@node, if ever."""
        ...


class Follows(Protocol):
    """Loads being followed for readiness notices (a bot started again carries on with them)."""

    async def upsert(self, key: str, service: str, node: str, unit: str, invocation_id: str | None,
                     started_at: datetime, reason: FollowReason, thread_channel: str | None = None,
                     thread_ts: str | None = None, progress_message_ts: str | None = None,
                     request_id: str | None = None) -> Follow:
        """Create or update the follow ``key`` (every field is overwritten) and return it.

        An existing follow that gets a *different* non-empty invocation id is a new load: it becomes
        active again. One whose invocation id was unknown (None) and now is known keeps its state, and
        notice claims made meanwhile are carried over to the new invocation id (so is one awaiting its start,
        ``records.AWAITING_START``, with its progress message).
        """
        ...

    async def set_message(self, key: str, progress_message_ts: str) -> bool:
        """Remember the ts of the follow's progress message (the one message kept updated)."""
        ...

    async def get(self, key: str) -> Follow | None:
        """The follow ``key`` (active or finished), if any."""
        ...

    async def active(self) -> list[Follow]:
        """Follows not finished yet, oldest first: the loads to carry on with at start-up."""
        ...

    async def finish(self, key: str, outcome: str, at: datetime | None = None) -> bool:
        """Mark the follow finished with ``outcome``; True only for the call that finished it."""
        ...


class Notices(Protocol):
    """Exactly-once claims of notices, per (follow key, place, the follow's current load)."""

    async def claim(self, follow_key: str, place: str) -> bool:
        """Claim the right to post the notice of the follow's current load in ``place``.

        True exactly once per (follow, place, invocation id), across processes. Post only after a True;
        then :meth:`mark_sent`, or :meth:`release` when posting failed.
        """
        ...

    async def mark_sent(self, follow_key: str, place: str, ts: str | None, at: datetime | None = None) -> bool:
        """Record that the claimed notice was posted (``ts``: the Slack message ts)."""
        ...

    async def sent(self, follow_key: str, place: str) -> bool:
        """True when the notice of the follow's current load was posted in ``place``."""
        ...

    async def get(self, follow_key: str, place: str) -> Notice | None:
        """The claim of the follow's current-load notice in ``place`` (claimed, maybe not sent), if any."""
        ...

    async def release(self, follow_key: str, place: str) -> bool:
        """Give up an unsent claim (posting failed) so a retry may claim again; a sent one stays."""
        ...


class Snapshots(Protocol):
    """The settings each service ran with, one row per different set (``what changed?``)."""

    async def record(self, state: ServiceState, now: datetime) -> SettingsSnapshot:
        """Remember the settings ``state`` runs with; returns the snapshot row they belong to.

        A new row is stored only when (model, flags, env, version) differ from the newest snapshot of
        that service@node; otherwise the newest row's ``last_seen_at`` (and state/unit) is bumped. A
        "ready" state marks the row ``was_ready``. ``env`` must already be redacted: it is stored as given.
        """
        ...

    async def record_many(self, states: list[ServiceState], now: datetime) -> list[tuple[int, SettingsSnapshot | None]]:
        """:meth:`record` for each state: the id of its snapshot, and the last ready snapshot of those not
        ready now (None for the ready ones, or when there is none).

        One trip to the database thread for all the given states (an answer records each batch of nodes as
        it comes); unchanged settings recorded by this process a moment ago need none. Only ids are
        returned, not the snapshots: the caller compares ids.
        """
        ...

    async def mark_ready(self, service: str, node: str, at: datetime) -> bool:
        """Mark the newest snapshot of service@node as seen ready (False when there is none)."""
        ...

    async def latest(self, service: str, node: str, limit: int = 2) -> list[SettingsSnapshot]:
        """The newest ``limit`` different snapshots of service@node, newest first."""
        ...

    async def last_ready(self, service: str, node: str) -> SettingsSnapshot | None:
        """The newest snapshot of service@node whose settings were once seen ready, if any."""
        ...


class Loads(Protocol):
    """Load history (how each load ended) and when each phase of a load was first seen."""

    async def record(self, service: str, node: str, invocation_id: str, started_at: datetime,
                     ready_at: datetime | None, outcome: LoadOutcome, duration_s: float) -> bool:
        """Record how one load ended; idempotent per (service, node, invocation_id).

        Recording the same load again overwrites it with the new values; returns True when the load was
        not recorded before. An empty ``invocation_id`` is replaced by ``"start:<started_at ISO>"``.
        """
        ...

    async def durations(self, service: str, node: str, limit: int = 10) -> list[float]:
        """Durations in seconds of the last ``limit`` successful loads of service@node, newest first."""
        ...

    async def durations_many(self, keys: list[tuple[str, str]], limit: int = 10) -> list[list[float]]:
        """:meth:`durations` for several (service, node) pairs in one trip, remembered for a short while."""
        ...

    async def last(self, service: str, node: str) -> LoadRecord | None:
        """The newest recorded load of service@node (any outcome), if any."""
        ...

    async def record_phase(self, service: str, node: str, invocation_id: str, phase: str, at: datetime) -> bool:
        """Remember when a load was first seen in ``phase``; True the first time (later calls keep it)."""
        ...

    async def recent(self, service: str, node: str, limit: int = 10) -> list[tuple[LoadRecord, dict[str, datetime]]]:
        """The last ``limit`` loads of service@node (any outcome), oldest first, with when each phase was seen."""
        ...


class Audit(Protocol):
    """The audit log: who did what, where, to which service, for which request."""

    async def record(self, event: str, who: str | None, where: str | None, service: str | None, node: str | None,
                     detail: str, at: datetime | None = None, request_id: str | None = None) -> AuditEntry:
        """Append one entry to the audit log (``at`` defaults to now) and return it."""
        ...

    async def recent(self, service: str | None = None, limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` audit entries (of ``service`` only, when given), newest first."""
        ...

    async def newest_by_target(self, events: AbstractSet[str]) -> dict[tuple[str, str], AuditEntry]:
        """The newest entry among ``events`` per (service, node): "last restart, when and by whom"."""
        ...

    async def has(self, event: str, request_id: str) -> bool:
        """True when the log has ``event`` for request ``request_id``."""
        ...


class Watches(Protocol):
    """The unplanned-restart watcher's baseline per unit (the scheduler leader's rows)."""

    async def get(self, service: str, node: str) -> WatchState | None:
        """What the watcher saw last for service@node, if anything (after the first read: from memory)."""
        ...

    async def put(self, service: str, node: str, main_pid: int, started_at: datetime | None, n_restarts: int,
                  active_state: str) -> None:
        """Replace the baseline of service@node (read back at once; written with the next flush, or now when
        the unit changed)."""
        ...


class HomeViews(Protocol):
    """The App Home dashboards people opened, and the pacing of their republishing (shared by replicas)."""

    async def opened(self, user_id: str, at: datetime) -> None:
        """Remember that ``user_id`` opened the App Home tab at ``at`` (their dashboard is now open)."""
        ...

    async def mark_dirty(self, opened_since: datetime) -> int:
        """Mark every dashboard opened since ``opened_since`` as stale; returns how many."""
        ...

    async def due(self, now: datetime, min_interval_s: float, opened_since: datetime) -> list[str]:
        """Users whose open dashboard is stale and may be republished now (paced to ``min_interval_s``)."""
        ...

    async def claim_publish(self, user_id: str, now: datetime, min_interval_s: float, force: bool = False) -> bool:
        """Claim the next publish of ``user_id``'s dashboard: True at most once per ``min_interval_s``.

        One atomic ``UPDATE``, so two replicas (or two changes at once) never both publish within the
        interval; ``force`` (the person opened the tab or pressed Refresh) skips the pacing.
        """
        ...

    async def publish_failed(self, user_id: str) -> None:
        """The claimed publish did not reach Slack: stale again, and due on the next change."""
        ...


class MetricSamples(Protocol):
    """Live numbers the watcher sampled from ``/metrics`` (charts, the Home tab); the leader writes them."""

    async def record(self, service: str, node: str, at: datetime, *, generation_total: float | None,
                     prompt_total: float | None, running: float | None, waiting: float | None,
                     kv_cache_usage: float | None, process_start: datetime | None = None) -> MetricPoint | None:
        """Store one ``/metrics`` sample of service@node taken at ``at``; returns the stored point.

        Token rates come from the counters' growth since the previous sample of the same process: a new
        ``process_start`` or a counter that went down (the server restarted in between) gives no rate
        rather than a wrong one. Returns None when a sample at exactly ``at`` is already stored. Now and
        then older samples are downsampled and expired (:meth:`compact`).
        """
        ...

    async def between(self, service: str, node: str, since: datetime,
                      until: datetime | None = None) -> list[MetricPoint]:
        """The samples (raw and downsampled) of service@node from ``since`` to ``until``, oldest first."""
        ...

    async def latest(self) -> dict[tuple[str, str], MetricPoint]:
        """The newest sample of every service@node that has one: live numbers without a probe."""
        ...

    async def compact(self, now: datetime) -> tuple[int, int]:
        """Fold raw samples older than 24 h into 5-minute buckets; drop samples older than 7 days.

        Returns (raw samples folded, samples dropped). Only whole buckets are folded, so folding again
        later changes nothing; two processes folding at once collide on the unique key and one gives way.
        """
        ...


class SmokeChecks(Protocol):
    """The smoke completion of each load (its outcome decides the ✅)."""

    async def record(self, service: str, node: str, invocation_id: str, outcome: str, ttft_s: float | None,
                     detail: str, at: datetime) -> SmokeCheck:
        """Record the smoke completion of one load (``detail`` already redacted); the first record wins."""
        ...

    async def get(self, service: str, node: str, invocation_id: str) -> SmokeCheck | None:
        """The smoke completion recorded for one load, if any."""
        ...


class BenchRuns(Protocol):
    """Acceptance benchmarks, each claimed by an insert so that it runs once."""

    async def claim(self, run_id: str, service: str, node: str, at: datetime) -> bool:
        """Claim the benchmark ``run_id`` (state running); True exactly once, across processes."""
        ...

    async def finish(self, run_id: str, state: str, text: str, status: str, data: Mapping[str, JsonValue],
                     at: datetime) -> bool:
        """Record the end of a running benchmark; True for the call that ended it."""
        ...

    async def get(self, run_id: str) -> BenchRun | None:
        """The benchmark ``run_id``, if claimed."""
        ...


class Changes(Protocol):
    """Settings changes (issue 25): one per request, numbered, with a step per node; every move is a
    compare-and-set, so each step of a change is taken by one process only (a bot restart, replicas)."""

    async def create(self, change_id: str, op: str, service: str, nodes: Sequence[str],
                     spec: Mapping[str, JsonValue] | None, requested_by: str | None, at: datetime) -> ChangeRecord:
        """Store a new change (state ``proposed``, its steps ``waiting``) and return it with its number. ``spec``
        may be stored later (:meth:`move`), once the preflight found no secret in it."""
        ...

    async def get(self, change_id: str) -> ChangeRecord | None:
        """The change ``change_id`` (the request's id) with its steps, if any."""
        ...

    async def numbered(self, number: int) -> ChangeRecord | None:
        """The change people call ``#number``, if any."""
        ...

    async def recent(self, service: str | None = None, limit: int = 20) -> list[ChangeRecord]:
        """The newest ``limit`` changes (of ``service`` only, when given), newest first, with their steps."""
        ...

    async def running(self, service: str | None = None) -> list[ChangeRecord]:
        """The changes of ``service`` (or of every service) not decided yet (state ``running``), oldest first."""
        ...

    async def move(self, change_id: str, from_states: AbstractSet[str], to_state: str, at: datetime,
                   fields: Mapping[str, object] | None = None) -> bool:
        """Move the change from one of ``from_states`` to ``to_state`` (with ``fields``: ``spec``, ``diff``,
        ``preflight``, ``checked_with``, ``outcome``); a final state sets ``finished_at``. True for the one caller
        that moved it."""
        ...

    async def move_step(self, change_id: str, node: str, from_states: AbstractSet[str], to_state: str, at: datetime,
                        fields: Mapping[str, object] | None = None, if_at: datetime | None = None) -> bool:
        """Move one node's step (and set ``fields`` of :class:`~services.store.records.ChangeStep`); with
        ``if_at`` only if its state has not moved since then (taking over a step a stopped process left)."""
        ...


class SharedState(Protocol):
    """What replicas share besides the aggregates: event de-duplication, rate limits, progress pacing."""

    async def claim_event(self, event_id: str, now: datetime) -> bool:
        """True for the first replica to see ``event_id`` (within ``EVENT_TTL_S``), False for every other."""
        ...

    async def rate_check(self, user: str, per_minute: int, now: float | None = None) -> RateVerdict:
        """At most ``per_minute`` answers per person in any 60 s, counted over every replica.

        The first refusal in a window is to be answered (``notify``), later ones silently dropped. ``now`` is
        epoch seconds (wall clock: replicas share no monotonic clock).
        """
        ...

    async def claim_progress_edit(self, key: str, phase: str | None, min_interval_s: float, now: datetime) -> bool:
        """Claim the next edit of follow ``key``'s progress message: True when ``min_interval_s`` has passed
        since the last edit or the phase changed; one winner however many pollers (or leaders) race."""
        ...

    async def release_progress_edit(self, key: str) -> None:
        """The claimed edit did not reach Slack: the next poll may edit again at once."""
        ...

    async def forget_progress(self, key: str) -> None:
        """A new load (or the end of one): its progress message starts unpaced."""
        ...


class Silences(Protocol):
    """``silence kimi 2h``: notices of a service held back until a time."""

    async def put(self, silence: Silence) -> None:
        """Silence (or re-silence, replacing the old end) one service."""
        ...

    async def end(self, service: str, node: str) -> Silence | None:
        """End the silence of service@node now; returns the row removed (None: there was none)."""
        ...

    async def active(self, now: datetime) -> list[Silence]:
        """Every silence that has not ended at ``now``, soonest end first."""
        ...

    async def active_for(self, service: str, node: str, now: datetime) -> Silence | None:
        """The silence of service@node in force at ``now``, if any."""
        ...


class HealthMemos(Protocol):
    """What the health watcher remembers per service between two looks (the scheduler leader's rows)."""

    async def get(self, service: str, node: str) -> HealthMemo | None:
        """The memo of service@node, if the watcher looked before (read once, then from memory)."""
        ...

    async def put(self, service: str, node: str, memo: HealthMemo, now: datetime) -> None:
        """Replace the memo of service@node: at once for this process, in the database with the next flush of
        the watcher's writes, at once when a health episode opened or closed, and not at all when nothing
        changed."""
        ...


class JournalCursors(Protocol):
    """Where each node's journal stream has got to (the scheduler leader's rows)."""

    async def get(self, node: str) -> str | None:
        """The cursor of the last journal entry of ``node`` whose looks were done, if any (read once, then
        from memory)."""
        ...

    async def put(self, node: str, cursor: str) -> None:
        """Remember ``cursor`` for ``node``: at once for this process, in the database with the next flush of
        the leader's writes (a cursor lost with a dying leader only means its entries are read again)."""
        ...


class StateStore(Protocol):
    """The state store as handlers see it (``Context.store``): one repository per aggregate."""

    @property
    def locks(self) -> Locks: ...
    @property
    def requests(self) -> Requests: ...
    @property
    def restarts(self) -> Restarts: ...
    @property
    def follows(self) -> Follows: ...
    @property
    def notices(self) -> Notices: ...
    @property
    def snapshots(self) -> Snapshots: ...
    @property
    def loads(self) -> Loads: ...
    @property
    def audit(self) -> Audit: ...
    @property
    def watches(self) -> Watches: ...
    @property
    def home_views(self) -> HomeViews: ...
    @property
    def samples(self) -> MetricSamples: ...
    @property
    def smoke_checks(self) -> SmokeChecks: ...
    @property
    def bench_runs(self) -> BenchRuns: ...
    @property
    def shared(self) -> SharedState: ...
    @property
    def silences(self) -> Silences: ...
    @property
    def health_memos(self) -> HealthMemos: ...
    @property
    def changes(self) -> Changes: ...
    @property
    def journal_cursors(self) -> JournalCursors: ...
