"""Following a load to its end: the poll state machine from "restart sent" to ✅ or ❌.

Business rules only (no Slack, no scheduler): a job calls :func:`poll_follow` every ``[watch] poll``
(``handlers/watcher.py`` starts follows for restarts nobody asked inferbot for; the notices' words are in
``handlers/notice_words.py``; each goes out through ``handlers/notice_pipeline.py``, and the progress
message is ``handlers/progress.py``). Everything a follow must remember lives in the store, so a bot that
is killed mid-load and started again carries on where it was, and every final notice is posted exactly
once per place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from config.models import Service
from handlers.acceptance import after_ready
from handlers.audit import record
from handlers.common import PHASE_WORDS, fmt_duration
from handlers.context import Context, require_store
from handlers.live import apply_history
from handlers.notice_pipeline import HELD_TS, Notice, Where, all_done, deliver, deliver_all, was_held
from handlers.notice_words import AUTO_RESTART, failed_notice, progress_text, ready_notice, unplanned_notice
from handlers.notify import Notifier, dashboards_changed, jobs_of, notice_text
from handlers.progress import end_progress, show_progress
from handlers.reply import Reply
from handlers.smoke import smoke_failure, smoke_gate, with_smoke
from services.models import ServiceState
from services.node.assemble import expected_model
from services.node.probe import ProbeOptions
from services.store.ports import Follows, Loads, StateStore
from services.store.records import AWAITING_START, Follow, FollowReason, LoadOutcome, LoadRecord

# models: once /health answers, the model must also be listed by /v1/models (when the bot holds the key).
FOLLOW_PROBE = ProbeOptions(gpus=False, metrics_samples=0, http_timeout_s=3.0, models=True)
# GPUs: an out-of-memory failure names the leftover vLLM processes that held them (issue 14).
FAIL_PROBE = ProbeOptions(gpus=True, log_lines=20, http_timeout_s=3.0)
BEFORE = AWAITING_START
"""A follow recorded just before the restart command carries ``before:<the old invocation id>`` until a
poll sees a different start: until then the old run must not be taken for the new one."""
RESTART_TAKES_EFFECT_S = 120.0
"""A restart whose new start is not visible after this long did not happen (the bot died before
running the command, or the command never reached the node)."""
STOPPED_GRACE_S = 5.0
"""A unit seen stopped this soon after the start is between ``stop`` and ``start``, not failed."""
LOCK_MARGIN_S = 900.0



def follow_key(service: str, node: str) -> str:
    """The follow key (and job id suffix) of service@node."""
    return f"{service}@{node}"


def lock_name(service: str, node: str) -> str:
    """The in-flight restart lock of service@node."""
    return f"restart:{service}@{node}"


def lock_ttl(ctx: Context) -> float:
    """How long a restart lock lives: the longest load plus a margin, so a dead bot's lock expires."""
    return ctx.config.watch.max_load + LOCK_MARGIN_S


@dataclass
class FollowStatus:
    """What one poll saw: whether the follow is over, how, and a line for a live terminal display."""

    key: str
    finished: bool
    outcome: str | None = None
    state: ServiceState | None = None
    line: str = ""
    pending_notices: bool = False


async def start_follow(
    ctx: Context,
    service: Service,
    reason: FollowReason,
    started_at: datetime,
    invocation_id: str | None = None,
    thread_channel: str | None = None,
    thread_ts: str | None = None,
    request_id: str | None = None,
    schedule: bool = True,
) -> Follow:
    """Record a load to follow and schedule its polling (when a scheduler is running and ``schedule``)."""
    key = follow_key(service.name, service.node)
    await require_store(ctx).shared.forget_progress(key)  # a new load: its first progress edit is not paced
    f = await require_store(ctx).follows.upsert(
        key, service.name, service.node, service.unit, invocation_id, started_at, reason,
        thread_channel=thread_channel, thread_ts=thread_ts, progress_message_ts=None, request_id=request_id,
    )
    jobs = jobs_of(ctx)
    if jobs is not None and schedule:
        jobs.follow(key)
    return f


