"""``bench kimi``: the acceptance benchmark on demand, a kind of confirmable request like a restart (issue 14).

It loads a production server, so it takes the restart's rules, which are the flow's for every kind
(``handlers/confirmable/``): who and where (``[access]`` or the service's own), a visible confirmation with the
same two buttons (``restart_confirm`` / ``restart_cancel``; the request's kind, ``bench``, says what they
confirm), the two-person rule, expiry, and every step in the audit log. A click is a compare-and-set on the
request's row, so the benchmark runs at most once per request. It is refused while the service is not ready,
while a restart of it is in flight, or while another benchmark of it runs.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from config.models import Service
from handlers.acceptance import PLAN_PROBE, STALE_MARGIN_S, run_bench, what_runs
from handlers.common import node_not_reached
from handlers.confirmable.flow import ask
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
from handlers.follow import lock_name
from handlers.notice_pipeline import Notice, Where, deliver_all, to_notify
from handlers.notify import Notifier, notifier_of
from handlers.reply import Reply, Section
from services import mentions
from services.store.records import ConfirmableRequest

LOCK_MARGIN_S = 300.0
SETTLE_AGAIN_S = 60.0
log = logging.getLogger("inferbot.bench")


def bench_lock(service: str, node: str) -> str:
    """The lock held while a benchmark of service@node runs."""
    return f"bench:{service}@{node}"


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
    store = require_store(ctx)
    if await store.locks.holder(lock_name(service.name, service.node), now) is not None:
        return f"refused: a restart of {service.name} on {service.node} is in flight; benchmark it once it is ready"
    held = await store.locks.holder(bench_lock(service.name, service.node), now)
    if held is not None:
        return f"refused: a benchmark of {service.name} on {service.node} is already running (request {held})"
    return None


async def handle(ctx: Context, req: Request) -> Reply:
    """"bench kimi": check, then ask for a confirmation with the restart's buttons."""
    return await ask(ctx, BENCH, req)


class BenchKind:
    """The on-demand benchmark as a kind of confirmable request (``handlers/confirmable/kind.py``)."""

    name = "bench"
    prefix = "b-"
    """Before the requests' ``kind`` column, the prefix was the kind (migration 0004 read it)."""
    words = Words(title="Benchmark", verb="benchmark", command="bench", names_who_ended=False)

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str:
        """Configured, reachable, ready, nothing else in flight; then what it runs."""
        service = asked.service
        refusal = await _state_refusal(ctx, service)
        if refusal is not None:
            return refusal
        runs = what_runs(service)
        text = (f"{mentions.user(ctx.asker.user_id)} asked to benchmark *{service.name}* on *{service.node}* — "
                f"it loads the production server while it runs: {runs}.")
        fields = [("node", service.node), ("unit", service.unit), ("results", str(service.bench_dir)),
                  ("regression", f"flagged beyond {service.acceptance.regression_pct:g} %")]
        return Preview(sections=[Section(kind="text", text=text), Section(kind="fields", fields=fields)],
                       data={"runs": runs}, detail=f"asked to benchmark: {runs}")

    async def claim(self, run: Confirmed) -> str | None:
        """The same checks again (the service may have changed while the request waited), then the lock."""
        refusal = await _state_refusal(run.ctx, run.service)
        if refusal is not None:
            return refusal
        service = run.service
        ttl = service.acceptance.timeout + LOCK_MARGIN_S
        if not await run.store.locks.acquire(bench_lock(service.name, service.node), run.req.id, ttl, run.at):
            return f"refused: a benchmark of {service.name} on {service.node} is already running"
        return None

    async def run(self, run: Confirmed) -> ActionOutcome:
        """Run it once, post the result in the thread and the notify channel, and say it in the message."""
        ctx, service, req = run.ctx, run.service, run.req
        try:
            notifier = notifier_of(ctx)
            fresh = await run.store.requests.get(req.id) or req
            if notifier is not None and fresh.message_channel and fresh.message_ts:
                try:
                    await notifier.update(fresh.message_channel, fresh.message_ts,
                                          run.message(f"{run.line} — running: {what_runs(service)}…", "loading"))
                except Exception:  # the final rewrite says it all again
                    log.warning("could not rewrite the benchmark confirmation", exc_info=True)
            reply = await run_bench(ctx, service, req.id, who=run.who)
            if reply is None:  # pragma: no cover - the request's own claim cannot be held by someone else
                return ActionOutcome(ephemeral="refused: this benchmark is already running")
            await _post(ctx, fresh, reply, notifier)
            failed = reply.data.get("verdict") == "failed"
            await run.finish(not failed)
        finally:
            await self.release(ctx, req)
        line = str(reply.data.get("notice", reply.title))
        return ActionOutcome(message=run.message(f"{run.line} — {line}", "error" if failed else "ok"), executed=True)

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        """The benchmark's lock, if this request holds it."""
        await require_store(ctx).locks.release(bench_lock(req.service, req.node), req.id)

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        """Its result, when the run ended, is posted (once per place); a run that can no longer be going is
        ended as interrupted and said so."""
        service = ctx.config.service(req.service, req.node)
        run = await require_store(ctx).bench_runs.get(req.id)
        if service is None or run is None:
            # Confirmed but never claimed: the confirming process stopped before it started (give it a while).
            node_timeout = ctx.config.node(req.node).timeout if service is not None else 0.0
            return Interrupted(SETTLE_AGAIN_S + 2 * node_timeout, "the benchmark never started")
        now = ctx.now()
        if run.state == "running":
            limit = service.acceptance.timeout + ctx.config.node(service.node).timeout + STALE_MARGIN_S
            due = run.started_at + timedelta(seconds=limit)
            if now < due:
                return Later(due)
        reply = await run_bench(ctx, service, req.id)  # the stored result, or "interrupted" for a stale run
        if reply is None:
            return Later(now + timedelta(seconds=SETTLE_AGAIN_S))
        await _post(ctx, req, reply, notifier)
        return Ended(ok=reply.data.get("verdict") != "failed")


BENCH = BenchKind()


async def _post(ctx: Context, req: ConfirmableRequest, reply: Reply, notifier: Notifier | None) -> None:
    """The result in the request's thread and the notify channel, once each."""
    if notifier is None:
        return
    places: list[Where] = []
    if req.channel:
        places.append(Where("thread", req.channel, req.thread_ts or req.message_ts))
    places += to_notify(ctx, "notify")
    await deliver_all(ctx, notifier, [Notice(f"bench:{req.id}", where, reply, req.service, req.node)
                                      for where in places])
