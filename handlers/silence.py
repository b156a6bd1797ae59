"""Silence for planned work: ``silence kimi 2h [reason]`` and ``unsilence kimi``.

While a service is silenced the watcher keeps watching, but its unplanned-restart, unhealthy and hung
notices are held back: each one is written to the audit log instead (``notice.suppressed``, naming the
silence; the silence stage of ``handlers/notice_pipeline.py`` does it). Failures (a load that failed, an
engine death that stopped the unit) are still posted. Who may silence a service is who may restart it
(``[access]`` / ``[services.access]``). A silence lives in the store, so it outlasts a restart of the bot,
and it ends by itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from config.models import Service
from handlers.audit import record
from handlers.common import fmt_duration
from handlers.context import Context, Request
from handlers.notify import dashboards_changed, groups_of
from handlers.reply import Reply, Section
from handlers.silence_text import clean_reason
from services import mentions
from services.access import check_restart_access
from services.store.records import Silence

MAX_SILENCE_S = 7 * 86400.0


def hhmm(at: datetime) -> str:
    """``15:40 UTC``."""
    return f"{at:%H:%M} UTC"


def silence_words(s: Silence) -> str:
    """``silenced until 15:40 UTC by <@U0ALICE>: planned driver update``."""
    out = f"silenced until {hhmm(s.until)} by {mentions.user(s.by)}"
    return out + (f": {s.reason}" if s.reason else "")


async def silence_of(ctx: Context, service: str, node: str) -> Silence | None:
    """The silence of service@node in force now, if any (None without a store)."""
    if ctx.store is None:
        return None
    return await ctx.store.silences.active_for(service, node, ctx.now())


async def silences_now(ctx: Context) -> list[Silence]:
    """Every silence in force now (none without a store)."""
    if ctx.store is None:
        return []
    return await ctx.store.silences.active(ctx.now())


def _refusal(intent: str, text: str) -> Reply:
    return Reply(intent=intent, ok=False, title=text[:1].upper() + text[1:], status="error",
                 sections=[Section(kind="text", text=text)], data={"refused": True, "reason": text}, error=text)


async def _targets(ctx: Context, req: Request, verb: str) -> list[Service] | Reply:
    if not req.explicit_target or not req.services:
        known = ", ".join(sorted({s.name for s in ctx.config.services})) or "none"
        example = f"{verb} kimi 2h planned work" if verb == "silence" else f"{verb} kimi"
        return _refusal(verb, f"name the service to {verb}, e.g. `{example}` (known: {known})")
    if ctx.store is None:
        return _refusal(verb, f"refused: {verb} needs the state database ([state] dir or url)")
    for service in req.services:
        decision = await check_restart_access(ctx.config.access_for(service), ctx.asker, groups_of(ctx),
                                              service.name)
        if not decision.allowed:
            text = f"not allowed: {decision.reason} (who may {verb} a service is who may restart it)"
            await record(ctx, f"{verb}.refused", service.name, service.node, text)
            return _refusal(verb, text)
    return list(req.services)


async def handle_silence(ctx: Context, req: Request) -> Reply:
    """``silence kimi 2h [reason]``: hold back kimi's unplanned-restart, unhealthy and hung notices for 2 h."""
    seconds = req.args.duration_s
    if seconds is None:
        return _refusal("silence", "say for how long, e.g. `silence kimi 2h planned driver update` "
                                   "(minutes m, hours h, days d)")
    if seconds > MAX_SILENCE_S:
        return _refusal("silence", f"a silence lasts at most {fmt_duration(MAX_SILENCE_S)}; ask again with less "
                                   "(e.g. `silence kimi 1d`)")
    targets = await _targets(ctx, req, "silence")
    if isinstance(targets, Reply):
        return targets
    assert ctx.store is not None
    now = ctx.now()
    until = now + timedelta(seconds=float(seconds))
    reason = clean_reason(req.args.reason)
    who = ctx.asker.user_id or ("terminal" if ctx.asker.surface != "slack" else "unknown")
    rows = []
    for service in targets:
        s = Silence(service=service.name, node=service.node, until=until, reason=reason, by=who, at=now)
        await ctx.store.silences.put(s)
        await record(ctx, "silence.set", service.name, service.node,
                     f"until {hhmm(until)} ({fmt_duration(float(seconds))})" + (f": {reason}" if reason else ""))
        rows.append(s)
        await dashboards_changed(ctx, f"{service.name}@{service.node}")  # the Home tabs show it
    names = ", ".join(f"{s.name} on {s.node}" for s in targets)
    text = (f"{names} silenced until {hhmm(until)} ({fmt_duration(float(seconds))})"
            + (f" — {reason}" if reason else ""))
    return Reply(intent="silence", title=text, status="ok", sections=[
        Section(kind="text", text=text),
        Section(kind="context", text="Unplanned-restart, unhealthy and hung notices are held back (each is written "
                                     "to the audit log); failures are still posted. "
                                     f"`unsilence {targets[0].name}` ends it now."),
    ], data={"notice": text, "silences": [r.model_dump(mode="json") for r in rows]})


async def handle_unsilence(ctx: Context, req: Request) -> Reply:
    """``unsilence kimi``: end kimi's silence now."""
    targets = await _targets(ctx, req, "unsilence")
    if isinstance(targets, Reply):
        return targets
    assert ctx.store is not None
    ended: list[str] = []
    for service in targets:
        removed = await ctx.store.silences.end(service.name, service.node)
        if removed is not None and removed.until > ctx.now():
            await record(ctx, "silence.cleared", service.name, service.node,
                         f"ended early (was {silence_words(removed)})")
            ended.append(f"{service.name} on {service.node}")
            await dashboards_changed(ctx, f"{service.name}@{service.node}")
    if not ended:
        names = ", ".join(f"{s.name} on {s.node}" for s in targets)
        text = f"{names} was not silenced: nothing to end"
        return Reply(intent="unsilence", title=text, status="info", sections=[Section(kind="text", text=text)],
                     data={"notice": text, "ended": []})
    text = f"{', '.join(ended)}: silence ended — notices are posted again"
    return Reply(intent="unsilence", title=text, status="ok", sections=[Section(kind="text", text=text)],
                 data={"notice": text, "ended": ended})


def silence_sections(silences: list[Silence], services: list[tuple[str, str]] | None = None) -> list[Section]:
    """A context line per silence in force (only those of ``services`` when given), for ``status``."""
    shown = [s for s in silences if services is None or (s.service, s.node) in services]
    if not shown:
        return []
    text = "\n".join(f"🔕 {s.service} on {s.node} {silence_words(s)}" for s in shown)
    return [Section(kind="context", title="Silenced", text=text)]

