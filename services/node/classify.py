"""A unit's state from ``systemctl show``, its load's progress and ``/health``: ready, loading, failed…"""

from __future__ import annotations

from datetime import datetime, timedelta

from services.models import LoadProgress, State, UnitShow
from services.node.probe import UnitRaw

CRASH_LOOP_RESTARTS = 3
CRASH_LOOP_WINDOW = timedelta(minutes=2)


def unit_missing(show: UnitShow, raw: UnitRaw) -> bool:
    """systemd does not know the unit (``LoadState=not-found``, or ``systemctl show`` said nothing of it)."""
    return show.load_state == "not-found" or (raw.show_rc == 0 and not show.load_state and not show.active_state)


def since(show: UnitShow, state: State) -> datetime | None:
    """When the unit entered what ``state`` describes (the start of a load, of a stop, of a failure)."""
    if state in ("loading", "ready", "unhealthy"):
        return show.active_enter or show.exec_main_start
    if state == "starting":
        return show.state_change or show.active_enter
    if state == "stopped":
        return show.inactive_enter or show.state_change
    return show.state_change or show.inactive_enter or show.active_enter


def classify(
    show: UnitShow, raw: UnitRaw, progress: LoadProgress, now: datetime | None
) -> tuple[State, str | None]:
    """The service state and, for every state but ready, a short reason."""
    if unit_missing(show, raw):
        return "failed", f"unit {raw.unit} not found on the node"
    if raw.show_rc != 0:
        first = raw.show.strip().splitlines()[0] if raw.show.strip() else f"exit {raw.show_rc}"
        return "failed", f"systemctl show failed: {first}"
    active, sub = show.active_state, show.sub_state
    if active == "activating":
        return _activating(show, progress)
    if active == "failed":
        detail = f"Result={show.result or 'unknown'}"
        if show.result == "start-limit-hit":
            detail += " (started too often; run `systemctl reset-failed` before starting again)"
        elif show.exec_main_status:
            detail += f", exit status {show.exec_main_status}"
        return "failed", detail
    if active in ("inactive", "deactivating"):
        return "stopped", f"{active} ({sub})" if sub else active
    if active not in ("active", "reloading"):
        return "failed", f"{active} ({sub})"
    return _active(show, raw, progress, now)


def _activating(show: UnitShow, progress: LoadProgress) -> tuple[State, str | None]:
    sub = show.sub_state
    if sub == "auto-restart":
        result = show.result or "exit-code"
        return "failed", f"crash loop: restarting after Result={result} (restarts: {show.n_restarts})"
    if sub == "start-pre":
        return "starting", "ExecStartPre still running" + (
            " (waiting for GPU memory)" if progress.phase == "waiting_for_gpu" else ""
        )
    return "starting", f"activating ({sub})"


def _active(show: UnitShow, raw: UnitRaw, progress: LoadProgress, now: datetime | None) -> tuple[State, str | None]:
    """An active unit: restarting too often, a failed load, or what ``/health`` says."""
    started = show.active_enter or show.exec_main_start
    if (
        show.n_restarts >= CRASH_LOOP_RESTARTS and now is not None and started is not None
        and now - started < CRASH_LOOP_WINDOW
    ):
        age = int((now - started).total_seconds())
        return "failed", f"keeps restarting: {show.n_restarts} restarts, current start {age}s ago"
    if progress.failed:
        return "failed", f"the load failed: {progress.failed}"
    health = raw.health
    if health is None:
        return "loading", "no API URL known for this service"
    was_ready = progress.phase == "ready"
    if health.status == 200:
        return "ready", None
    if health.status is not None:
        return "unhealthy", f"/health answered {health.status} on {raw.url}"
    reason = f"{health.error} on {raw.url}"
    if was_ready:
        return "unhealthy", f"{reason} (it was ready earlier in this start)"
    return "loading", reason