async def _update_follow(follows: Follows, f: Follow, **changes: object) -> Follow:
    """Rewrite some fields of a follow (the store's upsert overwrites every field)."""
    g = f.model_copy(update=changes)
    return await follows.upsert(
        g.key, g.service, g.node, g.unit, g.invocation_id, g.started_at, g.reason,
        thread_channel=g.thread_channel, thread_ts=g.thread_ts, progress_message_ts=g.progress_message_ts,
        request_id=g.request_id,
    )


# ------------------------------------------------------------------------------------------------
# One poll of a followed load


def _outcome(st: ServiceState, f: Follow, now: datetime, max_load: float) -> tuple[LoadOutcome, str] | None:
    """The final outcome this probe shows, or None while the load goes on."""
    elapsed = (now - f.started_at).total_seconds()
    if st.state == "ready":
        expected = expected_model(st)
        if st.served_models is not None and expected and expected not in st.served_models:
            # /health is up but the model is not served yet: keep following until max_load.
            if elapsed > max_load:
                return "timeout", f"timed out: /health is up but /v1/models does not list {expected}"
            return None
        return "ready", ""
    if st.state in ("failed", "unhealthy"):
        return "failed", st.reason or st.state
    if st.state == "stopped" and elapsed > STOPPED_GRACE_S:
        return "failed", f"the unit is stopped ({st.reason or 'inactive'})"
    if elapsed > max_load:
        what = (st.phase and PHASE_WORDS.get(st.phase)) or st.state
        return "timeout", f"timed out: not ready after {fmt_duration(max_load)} (still {what})"
    return None


def _not_started(f: Follow, st: ServiceState, now: datetime) -> tuple[LoadOutcome, str] | None:
    """The restart has not shown a new start yet: fine for a while (as long as systemd says it will start the
    unit again after ``RestartSec=``), a failure after that."""
    if st.active == AUTO_RESTART:
        return None
    if f.reason == "unplanned" and st.state == "failed":
        return "failed", st.reason or "failed"  # a crash systemd gave up restarting (its start limit)
    if (now - f.started_at).total_seconds() <= RESTART_TAKES_EFFECT_S:
        return None
    return "failed", (f"the restart did not take effect: no new start of {f.unit} after "
                      f"{fmt_duration(RESTART_TAKES_EFFECT_S)} — check `systemctl status {f.unit}` on {f.node}")


def _load_id(f: Follow) -> str:
    # Mirrors the store: an empty invocation id is recorded as "start:<started_at ISO>".
    return f.invocation_id or f"start:{f.started_at.astimezone(UTC).isoformat()}"


async def _decided(loads: Loads, f: Follow) -> LoadRecord | None:
    """The outcome an earlier poll already recorded for this load (notices still to post)."""
    last = await loads.last(f.service, f.node)
    if last is not None and last.invocation_id == _load_id(f):
        return last
    return None


async def _post_unplanned(ctx: Context, f: Follow, notifier: Notifier, now: datetime) -> Follow:
    """The ⚠️ notice of an unplanned restart (once), whose thread then carries the progress message."""
    channel = ctx.config.notify.channel
    if f.reason != "unplanned" or not channel or f.thread_ts:
        return f
    # A silence holds it back (audited instead); its load's ✅ is held back too (a ❌ is not).
    out = await deliver(ctx, notifier, Notice(f.key, Where("unplanned", channel), unplanned_notice(f), f.service,
                                              f.node), now)
    if out.done and out.ts:
        f = await _update_follow(require_store(ctx).follows, f, thread_channel=channel, thread_ts=out.ts)
    return f


def places(ctx: Context, f: Follow) -> list[Where]:
    """Where the final notice goes: the thread the restart was asked in, and the notify channel."""
    out: list[Where] = []
    if f.reason in ("restart", "change") and f.thread_channel:
        out.append(Where("thread", f.thread_channel, f.thread_ts))
    if ctx.config.notify.channel:
        out.append(Where("notify", ctx.config.notify.channel))
    return out


def _stop(ctx: Context, key: str) -> None:
    jobs = jobs_of(ctx)
    if jobs is not None:
        jobs.stop_follow(key)


