"""The two acts of a settings change on one node: apply (inferbot's drop-in written, ``daemon-reload``, restart)
and roll back (the previous drop-in restored or ours removed, ``daemon-reload``, restart), each followed like a
restart (``handlers/follow.py``, reason ``change``).

Each act is taken by one process: a compare-and-set moves the step (``waiting`` → ``applying``, ``rolling_back``
→ ``unapplying``), and the act records its follow *before* it touches the node. A process that stops in the
middle leaves a step the next one can finish (:func:`recover`): a follow recorded means the node may have been
touched and the follow decides (a new start, or "the restart did not take effect", which rolls back); no follow
means nothing was written and the act is taken again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import JsonValue

from config.models import Node, Service
from handlers.audit import record
from handlers.context import Context, require_store
from handlers.follow import BEFORE, RESTART_TAKES_EFFECT_S, follow_key, lock_name, lock_ttl, start_follow
from services.change.apply import Applied, apply_plan, by_hand, restore
from services.change.catalogue import table_for
from services.change.plan import Plan, PlanRefused, plan_change
from services.change.preflight import run_preflight
from services.change.spec import ChangeSpec
from services.models import ServiceState
from services.node import change as remote
from services.node.probe import ProbeOptions
from services.node.restart import RESTART_WAIT_S, RestartResult, execute_restart
from services.node.ssh import NodeUnreachable
from services.store.records import ChangeRecord, ChangeStep, ConfirmableRequest

LOOK_PROBE = ProbeOptions(gpus=False, journal_lines=0, metrics_samples=0, http_timeout_s=3.0)
"""What an act reads first: the start it replaces (invocation, since when), the state, the vLLM version."""
ROLLBACK_OFF = "rollback is off ([services.changes] rollback = false): the new settings stay"
NOT_WRITTEN = "nothing was written or restarted"
STALE_MARGIN_S = 60.0


@dataclass(frozen=True)
class Target:
    """One node of one change, and what acting on it needs."""

    ctx: Context
    ch: ChangeRecord
    step: ChangeStep
    service: Service
    req: ConfirmableRequest | None

    @property
    def node(self) -> Node:
        """The node's config."""
        return self.ctx.config.node(self.service.node)

    @property
    def key(self) -> str:
        """The follow key of this node's service."""
        return follow_key(self.service.name, self.service.node)

    @property
    def change_id(self) -> str:
        """``#12``: how the drop-in's header names the change."""
        return f"#{self.ch.number}"

    async def audit(self, event: str, detail: str) -> None:
        """Audit ``change.<event>`` for this node of the change."""
        await record(self.ctx, f"change.{event}", self.service.name, self.service.node, detail,
                     request_id=self.ch.id, who="inferbot")

    async def move(self, from_states: set[str], to_state: str, fields: dict[str, object] | None = None,
                   if_at: datetime | None = None) -> bool:
        """Move this node's step (compare-and-set); True for the one caller that moved it."""
        return await require_store(self.ctx).changes.move_step(self.ch.id, self.step.node, from_states, to_state,
                                                              self.ctx.now(), fields, if_at)


def spec_of(data: Mapping[str, JsonValue] | None) -> ChangeSpec | None:
    """A stored delta as a spec (None or empty: no inferbot drop-in)."""
    spec = ChangeSpec.model_validate(data) if data else None
    return spec if spec is not None and not spec.is_empty() else None


async def look(t: Target) -> ServiceState:
    """The unit as it is now (one probe)."""
    snap = await t.ctx.cluster.snapshot([t.service], [t.node], LOOK_PROBE, wait_s=RESTART_WAIT_S)
    return snap.services[0]


async def plan_for(t: Target, st: ServiceState) -> Plan | str:
    """The plan against the unit as it is now, or why there is none (nothing was written)."""
    pool, number = t.ctx.cluster.pool, t.change_id
    if t.ch.op == "revert":
        try:
            read = await remote.read_unit(pool, t.node, t.service)
        except NodeUnreachable as e:
            return f"{t.node.name} could not be asked: {e.error.reason}"
        made = plan_change(read.source, ChangeSpec(), table_for(st.version)[0], number, replace=True)
        if isinstance(made, PlanRefused):
            return made.reason
        return made if made.action != "nothing" else f"inferbot has no drop-in on {t.node.name}: nothing to revert"
    spec = ChangeSpec.model_validate(t.ch.spec or {})
    pf = await run_preflight(pool, t.node, t.service, spec, change_id=number, version=st.version, node_parser=False)
    failed = pf.failure
    if failed is not None or pf.plan is None:
        why = f"{failed.name}: {failed.detail}" if failed is not None else "no plan could be made"
        return f"the preflight no longer passes on {t.node.name} ({why})"
    return pf.plan


