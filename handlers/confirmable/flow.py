"""The one confirmable-request flow: ask → confirm or cancel → run once; or expire; or settle after a crash.

Every kind (``kind.py``) goes through the same steps, written once here:

1. **Ask** (:func:`ask`): exactly one service named, a state store, who and where (``[access]``, per service
   ``[services.access]``), asked in Slack; the kind's checks and preview; a request row in state ``pending``
   with an expiry (and its job), audited ``<kind>.requested``; a confirmation with the two buttons.
2. **Click** (:func:`click`): the service still in the config, the clicker allowed, not expired, not used,
   cancel, the two-person rule; then a compare-and-set ``pending`` → ``confirmed``, so a redelivered click,
   two people clicking at once or two replicas of the bot run the request at most once.
3. **Run** (:func:`run_confirmed`): the kind's claim (its lock, and the checks that may have changed while
   the request waited), ``confirmed`` → ``running``, the kind's run.
4. **Expire** (:func:`expire`): a request nobody confirmed in time, from its job or from a late click.
5. **Settle** (:func:`settle`): a request a stopped process left ``confirmed`` or ``running`` is finished
   exactly once, from what its kind finds.

The terminal confirms by typing the service name back (:func:`confirm_typed`): the same request, confirmed
and run as a click would.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta

from config.models import AccessPolicy, Service
from handlers.audit import record
from handlers.common import fmt_duration
from handlers.confirmable.kind import (
    CANCEL,
    CONFIRM,
    ActionOutcome,
    Asked,
    Confirmed,
    Ended,
    Interrupted,
    Kind,
    Later,
    Preview,
    Refusal,
    finish,
    message,
)
from handlers.context import Context, Request, require_store
from handlers.notice_words import hhmm
from handlers.notify import Notifier, groups_of, jobs_of
from handlers.reply import Action, Reply, Section, Status
from services import mentions
from services.access import check_restart_access, check_second_person
from services.store.records import ConfirmableRequest

log = logging.getLogger("inferbot.requests")
TYPED = "t-"
"""Ids of requests confirmed by typing the name back in a terminal start with it (any kind)."""
TYPED_TTL = timedelta(minutes=5)
EXPIRED = "Expired — ask again"
USED = frozenset({"confirmed", "running", "done", "failed"})


def new_id(prefix: str) -> str:
    """A request id that is unguessable enough to be a button value."""
    return prefix + secrets.token_hex(6)


def refused(intent: str, title: str, text: str, data: Mapping[str, object], how: str | None = None) -> Reply:
    """A refusal: its reason, and how an operator would allow it (when there is a way)."""
    sections = [Section(kind="text", text=text)]
    if how:
        sections.append(Section(kind="code", title="To allow it, an operator adds to the config", text=how))
    return Reply(intent=intent, ok=False, title=title, status="error", sections=sections,
                 data={"refused": True, "reason": text, **data}, error=text)


# ------------------------------------------------------------------------------------------------
# Ask


def _one_service(ctx: Context, kind: Kind, req: Request) -> Service | str:
    """The one service the question names, or the refusal asking which."""
    if len(req.services) == 1 and req.explicit_target:
        return req.services[0]
    w = kind.words
    names = sorted({f"{s.name}@{s.node}" for s in req.services})
    known = ", ".join(sorted({s.name for s in ctx.config.services})) or "none"
    if len(req.services) > 1 and len({s.name for s in req.services}) == 1:
        first = req.services[0]
        return (f"refused: {first.name} runs on {', '.join(s.node for s in req.services)}; "
                f"say which: `{w.command} {first.name} on {first.node}`")
    return (f"refused: name exactly one service to {w.verb}, e.g. `{w.command} kimi` "
            f"(you named {', '.join(names) or 'none'}; known: {known})")


async def ask(ctx: Context, kind: Kind, req: Request, *, force: bool = False) -> Reply:
    """A request of ``kind``: who and where, the kind's checks and preview, then a confirmation with two buttons."""
    w = kind.words
    target = _one_service(ctx, kind, req)
    if isinstance(target, str):
        await record(ctx, f"{kind.name}.refused", None, None, target)
        return refused(kind.name, f"{w.title} refused", target,
                       {"services": sorted({f"{s.name}@{s.node}" for s in req.services})})
    service = target
    base = {"service": service.name, "node": service.node}
    if ctx.store is None:
        return refused(kind.name, f"{w.title} refused", "refused: no state database is configured ([state] dir or url)",
                       base)
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        text = f"not allowed: {decision.reason}"
        await record(ctx, f"{kind.name}.refused", service.name, service.node, text)
        return refused(kind.name, f"{w.title} of {service.name} not allowed", text, base, decision.how_to_allow)
    if ctx.asker.surface != "slack":
        return refused(kind.name, f"{w.title} refused", w.elsewhere.format(service=service.name, command=w.command),
                       base)
    prepared = await kind.prepare(ctx, Asked(service, req, force))
    if isinstance(prepared, str):
        prepared = Refusal(prepared)
    if isinstance(prepared, Refusal):
        await record(ctx, f"{kind.name}.refused", service.name, service.node, prepared.text)
        reply = refused(kind.name, f"{w.title} of {service.name} refused", prepared.text, {**base, **prepared.data})
        reply.sections += prepared.sections
        return reply
    return await _confirmation(ctx, kind, service, policy, prepared, force)


