"""The typed records the store returns (pydantic), and the request state machine.

Plain pydantic (no SQLAlchemy): handlers import these and :mod:`services.store.ports` without paying for the
database code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from services.models import FlagValue

LoadOutcome = Literal["ready", "failed", "timeout"]
FollowReason = Literal["restart", "unplanned", "change"]
RequestKind = str
"""What a confirmable request does once confirmed: its row's ``kind``, the name of a kind in the flow's table
(``handlers/request_kinds.py``). Ids of ``bench`` requests start with ``b-``, which is what told them apart
before the column, and what migration 0004 filled it in from."""
REQUEST_KINDS: tuple[RequestKind, ...] = ("restart", "bench", "change")
"""The kinds a store accepts unless it is told others (``Store(request_kinds=...)``): one per kind of the flow."""
RequestState = Literal["pending", "confirmed", "running", "done", "failed", "cancelled", "expired", "refused"]

REQUEST_TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"confirmed", "cancelled", "expired", "refused"}),
    "confirmed": frozenset({"running", "failed"}),
    "running": frozenset({"done", "failed"}),
    "done": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
    "expired": frozenset(),
    "refused": frozenset(),
}
"""The request state machine (every kind): which states each state may move to."""



class _Record(BaseModel):
    # Built on first use, not at import: a question from the terminal touches one or two of them.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class SettingsSnapshot(_Record):
    """The settings one service ran with on one node, from when they were first seen to when last seen."""

    id: int
    service: str
    node: str
    unit: str
    first_seen_at: datetime
    last_seen_at: datetime
    model: str | None = None
    flags: dict[str, FlagValue] = {}
    env: dict[str, str] = {}
    version: str | None = None
    state: str = ""
    was_ready: bool = False  # a "ready" state was seen with exactly these settings
    last_ready_at: datetime | None = None

    @property
    def taken_at(self) -> datetime:
        """When these settings were first seen (the time of the change)."""
        return self.first_seen_at




class LoadRecord(_Record):
    """One load of a service (one systemd invocation) and how it ended."""

    service: str
    node: str
    invocation_id: str
    started_at: datetime
    ready_at: datetime | None = None
    outcome: LoadOutcome
    duration_s: float
    recorded_at: datetime


class AuditEntry(_Record):
    """One line of the audit log."""

    id: int
    at: datetime
    event: str
    who: str | None = None
    where: str | None = None
    service: str | None = None
    node: str | None = None
    detail: str = ""
    request_id: str | None = None


class LockRecord(_Record):
    """A held lock: who holds it (a restart request id for restart locks) and since when."""

    name: str
    owner: str
    acquired_at: datetime
    expires_at: datetime


class ConfirmableRequest(_Record):
    """A confirmable request (a restart, a benchmark: ``kind``) and where it is in the confirmation flow."""

    id: str
    kind: RequestKind
    service: str
    node: str
    unit: str
    requested_by: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    message_channel: str | None = None  # where the confirmation message is
    message_ts: str | None = None
    created_at: datetime
    expires_at: datetime
    force: bool = False
    state: RequestState
    state_by: str | None = None  # who made the last transition
    state_at: datetime | None = None  # when
    confirmed_by: str | None = None
    confirmed_at: datetime | None = None


class RestartRecord(_Record):
    """A restart that was executed (for cooldowns)."""

    service: str
    node: str
    at: datetime
    by: str | None = None
    forced: bool = False


AWAITING_START = "before:"
"""The invocation id of a follow recorded before its restart command ran: ``before:<the old invocation id>``
until a poll (or the command's result) sees the new start. Replacing it with the real id is the same load
going on, not a new one (:meth:`services.store.ports.Follows.upsert`)."""


class Follow(_Record):
    """A load being followed for readiness notices (reconciled at bot start-up)."""

    key: str
    service: str
    node: str
    unit: str
    invocation_id: str | None = None
    started_at: datetime
    reason: FollowReason
    thread_channel: str | None = None
    thread_ts: str | None = None
    progress_message_ts: str | None = None
    request_id: str | None = None
    updated_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None

    @property
    def active(self) -> bool:
        """True while the load has not been finished."""
        return self.finished_at is None


class Notice(_Record):
    """The claim (and, once posted, the message) of one final notice in one place."""

    follow_key: str
    place: str
    invocation_id: str  # "" when the follow had no invocation id when claimed
    claimed_at: datetime
    sent_at: datetime | None = None
    ts: str | None = None


class SmokeCheck(_Record):
    """The smoke completion of one load: ok (with the time to the first token), failed or skipped."""

    service: str
    node: str
    invocation_id: str
    outcome: str
    ttft_s: float | None = None
    detail: str = ""
    at: datetime


class BenchRun(_Record):
    """One acceptance benchmark: running, or done/failed with the notice it ended with."""

    id: str
    service: str
    node: str
    state: str
    started_at: datetime
    finished_at: datetime | None = None
    text: str | None = None
    status: str | None = None
    data: dict[str, JsonValue] | None = None


class WatchState(_Record):
    """What the unplanned-restart watcher saw last for one unit (its baseline)."""

    service: str
    node: str
    main_pid: int
    started_at: datetime | None = None
    n_restarts: int = 0
    active_state: str = ""
    updated_at: datetime


class MetricPoint(_Record):
    """One metrics sample of a service (``resolution_s`` 0) or the mean of a bucket of them."""

    service: str
    node: str
    at: datetime
    resolution_s: int = 0
    generation_tps: float | None = None  # None: first sample of a process, or the counters were reset
    prompt_tps: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # fraction 0..1


@dataclass(frozen=True)
class RateVerdict:
    """May this person be answered now; if not, in how many seconds, and must they be told (once)."""

    allowed: bool
    retry_in: int = 0
    notify: bool = False


class Silence(BaseModel):
    """Notices about ``service`` on ``node`` that are suppressed until ``until`` (asked by ``by``)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    service: str
    node: str
    until: datetime
    reason: str = ""
    by: str = ""
    at: datetime


class HealthMemo(BaseModel):
    """What the health watcher remembers about one service between two looks."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    invocation: str = ""  # the start (systemd InvocationID) this memo is about
    main_pid: int = 0
    active_state: str = ""
    ready_seen: bool = False  # /health answered 200 in this start
    bad_polls: int = 0  # consecutive looks with the main process alive and /health not 200
    unhealthy_since: datetime | None = None  # the open unhealthy episode (its ⚠️ posted or suppressed)
    unhealthy_reason: str = ""
    unhealthy_silenced: bool = False
    gen_total: float | None = None  # vllm:generation_tokens_total at the last look
    gen_changed_at: datetime | None = None  # when it last moved (or the server was last idle)
    hung_since: datetime | None = None  # the open "possibly hung" episode
    hung_silenced: bool = False
    stop_checked: str = ""  # the start whose end was already examined (engine death with exit 0)
    stop_error: str = ""  # that start's engine died and the unit stopped with exit 0: its ❌ is due
    stop_place: str = ""  # the notice place of that ❌


CHANGE_FINAL = frozenset({"refused", "kept", "reverted", "rolled_back", "rollback_failed", "failed"})
"""The states a settings change ends in (``finished_at`` is set when it gets there)."""


class ChangeStep(_Record):
    """One node of a settings change (issue 25): where it is in its state machine, and what it needs to go on
    (``handlers/change/machine.py``). Deltas are inferbot's whole change against the operator's unit, as
    ``ChangeSpec`` JSON (the preflight refused every secret, so none is here)."""

    change_id: str
    node: str
    position: int
    state: str
    state_at: datetime
    previous: dict[str, JsonValue] | None = None  # inferbot's delta before ({}: no drop-in; None: not read yet)
    delta: dict[str, JsonValue] | None = None  # inferbot's delta the change wrote
    settings_since: datetime | None = None  # since when the settings before the change ran (their start)
    load_started_at: datetime | None = None  # the follow of the load in flight (the change's or the rollback's)
    invocation: str | None = None  # that load's start (systemd InvocationID), once known
    ready_at: datetime | None = None  # the change's load was ready (the verify window starts)
    load_s: float | None = None
    back_s: float | None = None  # how long the rollback's load took
    reason: str | None = None  # why it failed
    detail: str | None = None  # a failed rollback: what is on disk, and the commands to restore by hand


class ChangeRecord(_Record):
    """A settings change (``set … on kimi``, ``revert kimi``): its number, what was asked, the preview's facts,
    and its steps, one per node, in rollout order."""

    number: int
    id: str  # the confirmable request's id
    op: str  # "change" | "revert"
    service: str
    node: str  # the first node
    spec: dict[str, JsonValue] | None = None  # the ChangeSpec asked for (None: a revert)
    diff: list[dict[str, JsonValue]] = []
    preflight: list[dict[str, JsonValue]] = []
    checked_with: str = ""
    requested_by: str | None = None
    created_at: datetime
    state: str  # proposed | refused | running | kept | reverted | rolled_back | rollback_failed | failed
    state_at: datetime
    outcome: str | None = None  # the one line it ended with
    finished_at: datetime | None = None
    steps: list[ChangeStep] = []
