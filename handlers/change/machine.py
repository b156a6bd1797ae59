"""The state machine of a settings change, one tick at a time, with everything it needs in the store.

A change (``proposed`` → ``running`` → ``kept`` | ``reverted`` | ``rolled_back`` | ``rollback_failed`` |
``failed``) has a step per node, each on its own path::

    waiting → applying → loading → verifying → kept
                  │          └──────────┴──→ rolling_back → unapplying → restoring → rolled_back
                  │                                              └───────────┴──→ rollback_failed
                  └→ failed (nothing restarted; or rollback = false)          waiting → skipped

The first node goes first; the others only once it is kept, ``[services.changes] max_parallel`` at a time, and
none after a failure. A tick (:func:`advance`) moves each step as far as what it sees allows — every move a
compare-and-set in the store, every side effect behind one — then delivers the notices the change's state
implies through the notice pipeline (once per place). The scheduler leader's settle job ticks it
(``ChangeKind.settle``), so a bot started again or a new leader carries on with the same change; the terminal's
``--wait`` ticks it too, and whoever moves a step first does it, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC

from config.models import Service
from handlers.audit import record
from handlers.change import act, verify
from handlers.change.act import Target
from handlers.change.guard import change_lock
from handlers.change.words import (
    FINAL_STEPS,
    ROLLING_BACK,
    back_notice,
    failed_notice,
    kept_notice,
    outcome_line,
    rollback_failed_notice,
    settings_of,
    stopped_notice,
)
from handlers.common import fmt_duration
from handlers.context import Context, require_store
from handlers.follow import FAIL_PROBE, LOCK_MARGIN_S
from handlers.notice_pipeline import Notice, Where, all_done, deliver_all
from handlers.notify import Notifier
from handlers.reply import Reply
from handlers.smoke import smoke_failure
from services.change.apply import by_hand
from services.store.records import CHANGE_FINAL as FINAL
from services.store.records import ChangeRecord, ChangeStep, ConfirmableRequest, Follow, LoadRecord

ACTIVE = frozenset({"applying", "loading", "verifying", "rolling_back", "unapplying", "restoring"})
FAILED = frozenset({"failed", *ROLLING_BACK})
"""Steps whose change failed: no node starts after one."""
RECENT_LOADS = 10


@dataclass(frozen=True)
class Tick:
    """Where a change is after a tick: ``decided`` (kept or rolled back, ``ok`` when kept), and whether every
    notice it implies is out (``False`` also where nobody can post them: the terminal)."""

    decided: bool
    ok: bool
    notices_done: bool
    change: ChangeRecord | None


def lock_ttl(ctx: Context, service: Service, nodes: int) -> float:
    """How long the change lock lives between two ticks' renewals (a stopped bot's lock expires)."""
    return (ctx.config.watch.max_load + service.changes.verify_window + LOCK_MARGIN_S) * max(1, nodes)


async def advance(ctx: Context, change_id: str, notifier: Notifier | None) -> Tick:
    """One tick of the change ``change_id``: its steps moved, new nodes started, the end decided, notices out."""
    store = require_store(ctx)
    ch = await store.changes.get(change_id)
    if ch is None:
        return Tick(True, False, True, None)
    req = await store.requests.get(change_id)
    if ch.state == "running":
        first = ctx.config.service(ch.service, ch.node)
        if first is not None:  # renewed: it must outlive no tick
            await store.locks.acquire(change_lock(ch.service), ch.id, lock_ttl(ctx, first, len(ch.steps)), ctx.now())
        for step in ch.steps:
            await _step(ctx, ch, step, req)
        ch = await _schedule(ctx, await _fresh(ctx, ch), req)
        if all(s.state in FINAL_STEPS for s in ch.steps):
            ch = await _decide(ctx, ch)
    done = await deliver_notices(ctx, ch, req, notifier)
    return Tick(ch.state in FINAL, ch.state in ("kept", "reverted"), done, ch)


async def _fresh(ctx: Context, ch: ChangeRecord) -> ChangeRecord:
    return await require_store(ctx).changes.get(ch.id) or ch


def _target(ctx: Context, ch: ChangeRecord, step: ChangeStep, req: ConfirmableRequest | None) -> Target | None:
    service = ctx.config.service(ch.service, step.node)
    return Target(ctx, ch, step, service, req) if service is not None else None


async def _step(ctx: Context, ch: ChangeRecord, step: ChangeStep, req: ConfirmableRequest | None) -> None:
    """Move one node's step as far as what it sees allows."""
    t = _target(ctx, ch, step, req)
    if t is None:
        if step.state not in FINAL_STEPS:
            await require_store(ctx).changes.move_step(ch.id, step.node, {step.state}, "failed", ctx.now(), {
                "reason": f"{ch.service} on {step.node} is no longer in the config", "detail": "nothing more was done"})
        return
    if step.state in ("applying", "unapplying"):
        await act.recover(t)
    elif step.state in ("loading", "restoring"):
        await _loaded(t)
    elif step.state == "verifying":
        found = await verify.verdict(t)
        if found.reason is not None:
            await act.fail(t, {"verifying"}, found.reason)
        elif found.done and await t.move({"verifying"}, "kept"):
            await t.audit("verified", f"kept after {fmt_duration(t.service.changes.verify_window)} of verification")
    elif step.state == "rolling_back":
        await act.roll_back(t)


