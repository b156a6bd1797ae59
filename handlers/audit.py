"""The audit log: writing an entry (and mirroring it to ``[audit] channel``), and "audit" / "history kimi"."""

from __future__ import annotations

import logging
from datetime import UTC

from handlers.context import Context, Request
from handlers.notify import notifier_of
from handlers.reply import Reply, Section
from services import mentions

log = logging.getLogger("inferbot.audit")
DEFAULT_ROWS = 20


def who_of(ctx: Context) -> str:
    """The asker as the audit log names them: a Slack user id, or "terminal" (``terminal:<OS user>`` when known)."""
    if ctx.asker.surface != "slack":
        return ctx.asker.user_id or "terminal"
    return ctx.asker.user_id or "unknown"


def where_of(ctx: Context) -> str:
    """Where the asker is: a Slack channel id, or "terminal"."""
    if ctx.asker.surface != "slack":
        return "terminal"
    return ctx.asker.channel_id or "unknown"


async def record(
    ctx: Context,
    event: str,
    service: str | None,
    node: str | None,
    detail: str,
    request_id: str | None = None,
    who: str | None = None,
    where: str | None = None,
) -> None:
    """Append one audit entry (who/where default to the asker) and mirror it to the audit channel."""
    who = who if who is not None else who_of(ctx)
    where = where if where is not None else where_of(ctx)
    if ctx.store is not None:
        # The store keeps text, never live markup: a mention in the detail is kept as inert ``<@U…>``.
        await ctx.store.audit.record(event, who, where, service, node, mentions.plain(detail), at=ctx.now(),
                              request_id=request_id)
    channel = ctx.config.audit.channel
    notifier = notifier_of(ctx)
    if channel and notifier is not None:
        target = f"{service} on {node}" if service and node else (service or node or "")
        text = f"audit: {event} by {_who(who)} in {_where(where)}" + (f" — {target}" if target else "")
        text += f": {detail}" if detail else ""
        reply = Reply(intent="audit", title=text, status="info", data={"notice": text, "event": event})
        try:
            await notifier.post(channel, None, reply)
        except Exception:  # the audit row is written; a mirror that fails must not stop a restart
            log.warning("could not mirror audit event %s to %s", event, channel, exc_info=True)


def _who(who: str | None) -> str:
    return mentions.user(who, otherwise="unknown")


def _where(where: str | None) -> str:
    if where and where[:1] in ("C", "G"):
        return mentions.channel(where)
    if where and where[:1] == "D":
        return "a DM"
    return where or "unknown"


async def handle(ctx: Context, req: Request) -> Reply:
    """The newest audit entries, of one service when one is named."""
    if ctx.store is None:
        return Reply(intent="audit", ok=False, title="Audit log unavailable", status="error",
                     sections=[Section(kind="text", text="No state database is configured ([state] dir or url).")],
                     error="no store")
    names = sorted({s.name for s in req.services}) if req.explicit_target else []
    service = names[0] if len(names) == 1 else None
    entries = await ctx.store.audit.recent(service=service, limit=DEFAULT_ROWS)
    rows = [[f"{e.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}", _who(e.who), _where(e.where), e.event,
             f"{e.service or ''}{'@' + e.node if e.node else ''}", e.detail] for e in entries]
    title = f"Audit log — {service}" if service else "Audit log"
    sections = ([Section(kind="table", headers=["when (UTC)", "who", "where", "what", "service", "detail"], rows=rows)]
                if rows else [Section(kind="text", text="Nothing recorded yet.")])
    data = {"service": service, "entries": [e.model_dump(mode="json") for e in entries]}
    return Reply(intent="audit", title=title, status="info", sections=sections, data=data)
