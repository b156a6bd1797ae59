"""``bench kimi``: the acceptance benchmark on demand, guarded and confirmed like a restart (issue 14).

It loads a production server, so it takes the restart's rules: who and where (``[access]`` or the
service's own), a visible confirmation with the same two buttons (``restart_confirm`` / ``restart_cancel``;
the request's kind, ``bench``, tells the click apart from a restart's), the two-person rule, expiry, and every
step in the audit log. The request is a row of the store's request table, so a click is a compare-and-set
and the benchmark runs at most once per request. It is refused while the service is not ready, while a
restart of it is in flight, or while another benchmark of it runs.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta

from config.models import Service
from handlers.acceptance import PLAN_PROBE, STALE_MARGIN_S, run_bench, what_runs
from handlers.audit import record
from handlers.common import node_not_reached
from handlers.context import Context, Request
from handlers.follow import lock_name
from handlers.notice_words import hhmm
from handlers.notices import post_once
from handlers.notify import Notifier, groups_of, jobs_of, notifier_of
from handlers.reply import Action, Reply, Section, Status
from handlers.restart import CANCEL, CONFIRM, ActionOutcome
from services import mentions
from services.access import check_restart_access, check_second_person
from services.store.ports import StateStore
from services.store.records import RestartRequest

BENCH_PREFIX = "b-"
"""Ids of benchmark requests start with it (before the requests' ``kind`` column, it was their kind)."""
LOCK_MARGIN_S = 300.0
log = logging.getLogger("inferbot.bench")


async def is_bench_request(ctx: Context, request_id: str) -> bool:
    """True for a request of kind ``bench`` (its buttons and its expiry share the restart's).

    An id the store does not know is judged by its prefix, so that the answer names the right kind.
    """
    req = await ctx.store.requests.get(request_id) if ctx.store is not None else None
    return req.kind == "bench" if req is not None else request_id.startswith(BENCH_PREFIX)


def bench_lock(service: str, node: str) -> str:
    """The lock held while a benchmark of service@node runs."""
    return f"bench:{service}@{node}"


def _store(ctx: Context) -> StateStore:
    if ctx.store is None:
        raise RuntimeError("a benchmark needs the state store")
    return ctx.store


def _mention(who: str | None) -> str:
    return mentions.user(who)


def _refusal(title: str, text: str, data: Mapping[str, object], how: str | None = None) -> Reply:
    sections = [Section(kind="text", text=text)]
    if how:
        sections.append(Section(kind="code", title="To allow it, an operator adds to the config", text=how))
    return Reply(intent="bench", ok=False, title=title, status="error", sections=sections,
                 data={"refused": True, "reason": text, **data}, error=text)


async def _state_refusal(ctx: Context, service: Service) -> str | None:
    """Why a benchmark cannot start now (None: it can)."""
    if not service.bench_dir:
        return (f"refused: {service.name} has no bench_dir configured (where `vllm bench serve --save-result` "
                f"writes); an operator adds `bench_dir = \"…\"` to its [[services]] entry")
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], PLAN_PROBE)
    report = snap.nodes[0] if snap.nodes else None
    if report is not None and not report.ok:
        return f"refused: {node_not_reached(service.node, report.error)}"
    st = snap.services[0]
    if st.state != "ready":
        return f"refused: {service.name} on {service.node} is not ready ({st.state}) — a benchmark needs it serving"
    now = ctx.now()
    store = _store(ctx)
    if await store.locks.holder(lock_name(service.name, service.node), now) is not None:
        return f"refused: a restart of {service.name} on {service.node} is in flight; benchmark it once it is ready"
    held = await store.locks.holder(bench_lock(service.name, service.node), now)
    if held is not None:
        return f"refused: a benchmark of {service.name} on {service.node} is already running (request {held})"
    return None


