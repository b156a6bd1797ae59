"""The unplanned-restart watcher: one cheap probe per node every ``[watch] interval``.

A new main PID, a fresh failure or a higher ``NRestarts`` that inferbot did not cause starts a follow of
type ``unplanned`` (``handlers/follow.py`` then posts ⚠️ and follows the load). The same probe feeds the
charts' metric samples and the health watcher (``after``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from config.models import Service
from handlers.audit import record
from handlers.context import Context, require_store
from handlers.follow import BEFORE, follow_key, lock_name, start_follow
from handlers.notice_pipeline import Notice, deliver_all, to_notify
from handlers.notice_words import AUTO_RESTART, failed_notice
from handlers.notify import Notifier, dashboards_changed
from handlers.samples import record_samples
from handlers.silence import silence_of, silence_words
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.store.records import Follow

log = logging.getLogger("inferbot.watch")

# One /metrics scrape of each ready server rides along (same round trip, only the lines sampled): the
# samples behind charts. It runs every interval on every node, so it asks only what the watcher reads:
# the unit's state from systemd, /health and that scrape (one curl), not what settings are made of.
# Persistent: the leader asks it on one long-lived session per node (services/node/ssh.py NodePool.ask), so
# a poll is a newline and its answer, not a channel opened and closed with the whole script sent again.
WATCH_PROBE = ProbeOptions(gpus=False, journal_lines=0, metrics_samples=1, metrics_filter=True,
                           http_timeout_s=2.0, settings=False, api_info=False, persistent=True)


WatchHook = Callable[[Context, list[ServiceState], Notifier], Awaitable[None]]


async def watch_node(ctx: Context, node_name: str, notifier: Notifier, after: WatchHook | None = None) -> list[str]:
    """One cheap probe of every service on ``node_name``; start a follow for each unplanned restart.

    Returns the follow keys it started. The first observation of a unit only records a baseline. ``after`` (the
    health watcher) sees the same probe's states, each with its ``/metrics`` parsed (``ServiceState.metrics``).
    """
    store = require_store(ctx)
    node = ctx.config.node(node_name)
    services = ctx.config.services_on(node_name)
    if not services:
        return []
    report, states, _raw = await ctx.cluster.probe_node(node, services, WATCH_PROBE, keep_raw=False)
    if not report.ok:
        return []
    started: list[str] = []
    now = ctx.now()
    try:
        await record_samples(store.samples, states, now)
    except Exception:  # charts lose a sample; the watcher must carry on
        log.warning("storing metric samples of %s failed", node_name, exc_info=True)
    by_name = {s.name: s for s in services}
    for st in states:
        service = by_name.get(st.service)
        if service is not None and st.state != "unreachable":
            key = await _judge(ctx, service, st, notifier, now)
            if key is not None:
                started.append(key)
    if after is not None:
        await after(ctx, states, notifier)
    return started


async def _judge(ctx: Context, service: Service, st: ServiceState, notifier: Notifier, now: datetime) -> str | None:
    """One service's look against its baseline: the follow key of the unplanned restart it started, if any."""
    store = require_store(ctx)
    active_state = st.active.split(" ")[0] if st.active else ""
    base = await store.watches.get(st.service, st.node)
    await store.watches.put(st.service, st.node, st.main_pid, st.since, st.restarts, active_state)
    if base is None:
        return None
    if (base.active_state, base.main_pid) != (active_state, st.main_pid):
        await dashboards_changed(ctx, follow_key(st.service, st.node))  # a state change for the Home tabs
    new_pid = st.main_pid != 0 and st.main_pid != base.main_pid
    failed_now = active_state == "failed" and base.active_state != "failed"
    more_restarts = st.restarts > base.n_restarts
    crash = crashed(st, base.active_state)
    if not (new_pid or failed_now or more_restarts or crash):
        return None
    key = follow_key(st.service, st.node)
    current = await store.follows.get(key)
    if current is not None and current.active:
        return None  # a load being followed already (ours, or one noticed earlier)
    if await store.locks.holder(lock_name(st.service, st.node), now) is not None:
        return None  # inferbot is restarting it right now
    if current is not None and st.invocation_id and current.invocation_id == st.invocation_id and not crash:
        # The load inferbot already followed (a restart by the bot, seen by the watcher only once it was
        # over) is not news; when it has failed since, say so once.
        if st.state == "failed":
            await _post_late_failure(ctx, current, st, notifier, now)
        return None
    at = st.since if st.since is not None and now - st.since < timedelta(hours=1) else now
    if crash:
        # Its main process died and systemd starts it again after RestartSec=: said now, and the follow
        # waits for the new start (its old run is not the load).
        invocation = BEFORE + st.invocation_id if st.invocation_id else None
    else:
        invocation = st.invocation_id or None
    silenced = await silence_of(ctx, st.service, st.node)
    await record(ctx, "restart.unplanned", st.service, st.node,
                 f"MainPID {base.main_pid} → {st.main_pid}, NRestarts {base.n_restarts} → {st.restarts}, "
                 f"{active_state}" + (f" ({silence_words(silenced)})" if silenced else ""),
                 who="unknown", where=st.node)
    await start_follow(ctx, service, "unplanned", at, invocation_id=invocation)
    return key


def crashed(st: ServiceState, before: str) -> bool:
    """The main process exited and systemd will start the unit again (``activating (auto-restart)``), seen for
    the first time (the look before saw it in another state)."""
    return st.active == AUTO_RESTART and before != "activating"


async def _post_late_failure(ctx: Context, f: Follow, st: ServiceState, notifier: Notifier, now: datetime) -> None:
    reply = failed_notice(f, (st.reason or "the unit failed") + " (after it was ready; not by inferbot)", None)
    where = to_notify(ctx, f"failed-after-ready:{st.main_pid}:{st.restarts}")
    await deliver_all(ctx, notifier, [Notice(f.key, w, reply, f.service, f.node) for w in where], now)