async def poll_follow(ctx: Context, key: str, notifier: Notifier | None) -> FollowStatus:
    """Probe the followed unit once; keep the progress message current; post final notices exactly once.

    Returns the status; when ``finished`` the job has been removed (through ``Context.jobs``).
    ``notifier`` None: this process can't post (the terminal): the outcome is still decided and the
    restart lock released, and the notices are left to a process that can post (``inferbot serve``).
    """
    store = require_store(ctx)
    f = await store.follows.get(key)
    if f is None or not f.active:
        _stop(ctx, key)
        return FollowStatus(key, True, outcome=f.outcome if f else None)
    service = ctx.config.service(f.service, f.node)
    if service is None:
        await store.follows.finish(key, "gone")
        _stop(ctx, key)
        return FollowStatus(key, True, outcome="gone", line=f"{key} is no longer in the config")
    now = ctx.now()
    if notifier is not None:
        f = await _post_unplanned(ctx, f, notifier, now)
    decided = await _decided(store.loads, f)
    if decided is not None:  # an earlier poll saw the end: only its notices may be left
        return await _conclude(ctx, service, f, decided, "", None, notifier, now)
    look = await _look(ctx, service, f, now)
    f, st = look.follow, look.state
    if look.found is None:
        if st.phase and not look.waiting_for_start:  # when each phase began: `chart loads`
            await store.loads.record_phase(f.service, f.node, _load_id(f), st.phase, now)
        if notifier is not None:
            f = await show_progress(ctx, f, st, notifier, now)
        await dashboards_changed(ctx, key)  # the Home tabs show this load's progress (paced there)
        return FollowStatus(key, False, state=st, line=progress_text(f, st, now))
    outcome, reason = look.found
    await store.loads.record(f.service, f.node, f.invocation_id or "", f.started_at,
                             now if outcome == "ready" else None, outcome, (now - f.started_at).total_seconds())
    decided = await _decided(store.loads, f)
    if decided is None:  # pragma: no cover - the store just recorded it
        return FollowStatus(key, False, state=st)
    return await _conclude(ctx, service, f, decided, reason, st, notifier, now)


@dataclass
class _Look:
    """One probe of a followed load: the follow (its start now known), what the unit says, and the end if seen."""

    follow: Follow
    state: ServiceState
    waiting_for_start: bool
    found: tuple[LoadOutcome, str] | None


async def _look(ctx: Context, service: Service, f: Follow, now: datetime) -> _Look:
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(f.node)], FOLLOW_PROBE)
    st = snap.services[0]
    await apply_history(ctx, [st])
    waiting_for_start = False
    if f.invocation_id and f.invocation_id.startswith(BEFORE):
        old = f.invocation_id.removeprefix(BEFORE)
        waiting_for_start = st.state == "unreachable" or not st.invocation_id or st.invocation_id == old
    if not waiting_for_start and st.state != "unreachable" and st.invocation_id \
            and st.invocation_id != f.invocation_id:
        # Unknown until now, or the unit started again (crash loop, restart by hand): this is the load.
        f = await _new_load(require_store(ctx), f, st.invocation_id)
    found = _not_started(f, st, now) if waiting_for_start else _outcome(st, f, now, ctx.config.watch.max_load)
    if found is not None and found[0] == "ready":  # issue 14: one tiny completion before the ✅
        found = await smoke_gate(ctx, service, f, st)
    return _Look(f, st, waiting_for_start, found)


async def _new_load(store: StateStore, f: Follow, invocation_id: str) -> Follow:
    """The follow now follows the start ``invocation_id``; a ⚠️ a silence held back for the start it waited
    for (a crash said before systemd started the unit again) stays held for this one, so its ✅ is too."""
    held = f.reason == "unplanned" and await was_held(store.notices, f.key, "unplanned")
    f = await _update_follow(store.follows, f, invocation_id=invocation_id)
    if held and await store.notices.claim(f.key, "unplanned"):
        await store.notices.mark_sent(f.key, "unplanned", HELD_TS)
    return f


