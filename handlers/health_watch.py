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

What it remembers between looks is in the store (``StateStore.health_memos``), and every notice is posted
through the same claim → post → mark-sent as the load notices, keyed by the start and the episode: once
per place, also across a bot restart. A silence (``handlers.silence``) holds back the ⚠️ (and the ✅ of a
held-back ⚠️), writing the audit line instead; the ❌ is never held back. A restart by the bot (its lock is
held) is never judged.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime

from config.models import Service
from handlers.audit import record
from handlers.common import fmt_duration
from handlers.context import Context
from handlers.follow import lock_name
from handlers.notices import post_once
from handlers.notify import Notifier
from handlers.reply import Reply, Section, Status
from handlers.silence import suppress
from handlers.watcher import watch_node
from services.models import ServiceState
from services.node.probe import NodeRaw, ProbeOptions, UnitRaw
from services.parse.metrics import MetricsParseError, parse_metrics
from services.store.ports import StateStore
from services.store.records import HealthMemo

log = logging.getLogger("inferbot.health")

LOGS_PROBE = ProbeOptions(gpus=False, journal_lines=0, log_lines=20, http_timeout_s=2.0)
STOP_PROBE = ProbeOptions(gpus=False, journal_lines=0, log_lines=80, http_timeout_s=2.0)
ENGINE_DEATH = re.compile(
    r"EngineDeadError|EngineCore encountered (?:a fatal error|an issue)|Engine core proc \S+ died"
    r"|EngineCore[^\n]* died|engine core[^\n]* died",
    re.IGNORECASE,
)
SYSTEMD_STOPPING = re.compile(r"systemd\[\d+\]: Stopping ")
SYSTEMD_STARTED = re.compile(r"systemd\[\d+\]: (?:Started|Starting) ")


def health_key(service: str, node: str) -> str:
    """The notice key of service@node's health notices (the follow keys are ``service@node``)."""
    return f"health:{service}@{node}"


async def watch(ctx: Context, node_name: str, notifier: Notifier) -> list[str]:
    """The watcher's job: unplanned restarts (``watch_node``), then this module's checks on the same probe."""
    return await watch_node(ctx, node_name, notifier, after=check_states)


async def check_states(ctx: Context, states: list[ServiceState], raw: NodeRaw | None, notifier: Notifier) -> None:
    """Judge every service the watcher's probe saw (one failing service never stops the others)."""
    store = ctx.store
    if store is None:
        return
    by_unit = {u.unit: u for u in raw.units} if raw is not None else {}
    for st in states:
        service = ctx.config.service(st.service, st.node)
        if service is None or st.state == "unreachable":
            continue
        try:
            await _check(ctx, store, service, st, by_unit.get(st.unit), notifier)
        except Exception:  # the watcher must carry on; the next look tries again
            log.warning("health check of %s@%s failed", st.service, st.node, exc_info=True)


async def _check(ctx: Context, store: StateStore, service: Service, st: ServiceState, unit: UnitRaw | None,
                 notifier: Notifier) -> None:
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
        await _post_stopped(ctx, store, service, memo, notifier, now)
    if st.invocation_id and st.invocation_id != memo.invocation:
        # A new start: what was open belonged to the old one (its load notices say the rest).
        memo = HealthMemo(invocation=st.invocation_id, stop_checked=memo.stop_checked,
                          stop_error=memo.stop_error, stop_place=memo.stop_place)
    memo.main_pid, memo.active_state = st.main_pid, active
    sample = _sample(unit) if st.state == "ready" else (None, 0, 0)
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


async def _post(ctx: Context, store: StateStore, notifier: Notifier, key: str, place: str, reply: Reply,
                now: datetime) -> bool:
    """Post ``reply`` once to the notify channel; True when it is out (or there is nowhere to post)."""
    channel = ctx.config.notify.channel
    if not channel:
        return True
    return await post_once(store.notices, key, place, notifier, channel, None, reply, now) == "sent"


async def _logs(ctx: Context, service: Service, options: ProbeOptions) -> ServiceState | None:
    snap = await ctx.cluster.snapshot([service], [ctx.config.node(service.node)], options)
    st = snap.services[0] if snap.services else None
    return st if st is not None and st.state != "unreachable" else None


def _failing(st: ServiceState, memo: HealthMemo, active: str) -> bool:
    """Ready earlier in this start, main process alive, and /health not 200 now."""
    if not memo.ready_seen or active != "active" or not st.main_pid:
        return False
    return st.state == "unhealthy" or (st.state == "loading" and bool(st.reason) and " on http" in (st.reason or ""))