def _thread(t: Target) -> tuple[str | None, str | None]:
    if t.req is None:
        return None, None
    return t.req.channel, t.req.thread_ts or t.req.message_ts


async def _follow(t: Target, st: ServiceState, at: datetime, invocation: str | None = None) -> None:
    channel, thread = _thread(t)
    await start_follow(t.ctx, t.service, "change", at, invocation_id=invocation or BEFORE + st.invocation_id,
                       thread_channel=channel, thread_ts=thread, request_id=t.ch.id, schedule=invocation is not None)


async def fail(t: Target, from_states: set[str], reason: str) -> bool:
    """The change failed on this node: roll back (unless ``rollback = false``). True for the caller that moved it."""
    if t.service.changes.rollback:
        moved = await t.move(from_states, "rolling_back", {"reason": reason})
    else:
        moved = await t.move(from_states, "failed", {"reason": reason, "detail": ROLLBACK_OFF})
    if moved:
        await t.audit("failed", reason)
    return moved


def _why(applied: Applied) -> str:
    failed = next((s for s in applied.steps if not s.ok), None)
    return applied.refused or (failed.summary() if failed is not None else "it failed")


def _by_hand(t: Target, what: str) -> str:
    return f"{what}; to give {t.service.name} the operator's own settings back by hand on {t.node.name}: " \
           f"`{by_hand(t.service)}`"


async def apply(t: Target) -> None:
    """Apply the change on this node (from ``waiting``): plan, write, reload, restart, follow."""
    ctx, store, now = t.ctx, require_store(t.ctx), t.ctx.now()
    st = await look(t)
    planned = await plan_for(t, st)
    if isinstance(planned, str):
        if await t.move({"waiting"}, "failed", {"reason": planned, "detail": NOT_WRITTEN}):
            await t.audit("failed", planned)
        return
    if not await store.locks.acquire(lock_name(t.service.name, t.service.node), t.ch.id, lock_ttl(ctx), now):
        return  # a restart of this node is in flight: the step waits its turn
    previous = planned.previous.model_dump(mode="json") if planned.previous is not None else {}
    if not await t.move({"waiting"}, "applying", {"previous": previous, "delta": planned.delta.model_dump(mode="json"),
                                                  "settings_since": st.since, "load_started_at": now}):
        return  # another process took it
    await _follow(t, st, now)
    written = await apply_plan(ctx.cluster.pool, t.node, t.service, planned, ctx.config.access_for(t.service))
    if not written.ok:
        await _not_written(t, st, written, planned.previous)
        return
    await t.audit("applied", f"{'removed' if planned.action == 'remove' else 'wrote'} {planned.dropin_path}, "
                             "daemon-reload; restarting")
    await _restart(t, st, now, "applying", "loading")


async def _end_follow(t: Target) -> None:
    store = require_store(t.ctx)
    await store.follows.finish(t.key, "failed")
    await store.locks.release(lock_name(t.service.name, t.service.node), t.ch.id)


async def _not_written(t: Target, st: ServiceState, written: Applied, previous: ChangeSpec | None) -> None:
    """Writing or reloading failed, nothing was restarted: what was on disk is put back."""
    await _end_follow(t)
    reason = f"writing the change failed: {_why(written)}"
    back = await restore(t.ctx.cluster.pool, t.node, t.service, previous, t.ctx.config.access_for(t.service),
                         change_id=t.change_id, version=st.version)
    if back.ok:
        if await t.move({"applying"}, "failed", {"reason": reason, "detail": f"nothing was restarted: "
                                                 f"{t.service.name} runs its previous settings"}):
            await t.audit("failed", reason)
        return
    detail = _by_hand(t, f"putting the previous drop-in back failed too: {_why(back)}")
    if await t.move({"applying"}, "rollback_failed", {"reason": reason, "detail": detail}):
        await t.audit("rollback_failed", detail)


