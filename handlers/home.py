"""The App Home dashboard: every service at a glance, trouble first, as a typed model (no Slack here).

``read_dashboard`` probes every configured service once (one round trip per node, all nodes at once)
and returns a :class:`Dashboard`; ``for_user`` marks the services that person may restart (the same
``[access]`` policy as ``restart kimi``). ``restart_from_home`` turns a Home **Restart** click into exactly
the request ``restart kimi`` makes (``handlers.restart.handle``): same checks, same audit, same
confirmation. ``bot/slack/home_view.py`` draws it; ``bot/slack/home.py`` publishes it.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from config.models import Service
from handlers import restart
from handlers.common import PHASE_WORDS, remaining, state_line
from handlers.context import Asker, Context, Request
from handlers.down_nodes import names_words
from handlers.live import apply_history, record_snapshots
from handlers.notify import groups_of
from handlers.reply import Reply
from handlers.silence import silences_now
from services.access import check_restart_access
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.parse import bench as bench_fmt

log = logging.getLogger("inferbot.home")

# Two /metrics samples a second apart (live tok/s), the benchmark files, GPUs (leftover processes).
HOME_PROBE = ProbeOptions(metrics_samples=2, metrics_interval_s=1.0, bench=True)
TROUBLE_ORDER = {"unreachable": 0, "failed": 0, "unhealthy": 1, "loading": 2, "starting": 2, "ready": 3,
                 "stopped": 4}
"""Trouble first: failed (and unreachable), unhealthy, loading, ready, stopped."""
RESTART_EVENTS = frozenset({"restart.executed", "restart.unplanned"})


class LastRestart(BaseModel):
    """The newest restart of a service in the audit log."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    by: str | None  # a Slack user id, "unknown" (not by inferbot), "terminal"
    planned: bool


class ServiceCard(BaseModel):
    """One service on the dashboard: what a person wants first, already in words where words are needed."""

    model_config = ConfigDict(extra="forbid")

    service: str
    node: str
    state: str
    state_words: str  # "active, loading — started 13 min ago (loading weights), ~17 min remaining"
    model: str | None = None
    reason: str | None = None
    phase: str | None = None  # words: "loading weights"
    progress: float | None = None  # fraction 0..1
    shards: tuple[int, int] | None = None  # (done, total)
    elapsed_s: float | None = None
    eta: str | None = None  # "~17 min remaining (from previous loads)"
    generation_tps: float | None = None
    prompt_tps: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None  # fraction 0..1
    benchmark: str | None = None  # single-stream and peak in one line
    warnings: list[str] = Field(default_factory=list)
    last_restart: LastRestart | None = None
    may_restart: bool = False  # for the person this dashboard is for
    silenced_until: datetime | None = None  # `silence kimi 2h`: its notices are held back until then
    silenced_by: str | None = None
    silence_reason: str | None = None

    @property
    def key(self) -> str:
        """``kimi@gpu-a``: the value of the Restart button."""
        return f"{self.service}@{self.node}"


class NodeProblem(BaseModel):
    """A node that did not answer, and why; the services on it are listed here, not as cards of their own."""

    model_config = ConfigDict(extra="forbid")

    node: str
    reason: str
    fix: str = ""
    services: list[str] = Field(default_factory=list)

    @property
    def services_words(self) -> str:
        """``kimi, qwen, llama, and 997 more`` (empty when no configured service is on it)."""
        return names_words(self.services)


class Dashboard(BaseModel):
    """The whole Home tab for one moment (and, after ``for_user``, one person)."""

    model_config = ConfigDict(extra="forbid")

    read_at: datetime
    services: list[ServiceCard] = Field(default_factory=list)
    unreachable: list[NodeProblem] = Field(default_factory=list)
    elapsed_s: float = 0.0
    user_id: str | None = None

    @property
    def service_count(self) -> int:
        """Every service on the dashboard: those with a card and those on nodes that did not answer."""
        return len(self.services) + sum(len(p.services) for p in self.unreachable)


def _card(st: ServiceState, now: datetime) -> ServiceCard:
    card = ServiceCard(service=st.service, node=st.node, state=st.state, state_words=state_line(st, now),
                       model=st.model, reason=st.reason, warnings=list(st.warnings))
    if st.state in ("loading", "starting"):
        card.phase = PHASE_WORDS.get(st.phase, st.phase) if st.phase else None
        if st.progress:
            card.progress = min(1.0, max(0.0, float(st.progress["fraction"])))
            card.shards = (int(st.progress["done"]), int(st.progress["total"]))
        if st.since is not None:
            card.elapsed_s = max(0.0, (now - st.since).total_seconds())
        if st.eta_seconds is not None:
            basis = {"shard_rate": "from the shard rate", "history": "from previous loads"}.get(st.eta_basis or "")
            card.eta = remaining(st.eta_seconds) + (f" ({basis})" if basis else "")
    t = st.throughput
    if st.state in ("ready", "unhealthy") and t is not None:
        card.generation_tps, card.prompt_tps = t.generation_tps, t.prompt_tps
        card.running, card.waiting, card.kv_cache_usage = t.running, t.waiting, t.kv_cache_usage
    if st.bench is not None:
        card.benchmark = bench_fmt.format_bench(st.bench) or None
    return card