async def _health(ctx: Context, store: StateStore, service: Service, st: ServiceState, memo: HealthMemo, active: str,
                  notifier: Notifier, now: datetime) -> None:
    key = health_key(service.name, service.node)
    if st.state == "ready":
        memo.ready_seen = True
        memo.bad_polls = 0
        if memo.unhealthy_since is not None:
            since = memo.unhealthy_since
            place = f"healthy:{memo.invocation}:{since.isoformat()}"
            reply = healthy_notice(service, since, now)
            if memo.unhealthy_silenced:
                await suppress(ctx, store, key, place, service.name, service.node, str(reply.data["notice"]), now)
                done = True
            else:
                done = await _post(ctx, store, notifier, key, place, reply, now)
            if done:
                await record(ctx, "health.recovered", service.name, service.node, str(reply.data["notice"]),
                             who="inferbot", where=ctx.config.notify.channel or "inferbot")
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
    if memo.unhealthy_since is None:
        memo.unhealthy_since, memo.unhealthy_reason = now, st.reason or "/health does not answer 200"
        text = unhealthy_notice(service, memo.unhealthy_reason, st.main_pid, None).data["notice"]
        memo.unhealthy_silenced = await suppress(ctx, store, key, _unhealthy_place(memo), service.name,
                                                 service.node, str(text), now)
        await record(ctx, "health.unhealthy", service.name, service.node, str(text), who="inferbot",
                     where=ctx.config.notify.channel or "inferbot")
    if memo.unhealthy_silenced or await store.notices.sent(key, _unhealthy_place(memo)):
        return
    logs = await _logs(ctx, service, LOGS_PROBE)
    await _post(ctx, store, notifier, key, _unhealthy_place(memo),
                unhealthy_notice(service, memo.unhealthy_reason, st.main_pid, logs), now)


def _unhealthy_place(memo: HealthMemo) -> str:
    since = memo.unhealthy_since.isoformat() if memo.unhealthy_since else ""
    return f"unhealthy:{memo.invocation}:{since}"


def _hung_place(memo: HealthMemo) -> str:
    since = memo.hung_since.isoformat() if memo.hung_since else ""
    return f"hung:{memo.invocation}:{since}"


def _sample(unit: UnitRaw | None) -> tuple[float | None, int, int]:
    """(generation tokens so far, running, waiting) from the watcher's /metrics scrape."""
    if unit is None:
        return None, 0, 0
    scrapes = [m for m in unit.metrics if m.probe.status == 200]
    if not scrapes:
        return None, 0, 0
    try:
        s = parse_metrics(scrapes[-1].probe.body)
    except MetricsParseError:
        return None, 0, 0
    return s.generation_tokens_total, int(s.running or 0), int(s.waiting or 0)


async def _hung(ctx: Context, store: StateStore, service: Service, st: ServiceState,
                sample: tuple[float | None, int, int], memo: HealthMemo, notifier: Notifier, now: datetime) -> None:
    if st.state != "ready":
        return
    gen, running, waiting = sample
    if gen is None:
        return
    key = health_key(service.name, service.node)
    moved = memo.gen_total is None or gen != memo.gen_total
    memo.gen_total = gen
    quiet_since = memo.gen_changed_at or memo.hung_since or now
    if moved or running + waiting == 0:
        memo.gen_changed_at = now  # tokens flowed, or nothing was asked: the clock starts again
    if moved and memo.hung_since is not None:
        since = min(quiet_since, memo.hung_since)
        reply = flowing_notice(service, since, now)
        place = f"unhung:{memo.invocation}:{since.isoformat()}"
        if memo.hung_silenced:
            await suppress(ctx, store, key, place, service.name, service.node, str(reply.data["notice"]), now)
            done = True
        else:
            done = await _post(ctx, store, notifier, key, place, reply, now)
        if done:
            await record(ctx, "health.unhung", service.name, service.node, str(reply.data["notice"]),
                         who="inferbot", where=ctx.config.notify.channel or "inferbot")
            memo.hung_since, memo.hung_silenced = None, False
        return
    if moved or running + waiting == 0:
        return
    changed = memo.gen_changed_at or now
    memo.gen_changed_at = changed
    quiet = (now - changed).total_seconds()
    if memo.hung_silenced and await store.silences.active_for(service.name, service.node, now) is None:
        memo.hung_since, memo.hung_silenced = None, False  # the silence ended, the hang did not: say it now
    if memo.hung_since is None:
        if quiet < ctx.config.watch.hung_after:
            return
        memo.hung_since = now
        text = str(hung_notice(service, running, waiting, quiet).data["notice"])
        memo.hung_silenced = await suppress(ctx, store, key, _hung_place(memo), service.name, service.node, text,
                                            now)
        await record(ctx, "health.hung", service.name, service.node, text, who="inferbot",
                     where=ctx.config.notify.channel or "inferbot")
    if not memo.hung_silenced:
        await _post(ctx, store, notifier, key, _hung_place(memo), hung_notice(service, running, waiting, quiet), now)


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


async def _post_stopped(ctx: Context, store: StateStore, service: Service, memo: HealthMemo, notifier: Notifier,
                        now: datetime) -> None:
    """Post the due ❌ (once; retried on the next look when Slack did not take it)."""
    key = health_key(service.name, service.node)
    if not await store.notices.sent(key, memo.stop_place):
        logs = await _logs(ctx, service, STOP_PROBE)
        if not await _post(ctx, store, notifier, key, memo.stop_place, stopped_notice(service, memo.stop_error, logs),
                           now):
            return
    memo.stop_error, memo.stop_place = "", ""