async def _confirmation(ctx: Context, kind: Kind, service: Service, policy: AccessPolicy, preview: Preview,
                        force: bool) -> Reply:
    """The request row (pending, with its expiry job) and the confirmation that shows it."""
    w = kind.words
    now = ctx.now()
    request_id = preview.request_id or new_id(kind.prefix)
    expires = now + timedelta(seconds=policy.confirm_ttl)
    await require_store(ctx).requests.create(
        request_id, service.name, service.node, service.unit, ctx.asker.user_id, ctx.asker.channel_id,
        ctx.asker.thread_ts, now, expires, force, kind=kind.name,
    )
    jobs = jobs_of(ctx)
    if jobs is not None:
        jobs.expire(request_id, expires)
    await record(ctx, f"{kind.name}.requested", service.name, service.node, preview.detail, request_id=request_id)
    rule = " — and not the person who asked (two-person rule)" if policy.require_second_person else ""
    sections = [*preview.sections,
                Section(kind="context", text=f"Only {w.confirmers} may confirm{rule}. This request expires in "
                                             f"{fmt_duration(policy.confirm_ttl)} (at {hhmm(expires)}).")]
    actions = [Action(action_id=CONFIRM, text=f"{w.title} {service.name}", value=request_id, style="danger"),
               Action(action_id=CANCEL, text="Cancel", value=request_id)]
    data = {"request_id": request_id, "service": service.name, "node": service.node, **preview.data,
            "expires_at": expires.isoformat(), "requested_by": ctx.asker.user_id}
    return Reply(intent=kind.name, title=f"{w.title} {service.name} on {service.node}?", status="warn",
                 sections=sections, actions=actions, data=data)


# ------------------------------------------------------------------------------------------------
# Clicks


