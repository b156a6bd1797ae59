"""The restart: a kind of confirmable request (``handlers/confirmable/``), and its in-flight lock.

Order of checks (each refusal is answered with its reason and audited):
1. who and where (``[access]``, per service ``[services.access]``): the flow's, as for every kind;
2. state: node reachable, no restart of this service in flight (a store lock that outlives the bot and
   expires), cooldown since the last restart unless ``force`` (recorded as forced);
3. impact, shown before anyone confirms.

Once confirmed it takes the lock, checks the cooldown again, and runs the restart command once; the follow
(``handlers/follow.py``) takes the load to its end, which ends the request and its lock.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from config.models import Service
from handlers.audit import record
from handlers.change.guard import restart_refusal as change_refusal
from handlers.common import fmt_duration, node_not_reached, state_line
from handlers.confirmable.flow import ask, refused
from handlers.confirmable.kind import (
    ActionOutcome,
    Asked,
    Confirmed,
    Ended,
    Interrupted,
    Later,
    Preview,
    Settling,
    Words,
)
from handlers.context import Context, Request, require_store
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
from handlers.notify import Notifier, groups_of, notifier_of
from handlers.reply import Reply, Section
from handlers.restart_diff import leftover_section, plan
from handlers.watcher import WATCH_PROBE
from services import mentions
from services.access import check_restart_access
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.node.restart import RESTART_WAIT_S, RestartResult, build_restart_command, execute_restart
from services.store.records import ConfirmableRequest, LockRecord

# GPUs: leftover vLLM processes outside the unit are listed in the confirmation (issue 14).
IMPACT_PROBE = ProbeOptions(gpus=True, metrics_samples=1, http_timeout_s=3.0)
log = logging.getLogger("inferbot.restart")
FINAL_STATES = frozenset({"done", "failed", "cancelled", "expired", "refused"})
FORCED = "; FORCED past the cooldown"
"""The end of the audit line of a request asked with ``force``."""
SETTLE_AGAIN_S = 60.0


async def state_checks(ctx: Context, service: Service, force: bool) -> tuple[str | None, ServiceState | None]:
    """Node reachable, nothing in flight, cooldown: the first refusal reason (or None) and the state seen."""
    require_store(ctx)
    # A restart waits behind a burst of questions for a channel of its node (RESTART_WAIT_S) rather than be refused.
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], IMPACT_PROBE, wait_s=RESTART_WAIT_S)
    st = snap.services[0] if snap.services else None
    report = snap.nodes[0] if snap.nodes else None
    if report is not None and not report.ok:
        return f"refused: {node_not_reached(service.node, report.error)}", st
    changing = await change_refusal(ctx, service)  # a settings change's own restart holds the lock too
    if changing is not None:
        return changing, st
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
    store = require_store(ctx)
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
    store = require_store(ctx)
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
    store = require_store(ctx)
    req = await store.requests.get(lock.owner)
    age = fmt_duration((ctx.now() - lock.acquired_at).total_seconds())
    about = f"request {lock.owner}, {age} old"
    if req is not None:
        by = req.confirmed_by or req.requested_by
        about += f", confirmed by {mentions.user(by)}" if req.confirmed_by else f", asked by {mentions.user(by)}"
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
    store = require_store(ctx)
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
        return refused("unlock", "Unlock refused", text, {"services": names})
    service = req.services[0]
    base = {"service": service.name, "node": service.node}
    if ctx.store is None:
        return refused("unlock", "Unlock refused", "refused: no state database is configured ([state] dir or url)",
                       base)
    decision = await check_restart_access(ctx.config.access_for(service), ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        text = f"not allowed: {decision.reason}"
        await record(ctx, "restart.unlock_refused", service.name, service.node, text)
        return refused("unlock", f"Unlock of {service.name} not allowed", text, base, decision.how_to_allow)
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
    last = await require_store(ctx).restarts.last(service.name, service.node)
    if last is None:
        return None
    since = (ctx.now() - last.at).total_seconds()
    if since >= cooldown:
        return None
    by = f" by {mentions.user(last.by)}" if last.by else ""
    return (f"refused: cooldown — {service.name} on {service.node} was restarted {fmt_duration(since)} "
            f"ago{by}; wait {fmt_duration(cooldown - since)} or ask with `force` "
            f"(`restart {service.name} force`, recorded as forced)")


async def impact(ctx: Context, service: Service, st: ServiceState | None) -> tuple[list[tuple[str, str]], str, dict[
        str, object]]:
    """The plan as fields, the unavailability sentence, and the same facts as data."""
    store = require_store(ctx)
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
    return await ask(ctx, RESTART, req, force=req.args.force)


class RestartKind:
    """The restart as a kind of confirmable request (``handlers/confirmable/kind.py``)."""

    name = "restart"
    prefix = "r-"
    words = Words(title="Restart", verb="restart", command="restart", confirmers="people allowed to restart",
                  elsewhere="refused: from the terminal, use `inferbot restart {service}` (it asks you to type the "
                            "name back)")

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str:
        """Reachable, nothing in flight, the cooldown; then the impact, shown before anyone confirms."""
        service, force = asked.service, asked.force
        refusal, st = await state_checks(ctx, service, force)
        if refusal is not None:
            return refusal
        fields, unavailable, facts = await impact(ctx, service, st)
        who = mentions.user(ctx.asker.user_id)
        text = f"{who} asked to restart *{service.name}* on *{service.node}* — {unavailable}."
        if force:
            text += " Forced: the cooldown is skipped (recorded as forced)."
        left_sections, left_rows = leftover_section(st, service)
        policy = ctx.config.access_for(service)
        return Preview(
            sections=[Section(kind="text", text=text), Section(kind="fields", fields=fields), *left_sections],
            data={**facts, "force": force, "unavailable": unavailable,
                  "require_second_person": policy.require_second_person, "leftovers": left_rows},
            detail=f"asked to restart; {unavailable}" + (FORCED if force else ""))

    async def claim(self, run: Confirmed) -> str | None:
        """The in-flight lock, then the cooldown again: someone may have restarted it while the request waited."""
        ctx, service, req = run.ctx, run.service, run.req
        store = run.store
        lock = lock_name(service.name, service.node)
        if not await store.locks.acquire(lock, req.id, lock_ttl(ctx), run.at):
            held = await settle_lock(ctx, service)  # the lock may belong to a restart that is over
            if held is not None or not await store.locks.acquire(lock, req.id, lock_ttl(ctx), run.at):
                held = held or await store.locks.get(lock, run.at)
                return (await in_flight_refusal(ctx, service, held) if held is not None else
                        f"refused: another restart of {service.name} on {service.node} is in flight")
        refusal = await change_refusal(ctx, service) or await cooldown_refusal(ctx, service, req.force)
        if refusal is not None:
            await store.locks.release(lock, req.id)
        return refusal

    async def run(self, run: Confirmed) -> ActionOutcome:
        """Execute once and start following the load (the follow ends the request and the lock)."""
        ctx, service, req, now = run.ctx, run.service, run.req, run.at
        store = run.store
        # The follow is on record before the command runs: if the bot dies between the two, the next bot
        # process still follows this load (and it knows the old start, so it cannot mistake it for the new).
        before = await _current_invocation(ctx, service)
        thread = req.thread_ts or req.message_ts
        await start_follow(ctx, service, "restart", now, invocation_id=BEFORE + before, thread_channel=req.channel,
                           thread_ts=thread, request_id=req.id, schedule=False)
        result = await execute_restart(ctx.cluster.pool, ctx.config.node(service.node), service,
                                       ctx.config.access_for(service))
        if result.unreachable is None:
            await store.restarts.record(service.name, service.node, now, run.who, req.force)
        await run.audit("executed", _exec_detail(result, req.force))
        if not result.ok:
            await run.finish(False)
            await store.follows.finish(follow_key(service.name, service.node), "failed")
            await self.release(ctx, req)
            text = f"❌ {service.name} on {service.node} failed to restart — {result.summary()}"
            extra = _exec_sections(result)
            await _notify_failure(ctx, req, text, extra)
            return ActionOutcome(message=run.message(f"{run.line} — {text}", "error", extra), executed=True)
        await start_follow(ctx, service, "restart", now,
                           invocation_id=result.invocation_id or BEFORE + before,
                           thread_channel=req.channel, thread_ts=thread, request_id=req.id)
        return ActionOutcome(message=run.message(f"{run.line} — restarting…", "loading"), executed=True)

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        """The in-flight lock, if this request holds it."""
        await require_store(ctx).locks.release(lock_name(req.service, req.node), req.id)

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        """The follow of its load ends it; without one, the restart never ran (or its load was never followed)."""
        store = require_store(ctx)
        f = await store.follows.get(follow_key(req.service, req.node))
        if f is not None and f.request_id == req.id:
            if not f.active:  # the load ended, and the process stopped before the request heard it
                return Ended(ok=f.outcome == "ready")
            limit = f.started_at + timedelta(seconds=ctx.config.watch.max_load + SETTLE_AGAIN_S)
            return Later(max(limit, ctx.now() + timedelta(seconds=SETTLE_AGAIN_S)))
        service = ctx.config.service(req.service, req.node)
        node_timeout = ctx.config.node(req.node).timeout if service is not None else 0.0
        # As long as a live process may still be between its confirmation and the follow it records.
        grace = RESTART_WAIT_S + RESTART_TAKES_EFFECT_S + 2 * node_timeout
        if await store.audit.has("restart.executed", req.id):
            return Interrupted(grace, "the bot stopped after the restart ran, before its load was followed")
        return Interrupted(grace, "the restart never started: the bot stopped before running it")


RESTART = RestartKind()


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


async def _notify_failure(ctx: Context, req: ConfirmableRequest, text: str, extra: list[Section]) -> None:
    """The ❌ in the notify channel, once per request (no poll follows a failed restart, so a post Slack
    refused is not tried again: the confirmation in the thread, rewritten, says the same)."""
    reply = Reply(intent="notice", title=text.removeprefix("❌ "), status="error", sections=extra,
                  data={"notice": text, "kind": "failed"})
    await deliver_all(ctx, notifier_of(ctx), [Notice(f"restart:{req.id}", where, reply, req.service, req.node)
                                              for where in to_notify(ctx, "notify")])
