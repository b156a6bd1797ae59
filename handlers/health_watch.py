"""The deaths vLLM hides, noticed by the watcher: unhealthy, engine death with exit 0, hung.

Rides on the unplanned-restart watcher's probe (``handlers.watcher.watch_node``, every ``[watch] interval``):

- **unhealthy** — the server was ready in this start, its main process lives, but ``/health`` answers
  503, is refused or times out for ``[watch] unhealthy_polls`` looks in a row → one ⚠️ with the last
  journal lines (redacted), and one ✅ when it answers 200 again;
- **stopped unexpectedly** — the unit went from active to inactive (exit status 0) after an engine error
  (``EngineDeadError``, the engine core died) and nobody stopped it: ``Restart=on-failure`` never fires →
  one ❌ saying so;
- **possibly hung** — requests running or waiting and ``vllm:generation_tokens_total`` unchanged for
  ``[watch] hung_after`` → one ⚠️, and one ✅ when tokens flow again.

What it remembers between looks is in the store (``StateStore.health_memos``), and every notice goes out
through the notice pipeline (``handlers/notice_pipeline.py``) like the load notices, keyed by the start and
the episode: once per place, also across a bot restart. A silence holds back the ⚠️ (and the ✅ of a
held-back ⚠️), writing the audit line instead; the ❌ is never held back. A restart by the bot (its lock is
held) is never judged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from datetime import datetime

from config.models import Service
from handlers.audit import record
from handlers.common import fmt_duration
from handlers.context import Context
from handlers.follow import lock_name
from handlers.notice_pipeline import Notice, all_done, any_held, deliver_all, to_notify
from handlers.notify import Notifier, notice_text
from handlers.reply import Reply, Section, Status
from handlers.watcher import watch_node
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.parse.vllm_log import ENGINE_DEATH
from services.store.ports import StateStore
from services.store.records import HealthMemo

log = logging.getLogger("inferbot.health")

LOGS_PROBE = ProbeOptions(gpus=False, journal_lines=0, log_lines=20, http_timeout_s=2.0)
STOP_PROBE = ProbeOptions(gpus=False, journal_lines=0, log_lines=80, http_timeout_s=2.0)
SYSTEMD_STOPPING = re.compile(r"systemd\[\d+\]: Stopping ")
SYSTEMD_STARTED = re.compile(r"systemd\[\d+\]: (?:Started|Starting) ")


def health_key(service: str, node: str) -> str:
    """The notice key of service@node's health notices (the follow keys are ``service@node``)."""
    return f"health:{service}@{node}"


async def watch(ctx: Context, node_name: str, notifier: Notifier) -> list[str]:
    """The watcher's job: unplanned restarts (``watch_node``), then this module's checks on the same probe."""
    return await watch_node(ctx, node_name, notifier, after=check_states)


async def check_states(ctx: Context, states: list[ServiceState], notifier: Notifier) -> None:
    """Judge every service the watcher's probe saw (one failing service never stops the others)."""
    store = ctx.store
    if store is None:
        return
    for st in states:
        service = ctx.config.service(st.service, st.node)
        if service is None or st.state == "unreachable":
            continue
        try:
            await _check(ctx, store, service, st, notifier)
        except Exception:  # the watcher must carry on; the next look tries again
            log.warning("health check of %s@%s failed", st.service, st.node, exc_info=True)


async def _check(ctx: Context, store: StateStore, service: Service, st: ServiceState, notifier: Notifier) -> None:
    now = ctx.now()
    memo = await store.health_memos.get(service.name, service.node) or HealthMemo()
    active = st.active.split(" ")[0] if st.active else ""
    held: bool | None = None

    async def ours() -> bool:
        """A restart by the bot is under way (its lock is held): asked only when a judgement is possible."""
        nonlocal held
        if held is None:
            held = await store.locks.holder(lock_name(service.name, service.node), now) is not None
        return held

    if (memo.invocation and active == "inactive" and memo.active_state in ("active", "reloading", "deactivating")
            and memo.stop_checked != memo.invocation):
        memo.stop_checked = memo.invocation
        if not await ours():
            await _stopped(ctx, service, memo)
    if memo.stop_error:
        await _post_stopped(ctx, service, memo, notifier, now)
    if st.invocation_id and st.invocation_id != memo.invocation:
        # A new start: what was open belonged to the old one (its load notices say the rest).
        memo = HealthMemo(invocation=st.invocation_id, stop_checked=memo.stop_checked,
                          stop_error=memo.stop_error, stop_place=memo.stop_place)
    memo.main_pid, memo.active_state = st.main_pid, active
    if not memo.ready_seen and _bad_now(st, active) and await _ready_on_record(store, service, st):
        memo.ready_seen = True  # the follow saw this start ready between two of the watcher's looks
    sample = _sample(st) if st.state == "ready" else (None, 0, 0)
    # A healthy look only moves counters: the lock is read (one database trip) only when this look could
    # post, record or silence something, which a restart by the bot must never cause.
    if not _may_judge(st, memo, active, sample) or not await ours():
        await _health(ctx, store, service, st, memo, active, notifier, now)
        await _hung(ctx, store, service, st, sample, memo, notifier, now)
    await store.health_memos.put(service.name, service.node, memo, now)