def order_key(card: ServiceCard) -> tuple[int, str, str]:
    """Trouble first, then by name and node."""
    return TROUBLE_ORDER.get(card.state, 0), card.service, card.node


async def read_dashboard(ctx: Context) -> Dashboard:
    """Probe every configured service once and build the dashboard (no per-person parts yet)."""
    services = list(ctx.config.services)
    nodes = [ctx.config.node(n) for n in sorted({s.node for s in services})]
    snap = await ctx.cluster.snapshot(services, nodes, HOME_PROBE)
    now = ctx.now()
    restarts: dict[tuple[str, str], LastRestart] = {}
    try:
        await apply_history(ctx, snap.services)
        await record_snapshots(ctx, snap.services)  # also adds the "settings drifted" warning
        if ctx.store is not None:
            for key, e in (await ctx.store.audit.newest_by_target(RESTART_EVENTS)).items():
                restarts[key] = LastRestart(at=e.at, by=e.who, planned=e.event == "restart.executed")
    except Exception:
        # The store only adds history (ETA, drift, last restart): never lose the dashboard to it.
        log.warning("state store unavailable; dashboard without history", exc_info=True)
    # A node that did not answer is one line with its reason (and its services named), not one "unreachable"
    # card per service repeating it: they would fill Slack's 100 blocks ahead of every service that answered.
    # A node the bot was too busy to ask is not down: its services keep their cards, which say the bot was busy.
    on_down: dict[str, list[str]] = {n.node: [] for n in snap.nodes
                                     if not n.ok and (n.error is None or n.error.kind != "busy")}
    for st in snap.services:
        if st.node in on_down:
            on_down[st.node].append(st.service)
    cards = [_card(st, now) for st in snap.services if st.node not in on_down]
    try:
        silenced = {(s.service, s.node): s for s in await silences_now(ctx)}
    except Exception:
        log.warning("state store unavailable; dashboard without silences", exc_info=True)
        silenced = {}
    for c in cards:
        c.last_restart = restarts.get((c.service, c.node))
        s = silenced.get((c.service, c.node))
        if s is not None:
            c.silenced_until, c.silenced_by, c.silence_reason = s.until, s.by, s.reason or None
    cards.sort(key=order_key)
    problems = [NodeProblem(node=n.node, reason=n.error.reason if n.error else "no answer",
                            fix=n.error.fix if n.error else "", services=names)
                for n in snap.nodes if (names := on_down.get(n.node)) is not None]
    return Dashboard(read_at=now, services=cards, unreachable=problems, elapsed_s=snap.elapsed_s)


def restart_asker(ctx: Context, service: Service, user_id: str, dm_channel: str | None) -> Asker:
    """Who clicks Restart on the Home tab, asking from where the confirmation will be posted."""
    return Asker(surface="slack", user_id=user_id, channel_id=restart_channel(ctx, service) or dm_channel)


def restart_channel(ctx: Context, service: Service) -> str | None:
    """Where a Home restart's confirmation goes: the first of ``restart_channels``, else None (a DM)."""
    channels = ctx.config.access_for(service).restart_channels
    return channels[0] if channels else None


async def for_user(ctx: Context, dash: Dashboard, user_id: str) -> Dashboard:
    """The dashboard as ``user_id`` sees it: a Restart button only where the access policy allows it."""
    cards: list[ServiceCard] = []
    for c in dash.services:
        service = ctx.config.service(c.service, c.node)
        allowed = False
        if service is not None:
            asker = restart_asker(ctx, service, user_id, None)
            decision = await check_restart_access(ctx.config.access_for(service), asker, groups_of(ctx),
                                                  service.name)
            allowed = decision.allowed
        cards.append(c.model_copy(update={"may_restart": allowed}))
    return dash.model_copy(update={"services": cards, "user_id": user_id})


def parse_key(ctx: Context, value: str) -> Service | None:
    """The configured service a Restart button's value (``kimi@gpu-a``) names, if any."""
    name, _, node = value.partition("@")
    return ctx.config.service(name, node) if name and node else None


async def restart_from_home(ctx: Context, value: str) -> Reply:
    """A Home **Restart** click: the very request ``restart kimi`` makes (checks, audit, confirmation).

    ``ctx.asker`` must be :func:`restart_asker`'s (the channel the confirmation will be posted in).
    Nothing runs here: the reply is a confirmation with two buttons, or a refusal saying why.
    """
    service = parse_key(ctx, value)
    if service is None:
        text = f"refused: {value or 'that service'} is no longer in the config — open the Home tab again"
        return Reply(intent="restart", ok=False, title="Restart refused", status="error",
                     data={"refused": True, "reason": text}, error=text)
    req = Request(intent="restart", services=[service], nodes=[ctx.config.node(service.node)],
                  explicit_target=True)
    return await restart.handle(ctx, req)
