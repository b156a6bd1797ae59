"""The acceptance benchmark (issue 14): after a ✅ when ``[services.acceptance] bench = true``, and on demand.

One benchmark is one row in the store, claimed by an insert before it runs (so it runs once, whichever
process or replica gets there first) and ended with the notice it produced (so a post that fails is
retried with the same words). A row left running by a process that died is ended as interrupted once it
is older than the benchmark could take.
"""

from __future__ import annotations

from datetime import UTC, datetime

from config.models import Service
from handlers.audit import record
from handlers.context import Context, require_store
from handlers.notice_pipeline import Notice, Where, all_done, deliver_all
from handlers.ports import Notifier
from handlers.reply import Reply, Section, Status
from services.cluster import held_api_key
from services.node.assemble import expected_model
from services.node.bench_run import BenchOutcome, num_prompts, plan_for, run_acceptance, summary_line, verdict
from services.node.probe import ProbeOptions
from services.store.records import BenchRun, Follow

PLAN_PROBE = ProbeOptions(gpus=False, journal_lines=0, http_timeout_s=3.0)
STALE_MARGIN_S = 120.0



def what_runs(service: Service) -> str:
    """``8 prompts at concurrency 1, then 128 at 64``."""
    peak = service.acceptance.peak_concurrency
    return f"{num_prompts(1)} prompts at concurrency 1, then {num_prompts(peak)} at {peak}"


def bench_reply(service: Service, outcome: BenchOutcome) -> Reply:
    """The benchmark notice: ✅ the numbers, ⚠️ a regression beyond ``regression_pct``, or ❌ why it failed."""
    who = f"{service.name} on {service.node}"
    pct = service.acceptance.regression_pct
    judged = verdict(outcome, pct)
    status: Status
    if judged == "failed":
        body, emoji, status = f"{who} benchmark failed — {outcome.error}", "❌", "error"
    elif judged == "regression":
        body = f"{who} benchmark regression: {summary_line(outcome)} (more than {pct:g} % down)"
        emoji, status = "⚠️", "warn"
    else:
        body, emoji, status = f"{who} benchmark: {summary_line(outcome)}", "✅", "ok"
    levels = {}
    for name, level in (("single_stream", outcome.single), ("peak", outcome.peak)):
        if level is not None:
            levels[name] = {"concurrency": level.concurrency, "output_throughput": level.output_throughput,
                            "date": level.date, "previous": level.previous, "previous_date": level.previous_date,
                            "change_pct": None if level.change_pct is None else round(level.change_pct, 2)}
    return Reply(intent="notice", title=body, status=status,
                 sections=[Section(kind="context", text=f"vllm bench serve: {what_runs(service)}, "
                                                        f"results saved in {service.bench_dir}")],
                 data={"notice": f"{emoji} {body}", "kind": f"bench.{judged}", "service": service.name,
                       "node": service.node, "verdict": judged, **levels})


def _from_run(run: BenchRun) -> Reply:
    data = dict(run.data or {})
    status: Status = "ok" if run.status == "ok" else "warn" if run.status == "warn" else "error"
    text = run.text or ""
    return Reply(intent="notice", title=text.split(" ", 1)[-1], status=status, data={**data, "notice": text})


async def _execute(ctx: Context, service: Service) -> Reply:
    node = ctx.config.node(service.node)
    snap = await ctx.cluster.snapshot([service], [node], PLAN_PROBE)
    st = snap.services[0]
    if st.state != "ready":
        why = st.reason or st.state
        return bench_reply(service, BenchOutcome(ok=False, error=f"the server is not ready ({why})"))
    plan = plan_for(service, st.api_url, st.model, expected_model(st), st.command)
    if isinstance(plan, str):
        return bench_reply(service, BenchOutcome(ok=False, error=f"cannot benchmark it: {plan}"))
    outcome = await run_acceptance(ctx.cluster.pool, node, service, plan, held_api_key(service))
    return bench_reply(service, outcome)


async def run_bench(ctx: Context, service: Service, run_id: str, who: str | None = "inferbot") -> Reply | None:
    """Run the benchmark ``run_id`` once (or return how it ended); None while another process runs it."""
    store = require_store(ctx)
    run = await store.bench_runs.get(run_id)
    if run is None and await store.bench_runs.claim(run_id, service.name, service.node, ctx.now()):
        await record(ctx, "bench.started", service.name, service.node, what_runs(service), request_id=run_id,
                     who=who)
        reply = await _execute(ctx, service)
        judged = str(reply.data.get("verdict", "failed"))
        state = "failed" if judged == "failed" else "done"
        await store.bench_runs.finish(run_id, state, str(reply.data["notice"]),
                                      {"ok": "ok", "regression": "warn"}.get(judged, "error"), reply.data, ctx.now())
        await record(ctx, f"bench.{judged}", service.name, service.node, str(reply.data["notice"]),
                     request_id=run_id, who="inferbot")
        run = await store.bench_runs.get(run_id)
    if run is None:
        return None
    if run.state == "running":
        limit = service.acceptance.timeout + ctx.config.node(service.node).timeout + STALE_MARGIN_S
        if (ctx.now() - run.started_at).total_seconds() <= limit:
            return None
        text = f"❌ {service.name} on {service.node} benchmark interrupted — the bot stopped while it ran"
        if await store.bench_runs.finish(run_id, "failed", text, "error", {"verdict": "failed", "kind": "bench.failed"},
                                         ctx.now()):
            await record(ctx, "bench.interrupted", service.name, service.node, text, request_id=run_id, who="inferbot")
        run = await store.bench_runs.get(run_id)
        if run is None or run.state == "running":  # pragma: no cover - just ended above
            return None
    return _from_run(run)


def ready_run_id(f: Follow) -> str:
    """The benchmark id of the load ``f`` follows (one per load)."""
    load = f.invocation_id or f"start:{f.started_at.astimezone(UTC).isoformat()}"
    return f"ready:{f.key}:{load}"


async def after_ready(ctx: Context, service: Service, f: Follow, places: list[Where], notifier: Notifier,
                      now: datetime) -> bool:
    """After the ✅ of ``f``'s load: run the acceptance benchmark (once) and post it in ``places``.

    True when there is nothing (more) to do; False to be called again (it runs elsewhere, or a post failed).
    """
    if not service.acceptance.bench or not service.bench_dir:
        return True
    store = require_store(ctx)
    if places and all([await store.notices.sent(f.key, f"bench:{where.place}") for where in places]):
        return True
    reply = await run_bench(ctx, service, ready_run_id(f))
    if reply is None:
        return False
    return all_done(await deliver_all(ctx, notifier, [
        Notice(f.key, Where(f"bench:{where.place}", where.channel, where.thread_ts), reply, service.name, service.node)
        for where in places], now))
