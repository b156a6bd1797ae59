"""Ready means serving: the smoke completion a followed load must pass before its ✅ (issue 14).

``handlers.follow`` asks :func:`smoke_gate` once ``/health`` (and ``/v1/models``) say ready. The result is
recorded per load in the store before anything is posted, so a bot started again mid-notice rebuilds the
same ✅ (with the same "first token in …") or the same ❌, and never sends a second completion.
"""

from __future__ import annotations

from datetime import UTC

from config.models import Service
from handlers.context import Context
from handlers.reply import Reply
from services.cluster import held_api_key
from services.models import ServiceState
from services.node.assemble import expected_model
from services.node.smoke import run_smoke
from services.store.records import Follow, LoadOutcome, SmokeCheck


def _load_id(f: Follow) -> str:
    # The same load id handlers.follow records (an empty invocation id is "start:<started_at ISO>").
    return f.invocation_id or f"start:{f.started_at.astimezone(UTC).isoformat()}"


async def smoke_of(ctx: Context, f: Follow) -> SmokeCheck | None:
    """The smoke completion recorded for the follow's load, if any."""
    if ctx.store is None:
        return None
    return await ctx.store.smoke_checks.get(f.service, f.node, _load_id(f))


async def smoke_gate(ctx: Context, service: Service, f: Follow,
                     st: ServiceState) -> tuple[LoadOutcome, str] | None:
    """The outcome of a load that ``/health`` calls ready: ready, failed (the completion failed), or None
    to look again at the next poll (the node could not be reached to send it)."""
    if not service.readiness.smoke or ctx.store is None:
        return "ready", ""
    found = await smoke_of(ctx, f)
    if found is None:
        node = ctx.config.node(service.node)
        result = await run_smoke(ctx.cluster.pool, node, service, st.api_url, expected_model(st),
                                 held_api_key(service))
        if result.outcome == "unreachable":
            return None
        found = await ctx.store.smoke_checks.record(f.service, f.node, _load_id(f), result.outcome, result.ttft_s,
                                                    result.detail, ctx.now())
    if found.outcome == "failed":
        return "failed", found.detail
    return "ready", ""


async def smoke_failure(ctx: Context, f: Follow) -> str | None:
    """Why the load failed its smoke completion (None when it did not)."""
    found = await smoke_of(ctx, f)
    return found.detail if found is not None and found.outcome == "failed" else None


async def with_smoke(ctx: Context, f: Follow, notice: Reply) -> Reply:
    """The ✅ notice extended with the smoke completion: ``…, first token in 0.41 s`` or that it was skipped."""
    found = await smoke_of(ctx, f)
    if found is None:
        return notice
    if found.outcome == "ok":
        suffix = f", first token in {found.ttft_s:.2f} s" if found.ttft_s is not None else ", smoke completion ok"
    elif found.outcome == "skipped":
        suffix = f", smoke test skipped: {found.detail}"
    else:
        return notice
    title = notice.title + suffix
    smoke: dict[str, object] = {"outcome": found.outcome, "ttft_s": found.ttft_s, "detail": found.detail}
    data = {**notice.data, "notice": f"✅ {title}", "smoke": smoke}
    return notice.model_copy(update={"title": title, "data": data})