async def click(ctx: Context, kind: Kind, req: ConfirmableRequest, action_id: str) -> ActionOutcome:
    """A click on ``restart_confirm`` or ``restart_cancel`` of ``req`` (a request of ``kind``)."""
    now = ctx.now()
    who = ctx.asker.user_id
    service = ctx.config.service(req.service, req.node)
    if service is None:
        return ActionOutcome(ephemeral=f"refused: {req.service} on {req.node} is no longer in the config")
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        await record(ctx, f"{kind.name}.click_refused", req.service, req.node,
                     f"{action_id}: not allowed: {decision.reason}", request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {decision.reason}")
    if req.state == "pending" and now >= req.expires_at:
        return await _expire_now(ctx, kind, req, now)
    if req.state != "pending":
        return await _refuse_used(ctx, kind, req, action_id)
    if action_id == CANCEL:
        if not await require_store(ctx).requests.transition(req.id, {"pending"}, "cancelled", who, now):
            return await _lost_race(ctx, kind, req.id, action_id, now)
        await record(ctx, f"{kind.name}.cancelled", req.service, req.node, "cancelled", request_id=req.id)
        return ActionOutcome(message=message(kind, req, f"Cancelled by {mentions.user(who)}", "info"))
    if action_id != CONFIRM:
        return ActionOutcome(ephemeral=f"refused: unknown action {action_id}")
    second = check_second_person(policy, req.requested_by, who)
    if not second.allowed:
        await record(ctx, f"{kind.name}.click_refused", req.service, req.node, f"not allowed: {second.reason}",
                     request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {second.reason}")
    if not await require_store(ctx).requests.transition(req.id, {"pending"}, "confirmed", who, now):
        return await _lost_race(ctx, kind, req.id, action_id, now)
    await record(ctx, f"{kind.name}.confirmed", req.service, req.node,
                 "confirmed" + (f" ({kind.words.forced})" if req.force else ""), request_id=req.id)
    return await run_confirmed(Confirmed(ctx, kind, req, service, who, now))


def _said(kind: Kind, req: ConfirmableRequest) -> tuple[str, Status, str]:
    """(message text, status, refusal to the clicker) for a request that is no longer pending."""
    w = kind.words
    by = mentions.user(req.confirmed_by)
    at = hhmm(req.confirmed_at) if req.confirmed_at else "?"
    if req.state in USED and req.confirmed_by:
        refusal = f"refused: already confirmed by {by}" + (f" at {at}" if w.names_who_ended else "")
        return f"{w.title} confirmed by {by} at {at}", "ok", refusal
    if req.state == "cancelled":
        ended = mentions.user(req.state_by)
        refusal = (f"refused: this request was cancelled by {ended}" if w.names_who_ended
                   else "refused: this request is cancelled")
        return f"Cancelled by {ended}", "info", refusal
    if req.state == "expired":
        return EXPIRED, "info", ("refused: this request expired — ask again" if w.names_who_ended
                                 else "refused: this request is expired")
    return f"Request {req.state}", "info", f"refused: this request is {req.state}"


async def _refuse_used(ctx: Context, kind: Kind, req: ConfirmableRequest, action_id: str) -> ActionOutcome:
    text, status, refusal = _said(kind, req)
    await record(ctx, f"{kind.name}.click_refused", req.service, req.node, f"{action_id}: {refusal}",
                 request_id=req.id)
    # Final states have a stable message; while confirmed/running the winner is still rewriting it.
    final = req.state in ("cancelled", "expired", "refused")
    return ActionOutcome(message=message(kind, req, text, status) if final else None, ephemeral=refusal)


async def _lost_race(ctx: Context, kind: Kind, request_id: str, action_id: str, now: datetime) -> ActionOutcome:
    fresh = await require_store(ctx).requests.get(request_id)
    if fresh is None:
        return ActionOutcome(ephemeral=f"refused: I don't know this {kind.words.verb} request")
    if fresh.state == "pending" and now >= fresh.expires_at:
        return await _expire_now(ctx, kind, fresh, now)
    return await _refuse_used(ctx, kind, fresh, action_id)


# ------------------------------------------------------------------------------------------------
# Run


async def run_confirmed(run: Confirmed) -> ActionOutcome:
    """The one winner of the confirmation: the kind's claim, ``confirmed`` → ``running``, the kind's run."""
    refusal = await run.kind.claim(run)
    if refusal is not None:
        await run.store.requests.transition(run.req.id, {"confirmed"}, "failed", run.who, run.at)
        await run.audit("refused", refusal)
        return ActionOutcome(message=run.message(refusal, "error"), ephemeral=refusal)
    if not await run.store.requests.transition(run.req.id, {"confirmed"}, "running", run.who, run.at):
        await run.kind.release(run.ctx, run.req)
        return ActionOutcome(ephemeral="refused: this request changed state meanwhile")
    return await run.kind.run(run)


async def confirm_typed(ctx: Context, kind: Kind, service: Service, who: str, detail: str,
                        force: bool, request_id: str | None = None) -> ActionOutcome:
    """The terminal's confirmation, once the person typed the service name back: the request is created,
    confirmed and run exactly as a click would (same audit, claim and run). ``request_id``: the id the kind
    chose (:attr:`Preview.request_id`), else a new ``t-`` one."""
    store = require_store(ctx)
    now = ctx.now()
    request_id = request_id or new_id(TYPED)
    await store.requests.create(request_id, service.name, service.node, service.unit, who, None, None, now,
                                now + TYPED_TTL, force, kind=kind.name)
    await record(ctx, f"{kind.name}.requested", service.name, service.node, f"from the terminal; {detail}",
                 request_id=request_id)
    await store.requests.transition(request_id, {"pending"}, "confirmed", who, now)
    await record(ctx, f"{kind.name}.confirmed", service.name, service.node, "typed the name back",
                 request_id=request_id)
    req = await store.requests.get(request_id)
    if req is None:  # pragma: no cover - just created
        return ActionOutcome(ephemeral=f"the {kind.words.verb} request was lost; nothing was run")
    return await run_confirmed(Confirmed(ctx, kind, req, service, who, now))


# ------------------------------------------------------------------------------------------------
# Expire


async def _expired(ctx: Context, kind: Kind, req: ConfirmableRequest, at: datetime) -> bool:
    """``pending`` → ``expired`` (audited); True for the one caller that moved it."""
    if not await require_store(ctx).requests.transition(req.id, {"pending"}, "expired", None, at):
        return False
    await record(ctx, f"{kind.name}.expired", req.service, req.node, "expired before anyone confirmed",
                 request_id=req.id, who="inferbot", where=req.channel or "inferbot")
    return True


async def _expire_now(ctx: Context, kind: Kind, req: ConfirmableRequest, now: datetime) -> ActionOutcome:
    await _expired(ctx, kind, req, now)
    return ActionOutcome(message=message(kind, req, EXPIRED, "info"),
                         ephemeral="refused: this request expired — ask again")


async def expire(ctx: Context, kind: Kind, req: ConfirmableRequest, notifier: Notifier | None) -> bool:
    """At expiry: a still-pending request becomes expired and its message says so. True when it expired."""
    if req.state != "pending" or not await _expired(ctx, kind, req, max(ctx.now(), req.expires_at)):
        return False
    if notifier is not None and req.message_channel and req.message_ts:
        try:
            await notifier.update(req.message_channel, req.message_ts, message(kind, req, EXPIRED, "info"))
        except Exception:  # the state is right; only the rewrite failed
            log.warning("could not rewrite the expired request %s", req.id, exc_info=True)
    return True


# ------------------------------------------------------------------------------------------------
# Settle


async def settle(ctx: Context, kind: Kind, req: ConfirmableRequest, notifier: Notifier | None) -> datetime | None:
    """A request left ``confirmed`` or ``running`` by a process that may have stopped: finish it exactly once
    from what its kind finds. Returns when to look again (None: settled, or nothing to settle)."""
    if req.state not in ("confirmed", "running"):
        return None
    found = await kind.settle(ctx, req, notifier)
    now = ctx.now()
    if found is None:
        return None
    if isinstance(found, Later):
        return found.at
    if isinstance(found, Ended):
        await finish(require_store(ctx), req.id, found.ok, None, now)
        await kind.release(ctx, req)
        return None
    assert isinstance(found, Interrupted)
    due = (req.state_at or req.created_at) + timedelta(seconds=found.grace_s)
    if now < due:
        return due
    if await finish(require_store(ctx), req.id, False, None, now):
        await record(ctx, f"{kind.name}.interrupted", req.service, req.node, found.why, request_id=req.id,
                     who="inferbot")
    await kind.release(ctx, req)
    return None
