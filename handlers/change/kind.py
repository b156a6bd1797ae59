"""``set … on kimi`` and ``revert kimi``: a settings change as a kind of confirmable request.

The restart's guard, unchanged (it is the flow's, ``handlers/confirmable/``): allowed people, restart channels,
the two-person rule, expiry, audit (``change.requested`` / ``.confirmed`` / ``.refused`` …); the change's own
checks and preview are ``preview.py``. Once confirmed it takes the change lock (one change of a service at a
time), checks the first node's restart lock and cooldown again, and applies it on the first node; from then
on the scheduler's settle job ticks its state machine (``machine.py``) to kept or rolled back.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from config.models import Service
from handlers.change import machine
from handlers.change.guard import change_lock, in_flight_words, running_change, where_it_is
from handlers.change.preview import prepare
from handlers.change.words import label, refused_data
from handlers.common import fmt_duration
from handlers.confirmable.flow import ask
from handlers.confirmable.kind import (
    ActionOutcome,
    Asked,
    Confirmed,
    Ended,
    Interrupted,
    Later,
    Preview,
    Refusal,
    Settling,
    Words,
)
from handlers.context import Context, Request, require_store
from handlers.follow import lock_name
from handlers.notify import Notifier, notifier_of
from handlers.reply import Reply, Status
from handlers.restart import cooldown_refusal, in_flight_refusal, settle_lock
from services.change.spec import ChangeSpec
from services.store.records import ConfirmableRequest

NEVER_STARTED_S = 600.0
"""A confirmed change whose process stopped before it was applied fails after this long."""
NEVER_STARTED = Interrupted(NEVER_STARTED_S, "the change never started: the bot stopped before applying it")
"""What a settle finds of a change whose confirming process stopped before it was applied (or was refused)."""
CLAIMING_S = 30.0
"""How long after its confirmation a change may still be in its confirming process's claim (store work only)."""
_TERMINAL = {"change": "refused: from the terminal, use `inferbot change {service} --set NAME=VALUE` (also --unset "
                       "NAME, --env NAME=VALUE, --unset-env NAME; it asks you to type the name back)",
             "revert": "refused: from the terminal, use `inferbot revert {service}` (it asks you to type the name "
                       "back)"}