def _same(f: Follow, t: Target) -> bool:
    at = t.step.load_started_at
    return f.request_id == t.ch.id and at is not None and abs((f.started_at - at).total_seconds()) < 0.001


async def _load_of(t: Target) -> tuple[bool, LoadRecord | None, Follow | None]:
    """(over, how it ended, its follow) for the load the step follows."""
    store = require_store(t.ctx)
    f = await store.follows.get(t.key)
    if f is not None and _same(f, t):
        last = await store.loads.last(t.service.name, t.service.node)
        load_id = f.invocation_id or f"start:{f.started_at.astimezone(UTC).isoformat()}"
        if last is not None and last.invocation_id == load_id:
            return True, last, f
        return not f.active, None, f
    # The watcher followed a later start of the unit since: this load ended before it.
    recent = await store.loads.recent(t.service.name, t.service.node, RECENT_LOADS)
    mine = next((r for r, _ in reversed(recent) if t.step.invocation and r.invocation_id == t.step.invocation), None)
    return True, mine, None


async def _why_not_ready(t: Target, load: LoadRecord | None, f: Follow | None) -> str:
    if load is None:
        return "its load was not followed to its end"
    if load.outcome == "timeout":
        return f"the load timed out: not ready after {fmt_duration(t.ctx.config.watch.max_load)}"
    smoke = await smoke_failure(t.ctx, f) if f is not None else None
    if smoke:
        return f"the smoke completion failed: {smoke}"
    snap = await t.ctx.cluster.snapshot([t.service], [t.node], FAIL_PROBE)
    st = snap.services[0]
    return f"the load failed: {st.reason or st.state}"


async def _loaded(t: Target) -> None:
    """The load of a step (``loading``: the change's; ``restoring``: the rollback's), once it is over."""
    over, load, f = await _load_of(t)
    if not over:
        return
    ok = load is not None and load.outcome == "ready"
    if t.step.state == "loading":
        if not ok:
            await act.fail(t, {"loading"}, await _why_not_ready(t, load, f))
            return
        assert load is not None
        await t.move({"loading"}, "verifying", {"ready_at": load.ready_at or t.ctx.now(), "load_s": load.duration_s,
                                                "invocation": load.invocation_id})
        return
    if ok:
        assert load is not None
        if await t.move({"restoring"}, "rolled_back", {"back_s": load.duration_s}):
            await t.audit("rolled_back", f"back on the settings of {settings_of(t.ch, t.step)} — loaded in "
                                         f"{fmt_duration(load.duration_s)}")
        return
    why = await _why_not_ready(t, load, f)
    detail = (f"the previous settings did not load either ({why}); on disk: {act.on_disk(t)}; to give "
              f"{t.service.name} the operator's own settings back by hand on {t.service.node}: "
              f"`{by_hand(t.service)}`")
    if await t.move({"restoring"}, "rollback_failed", {"detail": detail}):
        await t.audit("rollback_failed", detail)


