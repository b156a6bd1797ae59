"""Is a change to be kept? Its load reached ✅ (ready and the smoke completion: the follow's own gate), and for
``[services.changes] verify_window`` after that: no crash, unhealthy or hung notice fired (the watchers write
each to the audit log, silenced or not), the same start still runs (the bot's own look, for when no watcher
runs), and the acceptance benchmark (when on) shows no regression beyond ``regression_pct``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta

from handlers.acceptance import run_bench
from handlers.change.act import Target, look
from handlers.context import require_store
from services.store.records import AuditEntry

WATCHED = frozenset({"restart.unplanned", "health.unhealthy", "health.hung", "health.stopped_unexpectedly"})
"""The watchers' events that fail a change inside its verify window (one per notice they fire)."""
AUDIT_LOOKBACK = 200


@dataclass(frozen=True)
class Verdict:
    """``done``: the window is over and every check passed; ``reason``: a check failed (why)."""

    done: bool = False
    reason: str | None = None


def bench_run_id(t: Target) -> str:
    """The acceptance benchmark's id of the change's load (the follow runs it under the same id)."""
    return f"ready:{t.key}:{t.step.invocation or ''}"


async def _fired(t: Target) -> AuditEntry | None:
    ready = t.step.ready_at
    if ready is None:
        return None
    entries = await require_store(t.ctx).audit.recent(service=t.service.name, limit=AUDIT_LOOKBACK)
    return next((e for e in reversed(entries) if e.event in WATCHED and e.node == t.service.node
                 and e.at.astimezone(UTC) >= ready.astimezone(UTC)), None)


async def _still_running(t: Target) -> str | None:
    st = await look(t)
    if st.state == "unreachable":
        return None  # cannot tell now; the watchers and the next look can
    if st.invocation_id and t.step.invocation and st.invocation_id != t.step.invocation:
        return f"{t.service.name} on {t.service.node} started again by itself (a crash) within the verify window"
    if st.state in ("failed", "stopped"):
        return f"{t.service.name} on {t.service.node} {st.state} within the verify window ({st.reason or st.state})"
    return None


async def _bench(t: Target) -> Verdict | None:
    """None: passed or off; a verdict to wait (the benchmark runs) or to fail."""
    service = t.service
    if not service.acceptance.bench or not service.bench_dir:
        return None
    reply = await run_bench(t.ctx, service, bench_run_id(t))  # runs it once, here or wherever the follow does
    if reply is None:
        return Verdict()
    verdict = str(reply.data.get("verdict", "failed"))
    if verdict == "regression":
        return Verdict(reason=f"the acceptance benchmark shows a regression beyond "
                              f"{service.acceptance.regression_pct:g} %: {reply.title}")
    if verdict == "failed":
        return Verdict(reason=f"the acceptance benchmark failed: {reply.title}")
    return None


async def verdict(t: Target) -> Verdict:
    """Where the verification of this node stands now."""
    fired = await _fired(t)
    if fired is not None:
        said = (f"{t.service.name} on {t.service.node} restarted by itself ({fired.detail})"
                if fired.event == "restart.unplanned" else fired.detail)
        return Verdict(reason=f"{said} — within the verify window")
    crashed = await _still_running(t)
    if crashed is not None:
        return Verdict(reason=crashed)
    bench = await _bench(t)
    if bench is not None:
        return bench
    ready = t.step.ready_at or t.ctx.now()
    if t.ctx.now() < ready + timedelta(seconds=t.service.changes.verify_window):
        return Verdict()
    return Verdict(done=True)
