"""Render a ``Reply`` as plain text for the terminal (and as Slack's fallback text)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from tabulate import tabulate

from bot.terminal import has_controls, shown
from handlers.reply import Reply, Section, Status
from services import mentions

EMOJI: dict[Status, str] = {"ok": "✅", "info": "ℹ️", "warn": "⚠️", "error": "❌", "loading": "⏳"}


def render_section(s: Section) -> str:
    """One section as text; tables via tabulate, never truncated."""
    if s.kind == "header":
        return f"\n{EMOJI.get(s.status or 'info', '')} {s.title}".rstrip()
    if s.kind == "divider":
        return "-" * 40
    if s.kind == "fields":
        width = max((len(k) for k, _ in s.fields), default=0)
        return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in s.fields)
    if s.kind == "table":
        # Mentions as their inert text before the columns are measured (a marker is longer than ``<@U…>``).
        rows = [[mentions.plain(c) for c in row] for row in s.rows]
        return render_table(s, tabulate(rows, headers=s.headers, tablefmt="simple", disable_numparse=True))
    if s.kind == "code":
        head = f"  {s.title}:\n" if s.title else ""
        return head + "\n".join("    " + line for line in (s.text or "").splitlines())
    text = s.text or ""
    if s.title:
        text = f"{s.title}: {text}"
    return "\n".join("  " + line for line in text.splitlines())


def render_table(s: Section, tabulated: str) -> str:
    """A table section as text, given its rows as tabulate drew them (so a caller that has them draws once)."""
    body = "\n".join("  " + line for line in tabulated.splitlines())
    return f"  {s.title}:\n{body}" if s.title else body


def render_text(reply: Reply) -> str:
    """The whole reply as terminal text: control characters from nodes shown visibly (``bot.terminal``)."""
    if not any(has_controls(t) for t in _texts(reply)):
        return _render(reply, reply.sections)
    # Cells made visible before tabulate draws them, so that tables stay aligned (it would count an escape
    # sequence as invisible), and texts before they are split into lines (a carriage return would split).
    visible = reply.model_copy(update={"attachments": [
        a.model_copy(update={"title": shown(a.title), "content": shown(a.content)}) for a in reply.attachments]})
    return shown(_render(visible, [_visible(s) for s in reply.sections]))


def _texts(reply: Reply) -> Iterator[str]:
    yield reply.title
    for s in reply.sections:
        if s.title:
            yield s.title
        if s.text:
            yield s.text
        for k, v in s.fields:
            yield k
            yield v
        yield from s.headers
        for r in s.rows:
            yield from r
    for a in reply.attachments:
        yield a.title
        yield a.content
    yield from (a.text for a in reply.actions)
    if reply.chart is not None:
        yield reply.chart.title


def _visible(s: Section) -> Section:
    return replace(s, title=shown(s.title) if s.title else s.title, text=shown(s.text) if s.text else s.text,
                   fields=[(shown(k), shown(v)) for k, v in s.fields], headers=[shown(h) for h in s.headers],
                   rows=[[shown(c) for c in r] for r in s.rows])


def _render(reply: Reply, sections: list[Section]) -> str:
    parts = [f"{EMOJI.get(reply.status, '')} {reply.title}".strip()]
    parts += [render_section(s) for s in sections]
    for a in reply.actions:
        parts.append(f"  [{a.text}]")
    if reply.chart is not None:
        written = reply.data.get("png", {}).get("file") if isinstance(reply.data.get("png"), dict) else None
        where = f"written to {written}" if written else "`--png FILE` writes it"
        parts.append(f"  [chart: {reply.chart.title} — {where}]")
    for f in reply.attachments:
        parts.append(f"  {f.title}:\n" + "\n".join("    " + line for line in f.content.splitlines()))
    # The terminal shows the bot's own mentions as text (``<@U…>``): only Slack makes them live.
    return mentions.plain("\n".join(p for p in parts if p is not None).strip() + "\n")