async def _schedule(ctx: Context, ch: ChangeRecord, req: ConfirmableRequest | None) -> ChangeRecord:
    """Start the nodes whose turn it is; after a failure, none (they are skipped)."""
    store = require_store(ctx)
    steps = ch.steps
    if any(s.state in FAILED for s in steps):
        for s in steps:
            if s.state == "waiting":
                await store.changes.move_step(ch.id, s.node, {"waiting"}, "skipped", ctx.now(),
                                              {"reason": None, "detail": "not applied: an earlier node failed"})
        return await _fresh(ctx, ch)
    first = ctx.config.service(ch.service, ch.node)
    limit = first.changes.max_parallel if first is not None else 1
    if steps[0].state == "waiting":
        turn = [steps[0]]
    elif steps[0].state == "kept":
        turn = [s for s in steps[1:] if s.state == "waiting"]
    else:
        turn = []
    busy = sum(s.state in ACTIVE for s in steps)
    for s in turn:
        if busy >= limit:
            break
        t = _target(ctx, ch, s, req)
        if t is not None:
            await act.apply(t)
            busy += 1
    return await _fresh(ctx, ch)


async def _decide(ctx: Context, ch: ChangeRecord) -> ChangeRecord:
    """Every node is done: the change's end (once), its audit, and the next change may be asked."""
    states = {s.state for s in ch.steps}
    if states == {"kept"}:
        final = "reverted" if ch.op == "revert" else "kept"
    elif "rollback_failed" in states:
        final = "rollback_failed"
    elif "rolled_back" in states:
        final = "rolled_back"
    else:
        final = "failed"
    store = require_store(ctx)
    if await store.changes.move(ch.id, {"running"}, final, ctx.now(), {"outcome": outcome_line(ch, final)}):
        if final == "reverted":
            await record(ctx, "change.reverted", ch.service, ch.node, f"change #{ch.number}: inferbot's drop-in "
                             "removed, the operator's unit verified", request_id=ch.id, who="inferbot")
        await store.locks.release(change_lock(ch.service), ch.id)
    return await _fresh(ctx, ch)


def _places(ctx: Context, req: ConfirmableRequest | None) -> list[Where]:
    out: list[Where] = []
    if req is not None and req.channel:
        out.append(Where("thread", req.channel, req.thread_ts or req.message_ts))
    if ctx.config.notify.channel:
        out.append(Where("notify", ctx.config.notify.channel))
    return out


async def _smoke_passed(ctx: Context, ch: ChangeRecord) -> bool:
    """True when the smoke completion of every node's kept load passed (not skipped, e.g. for want of a key)."""
    store = require_store(ctx)
    checks = [await store.smoke_checks.get(ch.service, s.node, s.invocation or "") for s in ch.steps]
    return all(c is not None and c.outcome == "ok" for c in checks)


async def implied(ctx: Context, ch: ChangeRecord) -> list[tuple[str, str, Reply]]:
    """Every notice the change's state implies so far: (what, node, words), in the order they happened."""
    out: list[tuple[str, str, Reply]] = []
    for s in ch.steps:
        if s.state in ROLLING_BACK or (s.state == "failed" and s.reason):
            out.append((f"failed:{s.node}", s.node, failed_notice(ch, s)))
        if s.state == "rolled_back":
            out.append((f"back:{s.node}", s.node, back_notice(ch, s)))
        if s.state == "rollback_failed":
            out.append((f"rollback_failed:{s.node}", s.node, rollback_failed_notice(ch, s)))
    first = ctx.config.service(ch.service, ch.node)
    if ch.state in ("kept", "reverted") and first is not None:
        out.append(("kept", ch.node, kept_notice(ch, first, smoke_passed=await _smoke_passed(ctx, ch))))
    elif ch.state in FINAL and len(ch.steps) > 1 and ch.state != "refused":
        out.append(("end", ch.node, stopped_notice(ch)))
    return out


async def deliver_notices(ctx: Context, ch: ChangeRecord, req: ConfirmableRequest | None,
                          notifier: Notifier | None) -> bool:
    """Deliver what the change's state implies, once per place (True when nothing is left to post)."""
    notices = [Notice(f"change:{ch.id}", Where(f"{w.place}:{what}", w.channel, w.thread_ts), reply, ch.service, node)
               for what, node, reply in await implied(ctx, ch) for w in _places(ctx, req)]
    return all_done(await deliver_all(ctx, notifier, notices))