async def _restart(t: Target, st: ServiceState, at: datetime, acting: str, following: str) -> None:
    """Restart (``reset-failed`` first when a rollback meets the start limit) and follow the load."""
    ctx, store = t.ctx, require_store(t.ctx)
    policy = ctx.config.access_for(t.service)
    result = await execute_restart(ctx.cluster.pool, t.node, t.service, policy)
    # A rollback and a revert go back to settings that loaded before: the start limit they meet was spent by the
    # settings they remove (a crash loop), so it is cleared for them; a change forward restarts as a restart does.
    going_back = acting == "unapplying" or t.ch.op == "revert"
    if result.start_limit_hit and going_back:
        cleared = await remote.reset_failed(ctx.cluster.pool, t.node, t.service)
        if cleared.ok:
            result = await execute_restart(ctx.cluster.pool, t.node, t.service, policy)
    if result.unreachable is None:
        confirmer = t.req.confirmed_by if t.req is not None else None
        await store.restarts.record(t.service.name, t.service.node, at, confirmer, False)
    if not result.ok:
        await _end_follow(t)
        await _restart_failed(t, acting, result)
        return
    await _follow(t, st, at, result.invocation_id or BEFORE + st.invocation_id)
    await t.move({acting}, following, {"invocation": result.invocation_id or None})


async def _restart_failed(t: Target, acting: str, result: RestartResult) -> None:
    reason = f"the restart failed: {result.summary()}"
    if acting == "applying":
        await fail(t, {"applying"}, reason)
        return
    detail = _by_hand(t, f"{reason}; on disk: {on_disk(t)}")
    if await t.move({acting}, "rollback_failed", {"detail": detail}):
        await t.audit("rollback_failed", detail)


def on_disk(t: Target) -> str:
    previous = spec_of(t.step.previous)
    return (f"inferbot's drop-in with the settings before {t.change_id}" if previous is not None
            else "no inferbot drop-in (the operator's unit alone)")


async def roll_back(t: Target) -> None:
    """Roll this node back (from ``rolling_back``): the previous drop-in (or none), reload, restart, follow."""
    ctx, store, now = t.ctx, require_store(t.ctx), t.ctx.now()
    st = await look(t)
    if not await store.locks.acquire(lock_name(t.service.name, t.service.node), t.ch.id, lock_ttl(ctx), now):
        return  # someone's restart is in flight: roll back once it is over
    if not await t.move({"rolling_back"}, "unapplying", {"load_started_at": now}):
        return
    await _follow(t, st, now)
    back = await restore(ctx.cluster.pool, t.node, t.service, spec_of(t.step.previous),
                         ctx.config.access_for(t.service), change_id=t.change_id, version=st.version,
                         clear_start_limit=st.state == "failed")
    if not back.ok:
        await _end_follow(t)
        detail = back.summary()
        if await t.move({"unapplying"}, "rollback_failed", {"detail": detail}):
            await t.audit("rollback_failed", detail)
        return
    await _restart(t, st, now, "unapplying", "restoring")


def _same(a: datetime | None, b: datetime | None) -> bool:
    return a is not None and b is not None and abs((a - b).total_seconds()) < 0.001


async def recover(t: Target) -> None:
    """An act a stopped process left in the middle (``applying``, ``unapplying``), once it cannot be going on."""
    grace = RESTART_WAIT_S + RESTART_TAKES_EFFECT_S + 2 * t.node.timeout + STALE_MARGIN_S
    if t.ctx.now() - t.step.state_at < timedelta(seconds=grace):
        return
    acting = t.step.state
    following, pending = ("loading", "waiting") if acting == "applying" else ("restoring", "rolling_back")
    f = await require_store(t.ctx).follows.get(t.key)
    if f is not None and f.request_id == t.ch.id and _same(f.started_at, t.step.load_started_at):
        await t.move({acting}, following, if_at=t.step.state_at)  # the follow tells whether it restarted
    else:
        await t.move({acting}, pending, if_at=t.step.state_at)  # nothing was written: act again
