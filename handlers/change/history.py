"""inferbot's settings changes in the ``changes`` answer ("what changed on kimi?"): who asked, who confirmed,
the difference, how it ended, how long it took (``data.settings_changes``: the objects of ``data.change``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from handlers.change.words import change_data, diff_line
from handlers.common import fmt_duration
from handlers.context import Context
from handlers.reply import Section
from services import mentions

SHOWN = 10


async def settings_history(ctx: Context, services: Sequence[str]) -> tuple[list[Section], list[dict[str, object]]]:
    """The newest changes of ``services`` through inferbot: a table (none when there are none) and the data."""
    store = ctx.store
    if store is None:
        return [], []
    rows: list[list[str]] = []
    out: list[dict[str, object]] = []
    for name in dict.fromkeys(services):
        for ch in await store.changes.recent(name, limit=SHOWN):
            req = await store.requests.get(ch.id)
            data = change_data(ch, req)
            out.append(data)
            took = data["duration_s"]
            rows.append([f"#{ch.number}", f"{ch.created_at.astimezone(UTC):%Y-%m-%d %H:%M}", ch.service,
                         mentions.user(ch.requested_by, otherwise="—"),
                         mentions.user(req.confirmed_by if req is not None else None, otherwise="—"),
                         "revert to the operator's unit" if ch.op == "revert" else diff_line(ch),
                         ch.outcome or str(data["state"]),
                         fmt_duration(float(took)) if isinstance(took, (int, float)) else "—"])
    if not rows:
        return [], out
    return [Section(kind="table", title="Settings changes through inferbot",
                    headers=["change", "asked (UTC)", "service", "asked by", "confirmed by", "difference", "outcome",
                             "took"], rows=rows)], out