async def handle(ctx: Context, req: Request) -> Reply:
    """"bench kimi": check, then ask for a confirmation with the restart's buttons."""
    names = sorted({f"{s.name}@{s.node}" for s in req.services})
    if len(req.services) != 1 or not req.explicit_target:
        known = ", ".join(sorted({s.name for s in ctx.config.services})) or "none"
        text = ("refused: name exactly one service to benchmark, e.g. `bench kimi` "
                f"(you named {', '.join(names) or 'none'}; known: {known})")
        if len(req.services) > 1 and len({s.name for s in req.services}) == 1:
            text = (f"refused: {req.services[0].name} runs on {', '.join(s.node for s in req.services)}; "
                    f"say which: `bench {req.services[0].name} on {req.services[0].node}`")
        return _refusal("Benchmark refused", text, {"services": names})
    service = req.services[0]
    base = {"service": service.name, "node": service.node}
    if ctx.store is None:
        return _refusal("Benchmark refused", "refused: no state database is configured ([state] dir or url)", base)
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        text = f"not allowed: {decision.reason}"
        await record(ctx, "bench.refused", service.name, service.node, text)
        return _refusal(f"Benchmark of {service.name} not allowed", text, base, decision.how_to_allow)
    if ctx.asker.surface != "slack":
        return _refusal("Benchmark refused", "refused: `bench` is asked in Slack, where it is confirmed with a button",
                        base)
    refusal = await _state_refusal(ctx, service)
    if refusal is not None:
        await record(ctx, "bench.refused", service.name, service.node, refusal)
        return _refusal(f"Benchmark of {service.name} refused", refusal, base)
    now = ctx.now()
    request_id = BENCH_PREFIX + secrets.token_hex(6)
    expires = now + timedelta(seconds=policy.confirm_ttl)
    await _store(ctx).requests.create(request_id, service.name, service.node, service.unit, ctx.asker.user_id,
                                      ctx.asker.channel_id, ctx.asker.thread_ts, now, expires, False, kind="bench")
    jobs = jobs_of(ctx)
    if jobs is not None:
        jobs.expire(request_id, expires)
    runs = what_runs(service)
    await record(ctx, "bench.requested", service.name, service.node, f"asked to benchmark: {runs}",
                 request_id=request_id)
    rule = " — and not the person who asked (two-person rule)" if policy.require_second_person else ""
    sections = [
        Section(kind="text", text=f"{_mention(ctx.asker.user_id)} asked to benchmark *{service.name}* on "
                                  f"*{service.node}* — it loads the production server while it runs: {runs}."),
        Section(kind="fields", fields=[("node", service.node), ("unit", service.unit),
                                       ("results", str(service.bench_dir)),
                                       ("regression", f"flagged beyond {service.acceptance.regression_pct:g} %")]),
        Section(kind="context", text=f"Only people allowed to restart it may confirm{rule}. This request expires "
                                     f"at {hhmm(expires)}."),
    ]
    actions = [Action(action_id=CONFIRM, text=f"Benchmark {service.name}", value=request_id, style="danger"),
               Action(action_id=CANCEL, text="Cancel", value=request_id)]
    return Reply(intent="bench", title=f"Benchmark {service.name} on {service.node}?", status="warn",
                 sections=sections, actions=actions,
                 data={"request_id": request_id, **base, "expires_at": expires.isoformat(), "runs": runs,
                       "requested_by": ctx.asker.user_id})


def message_reply(req: RestartRequest, text: str, status: Status) -> Reply:
    """The confirmation message rewritten (no buttons) to say what happened."""
    sections = [Section(kind="text", text=text),
                Section(kind="context", text=f"Benchmark of {req.service} on {req.node}, asked by "
                                             f"{_mention(req.requested_by)} — request {req.id}")]
    title = re.split(" by " + mentions.PATTERN, text, maxsplit=1)[0]  # headers are plain text: no mentions
    return Reply(intent="bench", title=title, status=status, sections=sections,
                 data={"notice": text, "request_id": req.id, "service": req.service, "node": req.node,
                       "state": status})


