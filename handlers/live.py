"""Glue between a snapshot and the store: ETA from load history, snapshots for "what changed?"."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from handlers.context import Context, Request
from handlers.down_nodes import node_down_sections
from handlers.reply import Reply, Section, Status
from services.cluster import COLLECT_FROM_NODES, NodeReport, Snapshot
from services.models import ServiceState, State
from services.node.probe import ProbeOptions
from services.parse.vllm_args import format_flag_value

log = logging.getLogger("inferbot.live")
UNSET = "(unset)"
Card = Callable[[ServiceState, Context], list[Section]]


async def apply_history(ctx: Context, states: list[ServiceState]) -> None:
    """Refine each loading service's ETA with this service's previous load durations, if known."""
    if ctx.store is None:
        return
    now = ctx.now()
    loading = [st for st in states if st.state in ("loading", "starting") and st.since is not None]
    if not loading:
        return
    histories = await ctx.store.loads.durations_many([(st.service, st.node) for st in loading])
    for st, history in zip(loading, histories, strict=True):
        if not history or st.since is None:
            continue
        typical = sorted(history)[len(history) // 2]
        elapsed = (now - st.since).total_seconds()
        from_history = max(0.0, typical - elapsed)
        # History covers the whole load (weights, KV cache, graphs); the shard rate only the weights,
        # so it wins only when this load is running slower than the previous ones.
        if st.eta_basis == "shard_rate" and st.eta_seconds is not None and st.eta_seconds > from_history:
            continue
        st.eta_seconds, st.eta_basis = from_history, "history"


async def record_snapshots(ctx: Context, states: list[ServiceState]) -> None:
    """Remember what each service runs with, for "what changed?" (only what was really read).

    Also warns when a service now runs with settings that differ from the last ones seen ready —
    the profiling flag left behind after an experiment.
    """
    if ctx.store is None:
        return
    from services.settings_diff import diff_snapshots

    seen = [st for st in states if st.settings_source != "none" and st.state != "unreachable"]
    if not seen:
        return
    for st, (current, ready) in zip(seen, await ctx.store.snapshots.record_many(seen, ctx.now()), strict=True):
        if ready is None or ready.id == current:
            continue
        diff = diff_snapshots(ready, st)  # the record holds what the current snapshot was made of
        if diff:
            shown = ", ".join(
                f"{d.key}: {format_flag_value(d.old, UNSET)} → {format_flag_value(d.new, UNSET)}" for d in diff[:8]
            )
            more = f" and {len(diff) - 8} more" if len(diff) > 8 else ""
            st.warnings.append(
                f"settings differ from the last ones seen ready ({ready.last_seen_at:%Y-%m-%d %H:%M} UTC): "
                f"{shown}{more}"
            )


@dataclass(frozen=True, slots=True)
class ServiceBrief:
    """What an answer still reads of a service once its card and its ``data`` object are built."""

    service: str
    node: str
    state: State


@dataclass
class Cards:
    """The service cards of one answer, built one service at a time (:func:`service_cards`).

    Each ``ServiceState`` is dropped as soon as its card and its ``data`` object exist, so an answer about
    hundreds of services never holds every record, every card and every data object at once (at 512 nodes
    the records alone are ~9 MB). ``services`` keeps what handlers still read (titles, counts); a card
    function reads anything else it needs while it has the record.
    """

    nodes: list[NodeReport]
    services: list[ServiceBrief]
    sections: list[Section]
    statuses: list[Status]
    # Each service's ``model_dump(mode="json")``: the reply's data. None for Slack, which shows the cards and
    # never the data: at 512 services the dumps were ~4 MB of the answer's peak.
    services_data: list[dict[str, object]] | None


def answered(snap: Snapshot | Cards) -> bool:
    """The reply's ``ok``: at least one targeted node answered (so something asked for was answered).

    False when there was nothing to ask or every targeted node was unreachable; a partial failure
    stays ``ok`` and is listed in ``data["unreachable"]``.
    """
    return any(n.ok for n in snap.nodes) or any(s.state != "unreachable" for s in snap.services)


def snapshot_data(snap: Snapshot) -> dict[str, Any]:
    """The ``data`` of a reply: one object per service, plus per-node reachability (and each node's services)
    and the unreachable ones."""
    return _data([s.model_dump(mode="json") for s in snap.services], snap.nodes,
                 ((s.service, s.node) for s in snap.services))


def _data(services: list[dict[str, Any]] | list[dict[str, object]] | None, nodes: list[NodeReport],
          pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    on_node: dict[str, list[str]] = {n.node: [] for n in nodes}
    for service, node in pairs:
        on_node.setdefault(node, []).append(service)
    return {
        **({"services": services} if services is not None else {}),
        "nodes": [
            {"node": n.node, "ok": n.ok, "error": n.error.model_dump() if n.error else None,
             "elapsed_s": round(n.elapsed_s, 3), "services": on_node[n.node]}
            for n in nodes
        ],
        "unreachable": [n.node for n in nodes if not n.ok and not _busy(n)],
        "busy": [n.node for n in nodes if _busy(n)],  # not asked: the bot had too many questions waiting for it
    }


def _busy(n: NodeReport) -> bool:
    return n.error is not None and n.error.kind == "busy"


async def service_cards(ctx: Context, req: Request, probe: ProbeOptions, card: Card, record: bool = False) -> Cards:
    """Probe the targets and build one card per service, plus cards for nodes that failed.

    The records are turned into cards as the nodes answer, a batch at a time (:meth:`Cluster.answers`):
    each batch gets its load history and its snapshots recorded (one trip to the store per batch), then each
    service's card, ``data`` object and status are made in one pass and its ``ServiceState`` is let go (see
    :class:`Cards`). The cards come out in the order of the targets, not of the answers.
    """
    from handlers.common import STATE_STATUS

    per_node: list[list[tuple[list[Section], dict[str, object] | None, Status, ServiceBrief]]] = [
        [] for _ in req.nodes]
    reports: list[NodeReport | None] = [None] * len(req.nodes)
    dump = ctx.asker.surface != "slack"
    store_failed = False
    # Cards show services: the nodes' own GPU lists are left out.
    async for batch in ctx.cluster.answers(req.services, req.nodes, probe, node_gpus=False):
        states = [st for _, _, sts in batch for st in sts]
        if not store_failed:
            try:
                await apply_history(ctx, states)
                if record:
                    await record_snapshots(ctx, states)
            except Exception as e:
                # The store only refines the answer (ETA from history, "what changed?"): never lose the answer to
                # it. One line per answer, not a traceback on every question (issue 10); the traceback at DEBUG.
                store_failed = True
                log.warning("state store unavailable (%s: %s); answering without history", type(e).__name__, e)
                log.debug("state store failure", exc_info=True)
        del states
        for i, report, sts in batch:
            reports[i] = report
            built = per_node[i]
            # A node that did not answer gets one card, its reason said once (handlers.down_nodes), not a card
            # per service repeating it; each service still has its data object.
            down = [] if report.ok else node_down_sections(report, [st.service for st in sts])
            while sts and not report.ok:
                st = sts.pop(0)
                built.append((down, st.model_dump(mode="json") if dump else None, STATE_STATUS[st.state],
                              ServiceBrief(service=st.service, node=st.node, state=st.state)))
                down = []
            while sts:
                st = sts.pop(0)
                built.append((card(st, ctx), st.model_dump(mode="json") if dump else None, STATE_STATUS[st.state],
                              ServiceBrief(service=st.service, node=st.node, state=st.state)))
                del st
        del batch
    if len(req.nodes) >= COLLECT_FROM_NODES:
        # What asyncssh's finished commands left in reference cycles and the batches' collections (Cluster.answers)
        # found still in use has reached the old generation by now: one full collection (the frozen start-up heap
        # excluded; ~40 ms at 512 nodes, 0.08 ms a node) frees it before the answer is rendered on top: the
        # bot's peak RSS at 512 nodes 120.4 -> 118.9 MB.
        gc.collect()
    nodes = [r for r in reports if r is not None]
    cards = Cards(nodes=nodes, services=[], sections=[], statuses=[], services_data=[] if dump else None)
    for built in per_node:
        for sections, data, status, brief in built:
            cards.sections += sections
            if cards.services_data is not None and data is not None:
                cards.services_data.append(data)
            cards.statuses.append(status)
            cards.services.append(brief)
    per_node.clear()
    snap = Snapshot(elapsed_s=0.0, nodes=nodes)
    cards.sections += node_error_sections(snap, {b.node for b in cards.services})
    cards.statuses += ["error" for n in nodes if not n.ok]
    return cards


def cards_reply(intent: str, title: str, cards: Cards) -> Reply:
    """The reply for a list of service cards."""
    from handlers.common import worst

    ok = answered(cards)
    return Reply(intent=intent, ok=ok, title=title, status=worst(cards.statuses), sections=cards.sections,
                 data=_data(cards.services_data, cards.nodes, ((b.service, b.node) for b in cards.services)),
                 error=None if ok else failure(cards))


def failure(snap: Snapshot | Cards) -> str:
    """The ``error`` of a reply that answered nothing."""
    if not snap.nodes and not snap.services:
        return "no services or nodes are configured"
    if all(_busy(n) for n in snap.nodes if not n.ok):
        return "inferbot is busy: no targeted node could be asked yet (" + ", ".join(
            n.node for n in snap.nodes if not n.ok) + "); try again in a moment"
    return "every targeted node is unreachable: " + ", ".join(n.node for n in snap.nodes if not n.ok)


def node_error_sections(snap: Snapshot, reported: set[str]) -> list[Section]:
    """Nodes with no card of their own: down nodes none of whose services was shown (discovery nodes), and
    discovery nodes that answered with no vLLM unit."""
    out: list[Section] = []
    for n in snap.nodes:
        if not n.ok and n.node not in reported:
            out += node_down_sections(n, [])
        elif n.ok and n.discovered == [] and n.node not in reported:
            out += [Section(kind="header", title=f"node {n.node}", status="info"),
                    Section(kind="text", text="no vLLM units found on this node")]
    return out