async def _conclude(ctx: Context, service: Service, f: Follow, decided: LoadRecord, reason: str,
                    st: ServiceState | None, notifier: Notifier | None, now: datetime) -> FollowStatus:
    """The load is over: its notices (once each, through the pipeline), then the follow ends."""
    store = require_store(ctx)
    outcome = decided.outcome
    # The restart is over once its new start is seen ready or failed: end its lock now, not when the
    # notices are out (they may wait for a process that can post them).
    await _restart_over(store, f, outcome, now)
    notice, st = await _final_notice(ctx, service, f, decided, reason, st)
    line = notice_text(notice)
    # The ✅ of an unplanned restart a silence held back is held back too.
    held = f.reason == "unplanned" and outcome == "ready" and await was_held(store.notices, f.key, "unplanned")
    done = all_done(await deliver_all(ctx, notifier, [Notice(f.key, where, notice, f.service, f.node, closes_held=held)
                                                      for where in places(ctx, f)], now))
    if done and outcome == "ready" and notifier is not None:  # issue 14: the acceptance benchmark
        done = await after_ready(ctx, service, f, places(ctx, f), notifier, now)
    if not done:
        return FollowStatus(f.key, False, outcome=outcome, state=st, line=line, pending_notices=True)
    if await store.follows.finish(f.key, outcome, at=now):
        await _finished(ctx, f, outcome, line, notifier, now)
        await dashboards_changed(ctx, f.key)
    _stop(ctx, f.key)
    return FollowStatus(f.key, True, outcome=outcome, state=st, line=line)


async def _final_notice(ctx: Context, service: Service, f: Follow, decided: LoadRecord, reason: str,
                        st: ServiceState | None) -> tuple[Reply, ServiceState | None]:
    """The ✅ (with the previous load's time and the smoke completion) or the ❌ (with a fresh look's journal)."""
    store = require_store(ctx)
    if decided.outcome == "ready":
        durations = await store.loads.durations(f.service, f.node, limit=2)
        previous = durations[1] if len(durations) > 1 else None
        return await with_smoke(ctx, f, ready_notice(f, decided.duration_s, previous)), st
    detail = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], FAIL_PROBE)
    st = detail.services[0]
    if not reason:
        reason = await smoke_failure(ctx, f) or st.reason or decided.outcome
        if decided.outcome == "timeout":
            reason = f"timed out: not ready after {fmt_duration(ctx.config.watch.max_load)}"
    return failed_notice(f, reason, st, timed_out=decided.outcome == "timeout"), st


async def _restart_over(store: StateStore, f: Follow, outcome: str, now: datetime) -> None:
    """The restart ``f`` follows has ended (idempotent): its request is done or failed, its lock released.

    A settings change's load (reason ``change``) releases the lock only: the change goes on to verify, and its
    own state machine ends its request (``handlers/change/machine.py``)."""
    if f.request_id:
        if f.reason == "restart":
            await store.requests.transition(f.request_id, {"running"}, "done" if outcome == "ready" else "failed",
                                            None, now)
        await store.locks.release(lock_name(f.service, f.node), f.request_id)


async def _finished(ctx: Context, f: Follow, outcome: str, line: str, notifier: Notifier | None,
                    now: datetime) -> None:
    """Once per load (the caller won ``follows.finish``): request state, lock, audit, last progress edit."""
    store = require_store(ctx)
    await _restart_over(store, f, outcome, now)
    if f.request_id and f.reason == "restart" and not await store.audit.has("restart.executed", f.request_id):
        # The replica that ran the command died before writing it down; this load is its proof.
        await record(ctx, "restart.executed", f.service, f.node, "recorded when the load ended: the bot that ran "
                     "the restart stopped before writing it down", request_id=f.request_id, who="inferbot")
    await record(ctx, f"load.{outcome}", f.service, f.node, line, request_id=f.request_id,
                 who="inferbot", where=ctx.config.notify.channel or "inferbot")
    if notifier is not None:
        await end_progress(ctx, f, outcome, notifier, now)


def reset_pacing() -> None:
    """Kept for callers: progress pacing lives in the store now (``StateStore.shared``), per database."""