def _may_judge(st: ServiceState, memo: HealthMemo, active: str, sample: tuple[float | None, int, int]) -> bool:
    """Whether ``_health`` or ``_hung`` could post, record or silence anything on this look."""
    if st.state != "ready":
        return _failing(st, memo, active)  # otherwise _health only resets the count and _hung does nothing
    if memo.unhealthy_since is not None:
        return True  # the ✅ of an open unhealthy episode
    gen, running, waiting = sample
    if gen is None:
        return False
    if memo.gen_total is None or gen != memo.gen_total:
        return memo.hung_since is not None  # tokens flow: only an open "possibly hung" episode ends
    return running + waiting > 0  # no new tokens while requests wait: the quiet may reach hung_after


# ------------------------------------------------------------------------------------------------
# Words


def _notice(kind: str, status: Status, emoji: str, body: str, service: Service, sections: list[Section]) -> Reply:
    return Reply(intent="notice", title=body, status=status, sections=sections,
                 data={"notice": f"{emoji} {body}", "kind": kind, "service": service.name, "node": service.node})


def _journal(st: ServiceState | None) -> list[Section]:
    if st is None or not st.logs:
        return []
    return [Section(kind="code", title="Last journal lines", text="\n".join(st.logs[-20:]))]


def unhealthy_notice(service: Service, reason: str, pid: int, logs: ServiceState | None) -> Reply:
    """``⚠️ kimi on gpu-a is unhealthy — /health answered 503 on …; the main process (PID 4242) is alive``."""
    body = f"{service.name} on {service.node} is unhealthy — {reason}; the main process (PID {pid}) is alive"
    tries = Section(kind="text", title="What to try",
                    text=f"`logs {service.name}` for the whole story; `status {service.name}`; "
                         f"`restart {service.name}` if it does not recover")
    return _notice("unhealthy", "warn", "⚠️", body, service, [*_journal(logs), tries])


def healthy_notice(service: Service, since: datetime, now: datetime) -> Reply:
    """``✅ kimi on gpu-a is healthy again — /health answers 200 (unhealthy for 3m 10s)``."""
    took = fmt_duration(max(0.0, (now - since).total_seconds()))
    body = f"{service.name} on {service.node} is healthy again — /health answers 200 (unhealthy for {took})"
    return _notice("healthy", "ok", "✅", body, service, [])


def hung_notice(service: Service, running: int, waiting: int, quiet_s: float) -> Reply:
    """``⚠️ kimi on gpu-a is possibly hung — 4 running, 2 waiting requests and no new tokens for 5m 0s``."""
    body = (f"{service.name} on {service.node} is possibly hung — {running} running, {waiting} waiting "
            f"request(s) and no new tokens for {fmt_duration(quiet_s)}")
    return _notice("hung", "warn", "⚠️", body, service, [Section(
        kind="context", text=f"/health may still answer 200: it only says the API process is up. "
                             f"`throughput {service.name}`, `logs {service.name}`; `restart {service.name}` "
                             "if no tokens come")])


def flowing_notice(service: Service, since: datetime, now: datetime) -> Reply:
    """``✅ kimi on gpu-a is generating again — tokens flow (hung for 6m 30s)``."""
    took = fmt_duration(max(0.0, (now - since).total_seconds()))
    body = f"{service.name} on {service.node} is generating again — tokens flow (no new tokens for {took})"
    return _notice("unhung", "ok", "✅", body, service, [])


