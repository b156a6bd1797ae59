"""The restart conversation: request → checks → impact → confirmation → exactly one execution.

Order of checks (each refusal is answered with its reason and audited):
1. who and where (``[access]``, per service ``[services.access]``);
2. state: node reachable, no restart of this service in flight (a store lock that outlives the bot and
   expires), cooldown since the last restart unless ``force`` (recorded as forced);
3. impact, shown before anyone confirms.

The confirmation is a request row in the store; every click is a compare-and-set on its state, so a
redelivered click, two people clicking at once or two replicas of the bot run the restart at most once.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from config.models import AccessPolicy, Service
from handlers.audit import record
from handlers.common import fmt_duration, node_not_reached, state_line
from handlers.context import Context, Request
from handlers.follow import (
    BEFORE,
    RESTART_TAKES_EFFECT_S,
    follow_key,
    lock_name,
    lock_ttl,
    poll_follow,
    start_follow,
)
from handlers.notice_pipeline import Notice, deliver_all, to_notify
from handlers.notice_words import hhmm
from handlers.notify import Notifier, groups_of, jobs_of, notifier_of
from handlers.reply import Action, Reply, Section, Status
from handlers.restart_diff import leftover_section, plan
from handlers.watcher import WATCH_PROBE
from services import mentions
from services.access import check_restart_access, check_second_person
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.node.restart import RESTART_WAIT_S, RestartResult, build_restart_command, execute_restart
from services.store.ports import StateStore
from services.store.records import LockRecord, RestartRequest

# GPUs: leftover vLLM processes outside the unit are listed in the confirmation (issue 14).
IMPACT_PROBE = ProbeOptions(gpus=True, metrics_samples=1, http_timeout_s=3.0)
log = logging.getLogger("inferbot.restart")
CONFIRM = "restart_confirm"
CANCEL = "restart_cancel"
FINAL_STATES = frozenset({"done", "failed", "cancelled", "expired", "refused"})
_BY_MENTION = re.compile(" by " + mentions.PATTERN)


@dataclass
class ActionOutcome:
    """What a click leads to: a new text for the confirmation message, and/or a word to the clicker."""

    message: Reply | None = None  # rewrite the confirmation message with this (None: leave it as it is)
    ephemeral: str | None = None  # tell only the person who clicked
    executed: bool = False  # this click ran the restart command


def new_request_id() -> str:
    """A request id that is unguessable enough to be a button value."""
    return "r-" + secrets.token_hex(6)


def _store(ctx: Context) -> StateStore:
    if ctx.store is None:
        raise RuntimeError("restarts need the state store ([state] dir or url)")
    return ctx.store


def _refusal(title: str, text: str, data: Mapping[str, object], how: str | None = None,
             intent: str = "restart") -> Reply:
    sections = [Section(kind="text", text=text)]
    if how:
        sections.append(Section(kind="code", title="To allow it, an operator adds to the config", text=how))
    return Reply(intent=intent, ok=False, title=title, status="error", sections=sections,
                 data={"refused": True, "reason": text, **data}, error=text)


async def state_checks(ctx: Context, service: Service, force: bool) -> tuple[str | None, ServiceState | None]:
    """Node reachable, nothing in flight, cooldown: the first refusal reason (or None) and the state seen."""
    _store(ctx)
    # A restart waits behind a burst of questions for a channel of its node (RESTART_WAIT_S) rather than be refused.
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], IMPACT_PROBE, wait_s=RESTART_WAIT_S)
    st = snap.services[0] if snap.services else None
    report = snap.nodes[0] if snap.nodes else None
    if report is not None and not report.ok:
        return f"refused: {node_not_reached(service.node, report.error)}", st
    held = await settle_lock(ctx, service)
    if held is not None:
        return await in_flight_refusal(ctx, service, held), st
    return await cooldown_refusal(ctx, service, force), st


# ------------------------------------------------------------------------------------------------
# The in-flight lock: it ends with the restart it guards


async def settle_lock(ctx: Context, service: Service) -> LockRecord | None:
    """The restart lock of ``service`` if its restart is really still going; a finished one is released.

    The lock guards one restart request; that restart is over when its request reached a final state,
    or its follow (recorded before the command ran) has seen the new start ready or failed — whichever
    process saw it, or this one now: an unfinished follow nobody polls (a terminal restart without
    ``--wait``, Ctrl-C, no ``inferbot serve`` running) is probed once here, without posting anything.
    """
    store = _store(ctx)
    name = lock_name(service.name, service.node)
    lock = await store.locks.get(name, ctx.now())
    if lock is None:
        return None
    ended = await _lock_ended(ctx, service, lock)
    if ended is not None:
        # (Seeing the load's end may already have released it: the follow ends the lock it guards.)
        await store.locks.clear(name, owner=lock.owner)
        await record(ctx, "restart.lock_released", service.name, service.node,
                     f"the lock of request {lock.owner} ended: {ended}", request_id=lock.owner, who="inferbot")
        return await store.locks.get(name, ctx.now())
    return lock


async def _lock_ended(ctx: Context, service: Service, lock: LockRecord) -> str | None:
    """Why the restart behind ``lock`` is over, or None while it may still be going (or can't be told)."""
    store = _store(ctx)
    req = await store.requests.get(lock.owner)
    if req is None:
        return None  # not a request of ours: only its expiry or --clear-lock ends it
    if req.state in FINAL_STATES:
        return f"its request is {req.state}"
    key = follow_key(service.name, service.node)
    f = await store.follows.get(key)
    if f is not None and f.request_id == req.id:
        if not f.active:
            return f"its load ended ({f.outcome})"
        status = await poll_follow(ctx, key, None)
        if status.outcome is not None:
            return f"its load was seen {status.outcome}"
        fresh = await store.requests.get(req.id)
        return f"its request is {fresh.state}" if fresh is not None and fresh.state in FINAL_STATES else None
    # The follow is recorded before the command runs; a lock this old without one lost its process
    # before the command could run.
    node = ctx.config.node(service.node)
    if (ctx.now() - lock.acquired_at).total_seconds() > RESTART_TAKES_EFFECT_S + 2 * node.timeout:
        return "its restart never started (no follow was recorded)"
    return None


async def in_flight_refusal(ctx: Context, service: Service, lock: LockRecord) -> str:
    """The refusal for a restart still in flight: who holds the lock, since when, for which request."""
    store = _store(ctx)
    req = await store.requests.get(lock.owner)
    age = fmt_duration((ctx.now() - lock.acquired_at).total_seconds())
    about = f"request {lock.owner}, {age} old"
    if req is not None:
        by = req.confirmed_by or req.requested_by
        about += f", confirmed by {_mention(by)}" if req.confirmed_by else f", asked by {_mention(by)}"
        about += f", {req.state}"
    f = await store.follows.get(follow_key(service.name, service.node))
    if f is not None and f.active and req is not None and f.request_id == req.id:
        about += f", load followed since {hhmm(f.started_at)}"
    return (f"refused: another restart of {service.name} on {service.node} is in flight ({about}); "
            f"wait for its ready or failed notice. If it is stale: `inferbot restart {service.name} --clear-lock` "
            f"(or `unlock {service.name}`), which is audited")


async def clear_lock(ctx: Context, service: Service) -> tuple[LockRecord | None, str]:
    """Clear the restart lock of ``service`` (audited): what was removed and a sentence saying so.

    A lock whose restart is over is released as such first; what is left is removed whoever holds it.
    """
    store = _store(ctx)
    name = lock_name(service.name, service.node)
    lock = await store.locks.get(name, ctx.now())
    if lock is None:
        return None, f"no restart of {service.name} on {service.node} is in flight: nothing to clear"
    about = await in_flight_refusal(ctx, service, lock)
    held = await settle_lock(ctx, service)
    if held is None:
        return lock, (f"the restart of {service.name} on {service.node} (request {lock.owner}) was already over: "
                      f"its lock is released")
    removed = await store.locks.clear(name, owner=held.owner)
    if removed is None:
        return None, f"the lock of {service.name} on {service.node} changed meanwhile: nothing was cleared"
    detail = "cleared by hand: " + about.removeprefix("refused: ").split("; wait for", 1)[0]
    await record(ctx, "restart.lock_cleared", service.name, service.node, detail, request_id=removed.owner)
    return removed, (f"cleared the restart lock of {service.name} on {service.node} (request {removed.owner}, "
                     f"held {fmt_duration((ctx.now() - removed.acquired_at).total_seconds())}); a new restart "
                     f"may be asked now")


async def handle_unlock(ctx: Context, req: Request) -> Reply:
    """"unlock kimi": show and clear a stale restart lock; for people who may restart the service."""
    names = sorted({f"{s.name}@{s.node}" for s in req.services})
    if len(req.services) != 1:
        text = ("refused: name exactly one service to unlock, e.g. `unlock kimi` "
                f"(you named {', '.join(names) or 'none'})")
        return _refusal("Unlock refused", text, {"services": names}, intent="unlock")
    service = req.services[0]
    base = {"service": service.name, "node": service.node}
    if ctx.store is None:
        return _refusal("Unlock refused", "refused: no state database is configured ([state] dir or url)", base,
                        intent="unlock")
    decision = await check_restart_access(ctx.config.access_for(service), ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        text = f"not allowed: {decision.reason}"
        await record(ctx, "restart.unlock_refused", service.name, service.node, text)
        return _refusal(f"Unlock of {service.name} not allowed", text, base, decision.how_to_allow, intent="unlock")
    removed, text = await clear_lock(ctx, service)
    data: dict[str, object] = {**base, "cleared": removed is not None, "notice": text}
    if removed is not None:
        data.update(request_id=removed.owner, acquired_at=removed.acquired_at.isoformat())
    return Reply(intent="unlock", title=text[:1].upper() + text[1:], status="ok",
                 sections=[Section(kind="text", text=text)], data=data)


async def cooldown_refusal(ctx: Context, service: Service, force: bool) -> str | None:
    """The cooldown refusal, or None when the last restart is long enough ago (or ``force``)."""
    cooldown = ctx.config.access_for(service).cooldown
    if cooldown <= 0 or force:
        return None
    last = await _store(ctx).restarts.last(service.name, service.node)
    if last is None:
        return None
    since = (ctx.now() - last.at).total_seconds()
    if since >= cooldown:
        return None
    by = f" by {_mention(last.by)}" if last.by else ""
    return (f"refused: cooldown — {service.name} on {service.node} was restarted {fmt_duration(since)} "
            f"ago{by}; wait {fmt_duration(cooldown - since)} or ask with `force` "
            f"(`restart {service.name} force`, recorded as forced)")


def _mention(who: str | None) -> str:
    return mentions.user(who)


async def impact(ctx: Context, service: Service, st: ServiceState | None) -> tuple[list[tuple[str, str]], str, dict[
        str, object]]:
    """The plan as fields, the unavailability sentence, and the same facts as data."""
    store = _store(ctx)
    fields: list[tuple[str, str]] = [("node", service.node), ("unit", service.unit)]
    data: dict[str, object] = {"node": service.node, "unit": service.unit}
    if st is not None:
        fields.append(("current state", state_line(st, ctx.now()).replace("\n", "; ")))
        data["state"] = st.state
        t = st.throughput
        if t is not None and t.running is not None:
            fields.append(("requests", f"{t.running} running, {t.waiting or 0} waiting — they will be cut off"))
            data["running"], data["waiting"] = t.running, t.waiting or 0
        else:
            fields.append(("requests", "unknown (no /metrics answer)"))
    more_fields, more_data = plan(st, ctx.config.access_for(service))  # what the restart applies
    fields += more_fields
    data.update(more_data)
    durations = await store.loads.durations(service.name, service.node, limit=1)
    if durations:
        prev = durations[0]
        fields.append(("previous load", fmt_duration(prev)))
        unavailable = f"the service will be unavailable ~{max(1, round(prev / 60))} min"
        data["previous_load_s"] = round(prev, 1)
    else:
        unavailable = "the service will be unavailable until it has loaded again (no previous load on record)"
        data["previous_load_s"] = None
    command = build_restart_command(ctx.config.access_for(service), service)
    fields.append(("command", f"`{command}`"))
    data["command"] = command
    return fields, unavailable, data


async def handle(ctx: Context, req: Request) -> Reply:
    """A restart request: checks, impact, and a confirmation with two buttons."""
    force = req.args.force
    names = sorted({f"{s.name}@{s.node}" for s in req.services})
    if len(req.services) != 1 or not req.explicit_target:
        known = ", ".join(sorted({s.name for s in ctx.config.services})) or "none"
        text = ("refused: name exactly one service to restart, e.g. `restart kimi` "
                f"(you named {', '.join(names) or 'none'}; known: {known})")
        if len(req.services) > 1 and len({s.name for s in req.services}) == 1:
            text = (f"refused: {req.services[0].name} runs on {', '.join(s.node for s in req.services)}; "
                    f"say which: `restart {req.services[0].name} on {req.services[0].node}`")
        await record(ctx, "restart.refused", None, None, text)
        return _refusal("Restart refused", text, {"services": names})
    service = req.services[0]
    if ctx.store is None:
        return _refusal("Restart refused", "refused: no state database is configured ([state] dir or url)", {})
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    base = {"service": service.name, "node": service.node}
    if not decision.allowed:
        text = f"not allowed: {decision.reason}"
        await record(ctx, "restart.refused", service.name, service.node, text)
        return _refusal(f"Restart of {service.name} not allowed", text, base, decision.how_to_allow)
    if ctx.asker.surface != "slack":
        text = f"refused: from the terminal, use `inferbot restart {service.name}` (it asks you to type the name back)"
        return _refusal("Restart refused", text, base)
    refusal, st = await state_checks(ctx, service, force)
    if refusal is not None:
        await record(ctx, "restart.refused", service.name, service.node, refusal)
        return _refusal(f"Restart of {service.name} refused", refusal, base)

    fields, unavailable, facts = await impact(ctx, service, st)
    now = ctx.now()
    request_id = new_request_id()
    expires = now + timedelta(seconds=policy.confirm_ttl)
    await _store(ctx).requests.create(
        request_id, service.name, service.node, service.unit, ctx.asker.user_id, ctx.asker.channel_id,
        ctx.asker.thread_ts, now, expires, force, kind="restart",
    )
    jobs = jobs_of(ctx)
    if jobs is not None:
        jobs.expire(request_id, expires)
    detail = f"asked to restart; {unavailable}" + ("; FORCED past the cooldown" if force else "")
    await record(ctx, "restart.requested", service.name, service.node, detail, request_id=request_id)
    who = _mention(ctx.asker.user_id)
    text = f"{who} asked to restart *{service.name}* on *{service.node}* — {unavailable}."
    if force:
        text += " Forced: the cooldown is skipped (recorded as forced)."
    rule = " — and not the person who asked (two-person rule)" if policy.require_second_person else ""
    ttl = fmt_duration(policy.confirm_ttl)
    left_sections, left_rows = leftover_section(st, service)
    sections = [
        Section(kind="text", text=text),
        Section(kind="fields", fields=fields),
        *left_sections,
        Section(kind="context", text=f"Only people allowed to restart may confirm{rule}. "
                                     f"This request expires in {ttl} (at {hhmm(expires)})."),
    ]
    actions = [
        Action(action_id=CONFIRM, text=f"Restart {service.name}", value=request_id, style="danger"),
        Action(action_id=CANCEL, text="Cancel", value=request_id),
    ]
    data = {"request_id": request_id, **base, **facts, "force": force, "expires_at": expires.isoformat(),
            "unavailable": unavailable, "requested_by": ctx.asker.user_id,
            "require_second_person": policy.require_second_person, "leftovers": left_rows}
    return Reply(intent="restart", title=f"Restart {service.name} on {service.node}?", status="warn",
                 sections=sections, actions=actions, data=data)


# ------------------------------------------------------------------------------------------------
# Clicks


def message_reply(req: RestartRequest, text: str, status: Status, extra: list[Section] | None = None) -> Reply:
    """The confirmation message rewritten (no buttons) to say what happened."""
    # Headers are plain text in Slack (no mentions): the title drops "by <@U…>", the sentence keeps it.
    title = _BY_MENTION.sub("", text)
    sections = [Section(kind="text", text=text),
                Section(kind="context", text=f"Restart of {req.service} on {req.node} ({req.unit}), "
                                             f"asked by {_mention(req.requested_by)} — request {req.id}")]
    return Reply(intent="restart", title=title, status=status, sections=sections + (extra or []),
                 data={"notice": text, "request_id": req.id, "service": req.service, "node": req.node,
                       "state": status})


def _said(req: RestartRequest) -> tuple[str, Status, str]:
    """(message text, status, refusal to the clicker) for a request that is no longer pending."""
    at = hhmm(req.confirmed_at) if req.confirmed_at else "?"
    if req.state in ("confirmed", "running", "done", "failed") and req.confirmed_by:
        text = f"Restart confirmed by {_mention(req.confirmed_by)} at {at}"
        return text, "ok", f"refused: already confirmed by {_mention(req.confirmed_by)} at {at}"
    if req.state == "cancelled":
        text = f"Cancelled by {_mention(req.state_by)}"
        return text, "info", f"refused: this request was cancelled by {_mention(req.state_by)}"
    if req.state == "expired":
        return "Expired — ask again", "info", "refused: this request expired — ask again"
    return f"Request {req.state}", "info", f"refused: this request is {req.state}"


async def on_action(ctx: Context, action_id: str, request_id: str) -> ActionOutcome:
    """A click on ``restart_confirm`` or ``restart_cancel`` (the button's value is the request id)."""
    store = _store(ctx)
    now = ctx.now()
    who = ctx.asker.user_id
    req = await store.requests.get(request_id)
    if req is None:
        return ActionOutcome(ephemeral="refused: I don't know this restart request")
    service = ctx.config.service(req.service, req.node)
    if service is None:
        return ActionOutcome(ephemeral=f"refused: {req.service} on {req.node} is no longer in the config")
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        await record(ctx, "restart.click_refused", req.service, req.node,
                     f"{action_id}: not allowed: {decision.reason}", request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {decision.reason}")
    if req.state == "pending" and now >= req.expires_at:
        return await _expire_now(ctx, req, who, now)
    if req.state != "pending":
        return await _refuse_used(ctx, req, action_id)
    if action_id == CANCEL:
        if not await store.requests.transition(req.id, {"pending"}, "cancelled", who, now):
            return await _lost_race(ctx, req.id, action_id, who, now)
        await record(ctx, "restart.cancelled", req.service, req.node, "cancelled", request_id=req.id)
        return ActionOutcome(message=message_reply(req, f"Cancelled by {_mention(who)}", "info"))
    if action_id != CONFIRM:
        return ActionOutcome(ephemeral=f"refused: unknown action {action_id}")
    second = check_second_person(policy, req.requested_by, who)
    if not second.allowed:
        await record(ctx, "restart.click_refused", req.service, req.node, f"not allowed: {second.reason}",
                     request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {second.reason}")
    if not await store.requests.transition(req.id, {"pending"}, "confirmed", who, now):
        return await _lost_race(ctx, req.id, action_id, who, now)
    await record(ctx, "restart.confirmed", req.service, req.node,
                 "confirmed" + (" (forced past the cooldown)" if req.force else ""), request_id=req.id)
    return await run_confirmed(ctx, req, service, policy, who, now)


async def _refuse_used(ctx: Context, req: RestartRequest, action_id: str) -> ActionOutcome:
    text, status, refusal = _said(req)
    await record(ctx, "restart.click_refused", req.service, req.node, f"{action_id}: {refusal}", request_id=req.id)
    # Final states have a stable message; while confirmed/running the winner is still rewriting it.
    final = req.state in ("cancelled", "expired", "refused")
    return ActionOutcome(message=message_reply(req, text, status) if final else None, ephemeral=refusal)


async def _lost_race(ctx: Context, request_id: str, action_id: str, who: str | None, now: datetime) -> ActionOutcome:
    fresh = await _store(ctx).requests.get(request_id)
    if fresh is None:
        return ActionOutcome(ephemeral="refused: I don't know this restart request")
    if fresh.state == "pending" and now >= fresh.expires_at:
        return await _expire_now(ctx, fresh, who, now)
    return await _refuse_used(ctx, fresh, action_id)


async def _expire_now(ctx: Context, req: RestartRequest, who: str | None, now: datetime) -> ActionOutcome:
    if await _store(ctx).requests.transition(req.id, {"pending"}, "expired", None, now):
        await record(ctx, "restart.expired", req.service, req.node, "expired before anyone confirmed",
                     request_id=req.id, who="inferbot")
    return ActionOutcome(message=message_reply(req, "Expired — ask again", "info"),
                         ephemeral="refused: this request expired — ask again")


async def run_confirmed(ctx: Context, req: RestartRequest, service: Service, policy: AccessPolicy,
                        who: str | None, now: datetime) -> ActionOutcome:
    """The one winner of the confirmation: lock, re-check, execute once, start following the load."""
    store = _store(ctx)
    lock = lock_name(service.name, service.node)

    async def give_up(reason: str) -> ActionOutcome:
        await store.requests.transition(req.id, {"confirmed"}, "failed", who, now)
        await record(ctx, "restart.refused", service.name, service.node, reason, request_id=req.id)
        return ActionOutcome(message=message_reply(req, reason, "error"), ephemeral=reason)

    if not await store.locks.acquire(lock, req.id, lock_ttl(ctx), now):
        held = await settle_lock(ctx, service)  # the lock may belong to a restart that is over
        if held is not None or not await store.locks.acquire(lock, req.id, lock_ttl(ctx), now):
            held = held or await store.locks.get(lock, now)
            reason = (await in_flight_refusal(ctx, service, held) if held is not None else
                      f"refused: another restart of {service.name} on {service.node} is in flight")
            return await give_up(reason)
    # Someone may have restarted it while this request waited for its click.
    refusal = await cooldown_refusal(ctx, service, req.force)
    if refusal is not None:
        await store.locks.release(lock, req.id)
        return await give_up(refusal)
    if not await store.requests.transition(req.id, {"confirmed"}, "running", who, now):
        await store.locks.release(lock, req.id)
        return ActionOutcome(ephemeral="refused: this request changed state meanwhile")
    # The follow is on record before the command runs: if the bot dies between the two, the next bot
    # process still follows this load (and it knows the old start, so it cannot mistake it for the new).
    before = await _current_invocation(ctx, service)
    thread = req.thread_ts or req.message_ts
    await start_follow(ctx, service, "restart", now, invocation_id=BEFORE + before, thread_channel=req.channel,
                       thread_ts=thread, request_id=req.id, schedule=False)
    result = await execute_restart(ctx.cluster.pool, ctx.config.node(service.node), service, policy)
    started = ctx.now()
    if result.unreachable is None:
        await store.restarts.record(service.name, service.node, now, who, req.force)
    await record(ctx, "restart.executed", service.name, service.node, _exec_detail(result, req.force),
                 request_id=req.id)
    confirmed = f"Restart confirmed by {_mention(who)} at {hhmm(now)}"
    if not result.ok:
        await store.requests.transition(req.id, {"running"}, "failed", who, started)
        await store.follows.finish(follow_key(service.name, service.node), "failed")
        await store.locks.release(lock, req.id)
        text = f"❌ {service.name} on {service.node} failed to restart — {result.summary()}"
        extra = _exec_sections(result)
        await _notify_failure(ctx, req, text, extra)
        return ActionOutcome(message=message_reply(req, f"{confirmed} — {text}", "error", extra), executed=True)
    await start_follow(ctx, service, "restart", now,
                       invocation_id=result.invocation_id or BEFORE + before,
                       thread_channel=req.channel, thread_ts=thread, request_id=req.id)
    return ActionOutcome(message=message_reply(req, f"{confirmed} — restarting…", "loading"), executed=True)


async def _current_invocation(ctx: Context, service: Service) -> str:
    """The unit's invocation id right now ("" when stopped or unknown)."""
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], WATCH_PROBE, wait_s=RESTART_WAIT_S)
    return snap.services[0].invocation_id if snap.services else ""


def _exec_detail(result: RestartResult, forced: bool) -> str:
    parts = [f"`{result.command}`", f"exit {result.exit_status}"]
    if result.reload_command:
        parts.insert(0, f"`{result.reload_command}` first" + (" (failed)" if result.reload_failed else ""))
    if result.unreachable:
        parts.append(f"{'not asked' if result.busy else 'unreachable'}: {result.unreachable}")
    if result.start_limit_hit:
        parts.append("start-limit-hit")
    if result.stderr.strip():
        parts.append("stderr: " + result.stderr.strip().splitlines()[-1][:300])
    if result.main_pid:
        parts.append(f"new MainPID {result.main_pid}")
    if forced:
        parts.append("forced")
    return "; ".join(parts)


def _exec_sections(result: RestartResult) -> list[Section]:
    out: list[Section] = []
    if result.stderr.strip():
        out.append(Section(kind="code", title="stderr (redacted)", text=result.stderr.strip()))
    if result.fix:
        out.append(Section(kind="text", title="Fix", text=result.fix))
    return out


async def _notify_failure(ctx: Context, req: RestartRequest, text: str, extra: list[Section]) -> None:
    """The ❌ in the notify channel, once per request (no poll follows a failed restart, so a post Slack
    refused is not tried again: the confirmation in the thread, rewritten, says the same)."""
    reply = Reply(intent="notice", title=text.removeprefix("❌ "), status="error", sections=extra,
                  data={"notice": text, "kind": "failed"})
    await deliver_all(ctx, notifier_of(ctx), [Notice(f"restart:{req.id}", where, reply, req.service, req.node)
                                              for where in to_notify(ctx, "notify")])


async def expire_request(ctx: Context, request_id: str, notifier: Notifier | None) -> bool:
    """At expiry: move a still-pending request to expired and rewrite its message. True when it expired."""
    store = _store(ctx)
    req = await store.requests.get(request_id)
    if req is None or req.state != "pending":
        return False
    now = max(ctx.now(), req.expires_at)
    if not await store.requests.transition(req.id, {"pending"}, "expired", None, now):
        return False
    await record(ctx, "restart.expired", req.service, req.node, "expired before anyone confirmed",
                 request_id=req.id, who="inferbot", where=req.channel or "inferbot")
    if notifier is not None and req.message_channel and req.message_ts:
        try:
            await notifier.update(req.message_channel, req.message_ts, message_reply(req, "Expired — ask again",
                                                                                      "info"))
        except Exception:  # the state is right; only the rewrite failed
            pass
    return True


async def confirm_typed_restart(ctx: Context, service: Service, who: str, unavailable: str,
                                force: bool) -> ActionOutcome:
    """The terminal's restart, once the person typed the service name back: the request is created,
    confirmed and run exactly as a Slack confirmation would be (same audit, lock, cooldown, follow)."""
    store = _store(ctx)
    now = ctx.now()
    request_id = "t-" + new_request_id().removeprefix("r-")
    await store.requests.create(request_id, service.name, service.node, service.unit, who, None, None, now,
                                now + timedelta(minutes=5), force, kind="restart")
    await record(ctx, "restart.requested", service.name, service.node, f"from the terminal; {unavailable}"
                 + ("; FORCED past the cooldown" if force else ""), request_id=request_id)
    await store.requests.transition(request_id, {"pending"}, "confirmed", who, now)
    await record(ctx, "restart.confirmed", service.name, service.node, "typed the name back",
                 request_id=request_id)
    req = await store.requests.get(request_id)
    if req is None:  # pragma: no cover - just created
        return ActionOutcome(ephemeral="the restart request was lost; nothing was restarted")
    return await run_confirmed(ctx, req, service, ctx.config.access_for(service), who, now)