async def on_action(ctx: Context, action_id: str, request_id: str) -> ActionOutcome:
    """A click on a benchmark confirmation (``restart_confirm`` / ``restart_cancel`` on a ``bench`` request)."""
    store = _store(ctx)
    now = ctx.now()
    who = ctx.asker.user_id
    req = await store.requests.get(request_id)
    if req is None:
        return ActionOutcome(ephemeral="refused: I don't know this benchmark request")
    service = ctx.config.service(req.service, req.node)
    if service is None:
        return ActionOutcome(ephemeral=f"refused: {req.service} on {req.node} is no longer in the config")
    policy = ctx.config.access_for(service)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), service.name)
    if not decision.allowed:
        await record(ctx, "bench.click_refused", req.service, req.node, f"{action_id}: not allowed: {decision.reason}",
                     request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {decision.reason}")
    if req.state == "pending" and now >= req.expires_at:
        await _expire(ctx, req, now)
        return ActionOutcome(message=message_reply(req, "Expired — ask again", "info"),
                             ephemeral="refused: this request expired — ask again")
    if req.state != "pending":
        said = (f"refused: already confirmed by {_mention(req.confirmed_by)}" if req.confirmed_by
                else f"refused: this request is {req.state}")
        await record(ctx, "bench.click_refused", req.service, req.node, f"{action_id}: {said}", request_id=req.id)
        return ActionOutcome(ephemeral=said)
    if action_id == CANCEL:
        if not await store.requests.transition(req.id, {"pending"}, "cancelled", who, now):
            return ActionOutcome(ephemeral="refused: this request changed state meanwhile")
        await record(ctx, "bench.cancelled", req.service, req.node, "cancelled", request_id=req.id)
        return ActionOutcome(message=message_reply(req, f"Cancelled by {_mention(who)}", "info"))
    if action_id != CONFIRM:
        return ActionOutcome(ephemeral=f"refused: unknown action {action_id}")
    second = check_second_person(policy, req.requested_by, who)
    if not second.allowed:
        await record(ctx, "bench.click_refused", req.service, req.node, f"not allowed: {second.reason}",
                     request_id=req.id)
        return ActionOutcome(ephemeral=f"not allowed: {second.reason}")
    if not await store.requests.transition(req.id, {"pending"}, "confirmed", who, now):
        return ActionOutcome(ephemeral="refused: this request changed state meanwhile")
    await record(ctx, "bench.confirmed", req.service, req.node, "confirmed", request_id=req.id)
    return await _run_confirmed(ctx, req, service, who, now)


async def _run_confirmed(ctx: Context, req: RestartRequest, service: Service, who: str | None,
                         now: datetime) -> ActionOutcome:
    store = _store(ctx)
    confirmed = f"Benchmark confirmed by {_mention(who)} at {hhmm(now)}"

    async def give_up(reason: str) -> ActionOutcome:
        await store.requests.transition(req.id, {"confirmed"}, "failed", who, now)
        await record(ctx, "bench.refused", service.name, service.node, reason, request_id=req.id)
        return ActionOutcome(message=message_reply(req, f"{confirmed} — {reason}", "error"), ephemeral=reason)

    refusal = await _state_refusal(ctx, service)  # it may have changed while the request waited
    if refusal is not None:
        return await give_up(refusal)
    ttl = service.acceptance.timeout + LOCK_MARGIN_S
    if not await store.locks.acquire(bench_lock(service.name, service.node), req.id, ttl, now):
        return await give_up(f"refused: a benchmark of {service.name} on {service.node} is already running")
    try:
        if not await store.requests.transition(req.id, {"confirmed"}, "running", who, now):
            return ActionOutcome(ephemeral="refused: this request changed state meanwhile")
        notifier = notifier_of(ctx)
        fresh = await store.requests.get(req.id) or req
        if notifier is not None and fresh.message_channel and fresh.message_ts:
            try:
                await notifier.update(fresh.message_channel, fresh.message_ts,
                                      message_reply(req, f"{confirmed} — running: {what_runs(service)}…", "loading"))
            except Exception:  # the final rewrite says it all again
                log.warning("could not rewrite the benchmark confirmation", exc_info=True)
        reply = await run_bench(ctx, service, req.id, who=who)
        if reply is None:  # pragma: no cover - the request's own claim cannot be held by someone else
            return ActionOutcome(ephemeral="refused: this benchmark is already running")
        await _post(ctx, fresh, reply, notifier)
        failed = reply.data.get("verdict") == "failed"
        await store.requests.transition(req.id, {"running"}, "failed" if failed else "done", who, ctx.now())
    finally:
        await store.locks.release(bench_lock(service.name, service.node), req.id)
    line = str(reply.data.get("notice", reply.title))
    return ActionOutcome(message=message_reply(req, f"{confirmed} — {line}", "error" if failed else "ok"),
                         executed=True)


async def _post(ctx: Context, req: RestartRequest, reply: Reply, notifier: Notifier | None) -> None:
    """The result in the request's thread and the notify channel, once each."""
    if notifier is None:
        return
    store = _store(ctx)
    key = f"bench:{req.id}"
    places: list[tuple[str, str, str | None]] = []
    if req.channel:
        places.append(("thread", req.channel, req.thread_ts or req.message_ts))
    if ctx.config.notify.channel:
        places.append(("notify", ctx.config.notify.channel, None))
    for place, channel, thread in places:
        await post_once(store.notices, key, place, notifier, channel, thread, reply, ctx.now())


async def _expire(ctx: Context, req: RestartRequest, now: datetime) -> bool:
    if await _store(ctx).requests.transition(req.id, {"pending"}, "expired", None, now):
        await record(ctx, "bench.expired", req.service, req.node, "expired before anyone confirmed",
                     request_id=req.id, who="inferbot", where=req.channel or "inferbot")
        return True
    return False


async def expire_bench_request(ctx: Context, request_id: str, notifier: Notifier | None) -> bool:
    """At expiry: a still-pending benchmark request becomes expired and its message says so."""
    req = await _store(ctx).requests.get(request_id)
    if req is None or req.state != "pending":
        return False
    if not await _expire(ctx, req, max(ctx.now(), req.expires_at)):
        return False
    if notifier is not None and req.message_channel and req.message_ts:
        try:
            await notifier.update(req.message_channel, req.message_ts,
                                  message_reply(req, "Expired — ask again", "info"))
        except Exception:  # the state is right; only the rewrite failed
            pass
    return True


SETTLE_AGAIN_S = 60.0


async def settle_bench_request(ctx: Context, request_id: str, notifier: Notifier | None) -> datetime | None:
    """A benchmark request left confirmed or running by a process that stopped: finish it once.

    Its result, when the run ended, is posted (once per place) and the request closed; a run that can no
    longer be going is ended as interrupted and said so. Returns when to look again (None: settled).
    """
    store = _store(ctx)
    req = await store.requests.get(request_id)
    if req is None or req.state not in ("confirmed", "running"):
        return None
    now = ctx.now()
    service = ctx.config.service(req.service, req.node)
    run = await store.bench_runs.get(req.id)
    if service is None or run is None:
        # Confirmed but never claimed: the confirming process stopped before it started (give it a while).
        node_timeout = ctx.config.node(req.node).timeout if service is not None else 0.0
        since = req.state_at or req.created_at
        due = since + timedelta(seconds=SETTLE_AGAIN_S + 2 * node_timeout)
        if now < due:
            return due
        if await store.requests.transition(req.id, {"confirmed", "running"}, "failed", None, now):
            await record(ctx, "bench.interrupted", req.service, req.node, "the benchmark never started",
                         request_id=req.id, who="inferbot")
        await store.locks.release(bench_lock(req.service, req.node), req.id)
        return None
    if run.state == "running":
        limit = service.acceptance.timeout + ctx.config.node(service.node).timeout + STALE_MARGIN_S
        due = run.started_at + timedelta(seconds=limit)
        if now < due:
            return due
    reply = await run_bench(ctx, service, req.id)  # the stored result, or "interrupted" for a stale run
    if reply is None:
        return now + timedelta(seconds=SETTLE_AGAIN_S)
    await _post(ctx, req, reply, notifier)
    failed = reply.data.get("verdict") == "failed"
    await store.requests.transition(req.id, {"confirmed", "running"} if failed else {"running"},
                                    "failed" if failed else "done", None, now)
    await store.locks.release(bench_lock(req.service, req.node), req.id)
    return None