def stopped_notice(service: Service, error: str, logs: ServiceState | None) -> Reply:
    """``❌ kimi on gpu-a stopped unexpectedly (exit 0 after EngineDeadError) — systemd will not restart it …``."""
    body = (f"{service.name} on {service.node} stopped unexpectedly (exit 0 after {error}) — systemd will not "
            "restart it with Restart=on-failure; consider Restart=always")
    tries = Section(kind="text", title="What to try",
                    text=f"`logs {service.name}` for the engine's error; `restart {service.name}` to start it "
                         f"again; in the unit: `Restart=always` (a clean exit is not a failure to systemd)")
    return _notice("stopped_unexpectedly", "error", "❌", body, service, [*_journal(logs), tries])


# ------------------------------------------------------------------------------------------------
# The checks


def _notices(ctx: Context, service: Service, place: str, reply: Reply, closes_held: bool = False,
             details: Callable[[], Awaitable[Reply]] | None = None) -> list[Notice]:
    """The notice for the notify channel (none when there is no ``[notify] channel``), keyed by the service."""
    return [Notice(health_key(service.name, service.node), where, reply, service.name, service.node,
                   closes_held=closes_held, details=details) for where in to_notify(ctx, place)]


async def _opened(ctx: Context, notifier: Notifier, service: Service, place: str, reply: Reply, held: bool,
                  event: str | None, now: datetime, details: Callable[[], Awaitable[Reply]] | None = None) -> bool:
    """The ⚠️ of an open episode, once (``event``: it opened on this look, audit it); True while a silence holds it."""
    if not held:
        held = any_held(await deliver_all(ctx, notifier, _notices(ctx, service, place, reply, details=details), now))
    if event is not None:
        await record(ctx, event, service.name, service.node, notice_text(reply), who="inferbot",
                     where=ctx.config.notify.channel or "inferbot")
    return held


async def _closed(ctx: Context, notifier: Notifier, service: Service, place: str, reply: Reply, held: bool,
                  event: str, now: datetime) -> bool:
    """The ✅ that ends an episode (held back when its ⚠️ was), then its audit line; True when it is done."""
    if not all_done(await deliver_all(ctx, notifier, _notices(ctx, service, place, reply, closes_held=held), now)):
        return False
    await record(ctx, event, service.name, service.node, notice_text(reply), who="inferbot",
                 where=ctx.config.notify.channel or "inferbot")
    return True


async def _logs(ctx: Context, service: Service, options: ProbeOptions) -> ServiceState | None:
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], options)
    st = snap.services[0] if snap.services else None
    return st if st is not None and st.state != "unreachable" else None


def _failing(st: ServiceState, memo: HealthMemo, active: str) -> bool:
    """Ready earlier in this start, main process alive, and /health not 200 now."""
    return memo.ready_seen and _bad_now(st, active)


def _bad_now(st: ServiceState, active: str) -> bool:
    """Main process alive and /health not 200 now (before its first ready, that is a load going on)."""
    if active != "active" or not st.main_pid:
        return False
    return st.state == "unhealthy" or (st.state == "loading" and bool(st.reason) and " on http" in (st.reason or ""))


async def _ready_on_record(store: StateStore, service: Service, st: ServiceState) -> bool:
    """The load of this very start was followed to ready (a watcher's look may have fallen between its ready
    moment and a failure right after it: ``[watch] interval`` is long, a server can fail within it)."""
    if not st.invocation_id:
        return False
    last = await store.loads.last(service.name, service.node)
    return last is not None and last.outcome == "ready" and last.invocation_id == st.invocation_id


async def _health(ctx: Context, store: StateStore, service: Service, st: ServiceState, memo: HealthMemo, active: str,
                  notifier: Notifier, now: datetime) -> None:
    if st.state == "ready":
        memo.ready_seen = True
        memo.bad_polls = 0
        since = memo.unhealthy_since
        if since is not None and await _closed(ctx, notifier, service, f"healthy:{memo.invocation}:{since.isoformat()}",
                                               healthy_notice(service, since, now), memo.unhealthy_silenced,
                                               "health.recovered", now):
            memo.unhealthy_since, memo.unhealthy_reason, memo.unhealthy_silenced = None, "", False
        return
    if not _failing(st, memo, active):
        memo.bad_polls = 0
        return
    memo.bad_polls += 1
    if memo.bad_polls < ctx.config.watch.unhealthy_polls and memo.unhealthy_since is None:
        return
    if memo.unhealthy_silenced and await store.silences.active_for(service.name, service.node, now) is None:
        memo.unhealthy_since, memo.unhealthy_silenced = None, False  # the silence ended, the trouble did not
    opened = memo.unhealthy_since is None
    if opened:
        memo.unhealthy_since, memo.unhealthy_reason = now, st.reason or "/health does not answer 200"
    reason, pid = memo.unhealthy_reason, st.main_pid
    reply = unhealthy_notice(service, reason, pid, None)

    async def with_logs() -> Reply:
        return unhealthy_notice(service, reason, pid, await _logs(ctx, service, LOGS_PROBE))

    memo.unhealthy_silenced = await _opened(ctx, notifier, service, _unhealthy_place(memo), reply,
                                            memo.unhealthy_silenced, "health.unhealthy" if opened else None, now,
                                            details=with_logs)


