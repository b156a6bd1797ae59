"""Status: state, uptime, load phase with a progress bar and ETA; requests and KV cache once ready."""

from __future__ import annotations

import logging

from handlers.common import (
    PHASE_WORDS,
    STATE_STATUS,
    ago,
    fmt_duration,
    remaining,
    state_line,
    warnings_section,
)
from handlers.context import Context, Request
from handlers.live import cards_reply, service_cards
from handlers.reply import Reply, Section
from handlers.silence import silence_sections, silences_now
from services.models import ServiceState
from services.node.probe import ProbeOptions

log = logging.getLogger("inferbot.status")
# Two /metrics samples one second apart: enough to see tokens flowing (or a hung engine).
STATUS_PROBE = ProbeOptions(metrics_samples=2, metrics_interval_s=1.0, metrics_read=True)
BAR_WIDTH = 20


def progress_bar(fraction: float) -> str:
    """``[█████████░░░░░░░░░░░] 45 %``."""
    f = min(1.0, max(0.0, fraction))
    filled = round(f * BAR_WIDTH)
    return f"[{'█' * filled}{'░' * (BAR_WIDTH - filled)}] {round(f * 100)} %"


def status_sections(st: ServiceState, ctx: Context) -> list[Section]:
    """The status card of one service."""
    now = ctx.now()
    out = [Section(kind="header", title=f"{st.service} on {st.node}", status=STATE_STATUS[st.state]),
           Section(kind="text", text=state_line(st, now))]
    fields: list[tuple[str, str]] = []
    if st.state in ("loading", "starting"):
        if st.phase:
            fields.append(("phase", PHASE_WORDS.get(st.phase, st.phase)))
        if st.progress:
            done, total = int(st.progress["done"]), int(st.progress["total"])
            fields.append(("weights", f"{progress_bar(float(st.progress['fraction']))}  {done}/{total} shards"))
        if st.since is not None:
            fields.append(("elapsed", fmt_duration((now - st.since).total_seconds())))
        if st.eta_seconds is not None:
            basis = {"shard_rate": "from the shard rate — weights only, later phases not counted",
                     "history": "from previous loads of this service"}
            fields.append(("ETA", f"{remaining(st.eta_seconds)} ({basis.get(st.eta_basis or '', 'estimate')})"))
        else:
            fields.append(("ETA", "unknown yet (no shard progress and no previous load on record)"))
    elif st.state in ("ready", "unhealthy"):
        if st.since is not None:
            fields.append(("uptime", fmt_duration((now - st.since).total_seconds())))
        t = st.throughput
        if t is not None:
            if t.running is not None:
                fields.append(("requests", f"{t.running} running, {t.waiting or 0} waiting"))
            if t.kv_cache_usage is not None:
                fields.append(("KV cache", f"{t.kv_cache_usage * 100:.1f} % used"))
            if t.generation_tps is not None:
                fields.append(("generation", f"{t.generation_tps:,.1f} tok/s"))
        used = sum(g.memory_used_mib or 0 for g in st.gpus)
        total_mem = sum(g.memory_total_mib or 0 for g in st.gpus)
        if total_mem:
            fields.append(("GPU memory", f"{used / 1024:,.1f} / {total_mem / 1024:,.1f} GiB on {len(st.gpus)} GPUs"))
    elif st.since is not None:
        fields.append(("since", f"{st.since:%Y-%m-%d %H:%M} UTC ({ago(st.since, now)})"))
    if st.restarts:
        fields.append(("automatic restarts", str(st.restarts)))
    if fields:
        out.append(Section(kind="fields", fields=fields))
    w = warnings_section(st)
    if w:
        out.append(w)
    return out


async def handle(ctx: Context, req: Request) -> Reply:
    """Status of the targets."""
    cards = await service_cards(ctx, req, STATUS_PROBE, status_sections, record=True)
    ready = sum(1 for s in cards.services if s.state == "ready")
    title = f"Status — {ready}/{len(cards.services)} ready" if cards.services else "Status"
    reply = cards_reply("status", title, cards)
    # Silences in force (issue 14): whose notices are held back, until when, why.
    keys = [(s.name, s.node) for s in req.services]
    try:
        shown = [x for x in await silences_now(ctx) if (x.service, x.node) in keys]
    except Exception:  # the store only adds the silences: never lose the status to it
        log.debug("state store unavailable; status without silences", exc_info=True)  # said once already
        shown = []
    reply.sections += silence_sections(shown)
    reply.data["silences"] = [x.model_dump(mode="json") for x in shown]
    return reply