class ChangeKind:
    """A settings change (``op`` change) or a revert to the operator's unit (``op`` revert) of one service on
    ``nodes`` (in rollout order). The registered instance runs every request of the kind; a question makes its
    own, carrying its nodes (and the terminal's spec) to :meth:`prepare`."""

    name = "change"
    prefix = "c-"

    def __init__(self, op: str = "change", nodes: tuple[str, ...] = (), spec: ChangeSpec | None = None) -> None:
        self.op, self.nodes, self.spec = op, nodes, spec
        command = "revert" if op == "revert" else "change"
        self.words = Words(title=command.capitalize(), verb=command, command=command,
                           confirmers="people allowed to restart", elsewhere=_TERMINAL[command])

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str | Refusal:
        """The restart's checks on every node, the change, the preflight, and the preview."""
        return await prepare(ctx, asked, self.op, self.nodes or (asked.service.node,), self.spec)

    async def claim(self, run: Confirmed) -> str | None:
        """The change lock, no other change running, the first node's restart lock and cooldown; then running."""
        ctx, service, req, store = run.ctx, run.service, run.req, run.store
        ch = await store.changes.get(req.id)
        if ch is None or ch.state != "proposed":
            return "refused: this change is not waiting for a confirmation (ask again)"
        lock = change_lock(service.name)
        ttl = machine.lock_ttl(ctx, service, len(ch.steps))
        other = await running_change(ctx, service.name, but=req.id)
        if other is not None or not await store.locks.acquire(lock, req.id, ttl, run.at):
            return in_flight_words(other, ctx) if other is not None else \
                f"refused: another change of {service.name} is in flight"
        refusal = await _restart_refusal(ctx, service, req.force)
        if refusal is None and not await store.changes.move(req.id, {"proposed"}, "running", run.at):
            refusal = "refused: this change changed state meanwhile"
        if refusal is not None:
            await store.locks.release(lock, req.id)
            await store.changes.move(req.id, {"proposed"}, "refused", run.at, {"outcome": refusal})
        return refusal

    async def run(self, run: Confirmed) -> ActionOutcome:
        """Apply it on the first node now (write, reload, restart); the settle job carries it on."""
        tick = await machine.advance(run.ctx, run.req.id, notifier_of(run.ctx))
        ch = tick.change
        if ch is None:  # pragma: no cover - claimed a moment ago
            return ActionOutcome(ephemeral="the change was lost; nothing was applied", executed=True)
        first = ch.steps[0]
        service = run.service
        status: Status = "loading"
        if first.state == "loading":
            text = (f"{run.line} — {label(ch)}: inferbot's drop-in is written and {service.name} restarts. "
                    f"I keep it if it loads and stays healthy for {fmt_duration(service.changes.verify_window)}, "
                    "else I roll it back")
        elif first.reason:
            status = "error"
            text = f"{run.line} — {label(ch)} failed: {first.reason}"
        else:
            text = f"{run.line} — {label(ch)}: {where_it_is(ch)}"
        return ActionOutcome(message=run.message(text, status), executed=True)

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        """The change lock and the node's restart lock, if this request holds them."""
        store = require_store(ctx)
        await store.locks.release(change_lock(req.service), req.id)
        await store.locks.release(lock_name(req.service, req.node), req.id)

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        """One tick of the change's state machine; ended once it is decided and its notices are out."""
        store = require_store(ctx)
        ch = await store.changes.get(req.id)
        if ch is None or ch.state == "refused":
            return NEVER_STARTED
        if req.state == "confirmed":
            if ctx.now() < (req.state_at or req.created_at) + timedelta(seconds=CLAIMING_S):
                # The confirming process may be claiming it right now (a tick here would take the run from it);
                # once it has, the change needs this job's ticks: look again soon, not at a grace's end.
                return _next_tick(ctx)
            if ch.state == "proposed":
                return NEVER_STARTED
            # Its process stopped between the claim and the run.
            await store.requests.transition(req.id, {"confirmed"}, "running", None, ctx.now())
        tick = await machine.advance(ctx, req.id, notifier)
        if tick.decided and tick.notices_done:
            return Ended(ok=tick.ok)
        return _next_tick(ctx)


def _next_tick(ctx: Context) -> Later:
    """The next tick of a running change: every ``[watch] poll`` (at most 30 s)."""
    return Later(ctx.now() + timedelta(seconds=min(ctx.config.watch.poll, 30.0)))


async def _restart_refusal(ctx: Context, service: Service, force: bool) -> str | None:
    held = await settle_lock(ctx, service)
    if held is not None:
        return await in_flight_refusal(ctx, service, held)
    return await cooldown_refusal(ctx, service, force)


CHANGE = ChangeKind()


def rollout(ctx: Context, req: Request) -> tuple[str, ...]:
    """The nodes a change of the named service goes to, in order (all of them when only the service is named)."""
    names = {s.name for s in req.services}
    if not req.explicit_target or len(names) != 1:
        return ()
    return tuple(s.node for s in req.services)


async def _ask(ctx: Context, req: Request, op: str) -> Reply:
    nodes = rollout(ctx, req)
    kind = ChangeKind(op, nodes)
    one = replace(req, services=req.services[:1]) if nodes else req
    reply = await ask(ctx, kind, one)
    if "change" not in reply.data:  # refused before the change's own checks (who, where, which service)
        first = one.services[0] if one.services else None
        reply.data["change"] = refused_data(op, first.name if first else "", first.node if first else "",
                                            reply.error or "refused")
    return reply.model_copy(update={"intent": op})


async def handle_change(ctx: Context, req: Request) -> Reply:
    """"set max-num-seqs 256 on kimi": checks, preflight, preview, then a confirmation with two buttons."""
    return await _ask(ctx, req, "change")


async def handle_revert(ctx: Context, req: Request) -> Reply:
    """"revert kimi": back to the operator's unit (inferbot's drop-in removed), guarded like a restart."""
    return await _ask(ctx, req, "revert")