def _unhealthy_place(memo: HealthMemo) -> str:
    since = memo.unhealthy_since.isoformat() if memo.unhealthy_since else ""
    return f"unhealthy:{memo.invocation}:{since}"


def _hung_place(memo: HealthMemo) -> str:
    since = memo.hung_since.isoformat() if memo.hung_since else ""
    return f"hung:{memo.invocation}:{since}"


def _sample(st: ServiceState) -> tuple[float | None, int, int]:
    """(generation tokens so far, running, waiting) from the watcher's /metrics scrape."""
    s = st.metrics
    if s is None:
        return None, 0, 0
    return s.generation_tokens_total, int(s.running or 0), int(s.waiting or 0)


async def _hung(ctx: Context, store: StateStore, service: Service, st: ServiceState,
                sample: tuple[float | None, int, int], memo: HealthMemo, notifier: Notifier, now: datetime) -> None:
    if st.state != "ready":
        return
    gen, running, waiting = sample
    if gen is None:
        return
    moved = memo.gen_total is None or gen != memo.gen_total
    memo.gen_total = gen
    quiet_since = memo.gen_changed_at or memo.hung_since or now
    if moved or running + waiting == 0:
        memo.gen_changed_at = now  # tokens flowed, or nothing was asked: the clock starts again
    if moved and memo.hung_since is not None:
        since = min(quiet_since, memo.hung_since)
        if await _closed(ctx, notifier, service, f"unhung:{memo.invocation}:{since.isoformat()}",
                         flowing_notice(service, since, now), memo.hung_silenced, "health.unhung", now):
            memo.hung_since, memo.hung_silenced = None, False
        return
    if moved or running + waiting == 0:
        return
    changed = memo.gen_changed_at or now
    memo.gen_changed_at = changed
    quiet = (now - changed).total_seconds()
    if memo.hung_silenced and await store.silences.active_for(service.name, service.node, now) is None:
        memo.hung_since, memo.hung_silenced = None, False  # the silence ended, the hang did not: say it now
    opened = memo.hung_since is None
    if opened:
        if quiet < ctx.config.watch.hung_after:
            return
        memo.hung_since = now
    memo.hung_silenced = await _opened(ctx, notifier, service, _hung_place(memo),
                                       hung_notice(service, running, waiting, quiet), memo.hung_silenced,
                                       "health.hung" if opened else None, now)


async def _stopped(ctx: Context, service: Service, memo: HealthMemo) -> None:
    """The unit went inactive by itself: if its engine died first, a ❌ is due (exit 0 hides it from systemd)."""
    logs = await _logs(ctx, service, STOP_PROBE)
    lines = logs.logs if logs is not None and logs.logs else []
    start = max((i for i, line in enumerate(lines) if SYSTEMD_STARTED.search(line)), default=-1)
    run = lines[start + 1:]
    if not any(ENGINE_DEATH.search(line) for line in run):
        return  # a clean exit: not a death
    if any(SYSTEMD_STOPPING.search(line) for line in run):
        return  # someone stopped it (systemctl stop): the engine error came with that
    memo.stop_error = "EngineDeadError" if any("EngineDeadError" in line for line in run) else "the engine core died"
    memo.stop_place = f"stopped:{memo.invocation}"
    text = str(stopped_notice(service, memo.stop_error, None).data["notice"])
    await record(ctx, "health.stopped_unexpectedly", service.name, service.node, text, who="inferbot",
                 where=ctx.config.notify.channel or "inferbot")


async def _post_stopped(ctx: Context, service: Service, memo: HealthMemo, notifier: Notifier, now: datetime) -> None:
    """Post the due ❌ (once; retried on the next look when Slack did not take it)."""
    error = memo.stop_error

    async def with_logs() -> Reply:
        return stopped_notice(service, error, await _logs(ctx, service, STOP_PROBE))

    notices = _notices(ctx, service, memo.stop_place, stopped_notice(service, error, None), details=with_logs)
    if all_done(await deliver_all(ctx, notifier, notices, now)):
        memo.stop_error, memo.stop_place = "", ""
