"""Render a ``handlers.home.Dashboard`` as the App Home view (``views.publish``), within Slack's limits.

Built with slack_sdk's Block Kit models (``to_dict()`` validates each block). Slack allows at most 100
blocks in a view: the services that do not fit are summarised in one block that says how many more
there are (trouble comes first, so what is cut is the calm end of the list). Long texts are shortened
here — the Home tab is a glance; ``status kimi`` has the whole card.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.slack.blocks import cut, escape, md
from handlers.common import ago, fmt_duration
from handlers.home import Dashboard, ServiceCard
from handlers.status import progress_bar
from services import mentions

MAX_VIEW_BLOCKS = 100
MAX_TEXT = 3000
MAX_CONTEXT_TEXT = 2000
MAX_HEADER = 150
REFRESH = "home_refresh"
RESTART = "home_restart"
ACTIONS = (REFRESH, RESTART)
"""The action ids the Home tab's buttons carry (the manifest test checks the app registers them)."""
STATE_EMOJI = {"failed": "❌", "unreachable": "🔌", "unhealthy": "⚠️", "loading": "⏳", "starting": "⏳",
               "ready": "✅", "stopped": "⏹️"}
_TOP_BLOCKS = 3  # header, "read at" context, Refresh button
_SUMMARY_BLOCKS = 2  # divider + "N more services not shown"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _who(who: str | None) -> str:
    # Live only for a Slack user id (from the audit log, never message text); the watcher audits "unknown".
    return escape(mentions.user(None if who == "unknown" else who, "someone outside inferbot"))


def _service_text(c: ServiceCard) -> str:
    emoji = STATE_EMOJI.get(c.state, "•")
    lines = [f"{emoji} *{escape(c.service)}* on *{escape(c.node)}* — {escape(c.state)}"]
    if c.model:
        lines.append(f"model `{escape(_cut(c.model, 200))}`")
    lines.append(escape(_cut(c.state_words, 600)))
    if c.state in ("loading", "starting"):
        parts = []
        if c.phase:
            parts.append(escape(c.phase))
        if c.progress is not None:
            bar = f"`{progress_bar(c.progress)}`"
            if c.shards:
                bar += f" {c.shards[0]}/{c.shards[1]} shards"
            parts.append(bar)
        if c.elapsed_s is not None:
            parts.append(f"elapsed {fmt_duration(c.elapsed_s)}")
        parts.append(f"ETA {escape(c.eta)}" if c.eta else "ETA unknown yet")
        lines.append(" · ".join(parts))
    elif c.state in ("ready", "unhealthy"):
        live = []
        if c.generation_tps is not None:
            live.append(f"*{c.generation_tps:,.1f} tok/s* generation")
        else:
            live.append("idle (no tokens in the last samples)")
        if c.running is not None:
            live.append(f"{c.running} running, {c.waiting or 0} waiting")
        if c.kv_cache_usage is not None:
            live.append(f"KV cache {c.kv_cache_usage * 100:.1f} %")
        lines.append(" · ".join(live))
    return cut("\n".join(lines), MAX_TEXT)


def _service_context(c: ServiceCard, dash: Dashboard) -> str:
    parts: list[str] = []
    if c.benchmark:
        parts.append(f":bar_chart: benchmark: {escape(c.benchmark)}")
    for w in c.warnings[:5]:
        parts.append(f"⚠ {escape(_cut(w, 300))}")
    if len(c.warnings) > 5:
        parts.append(f"⚠ and {len(c.warnings) - 5} more warnings — `status {escape(c.service)}`")
    if c.last_restart is not None:
        r = c.last_restart
        how = "restarted" if r.planned else "restarted (not by inferbot)"
        by = f" by {_who(r.by)}" if r.planned else ""
        parts.append(f":arrows_counterclockwise: last {how} {r.at:%Y-%m-%d %H:%M} UTC "
                     f"({ago(r.at, dash.read_at)}){by}")
    if c.silenced_until is not None:
        why = f": {escape(c.silence_reason)}" if c.silence_reason else ""
        parts.append(f":no_bell: silenced until {c.silenced_until:%H:%M} UTC by {_who(c.silenced_by)}{why} — "
                     "unplanned-restart, unhealthy and hung notices are held back")
    return cut("\n".join(parts), MAX_CONTEXT_TEXT)


def _service_blocks(c: ServiceCard, dash: Dashboard) -> list[Block]:
    accessory = None
    if c.may_restart:
        accessory = ButtonElement(text=PlainTextObject(text="Restart", emoji=True), action_id=RESTART,
                                  value=c.key, style="danger")
    blocks: list[Block] = [SectionBlock(text=md(_service_text(c)), accessory=accessory)]
    context = _service_context(c, dash)
    if context:
        blocks.append(ContextBlock(elements=[md(context)]))
    blocks.append(DividerBlock())
    return blocks


def _counts(dash: Dashboard) -> str:
    by_state: dict[str, int] = {}
    for c in dash.services:
        by_state[c.state] = by_state.get(c.state, 0) + 1
    down = sum(len(p.services) for p in dash.unreachable)  # on nodes that did not answer: no cards of their own
    if down:
        by_state["unreachable"] = by_state.get("unreachable", 0) + down
    return ", ".join(f"{n} {s}" for s, n in by_state.items())


def render_home(dash: Dashboard) -> View:
    """The Home tab for ``dash`` (already made for one person by ``handlers.home.for_user``)."""
    top: list[Block] = [
        HeaderBlock(text=PlainTextObject(text="inferbot — fleet dashboard", emoji=True)),
        ContextBlock(elements=[md(_cut(
            f"Read at *{dash.read_at:%Y-%m-%d %H:%M:%S} UTC* ({dash.elapsed_s:.1f} s) · "
            f"{dash.service_count} services" + (f": {_counts(dash)}" if dash.service_count else "")
            + " · it refreshes itself while loads progress", MAX_CONTEXT_TEXT))]),
        ActionsBlock(elements=[ButtonElement(text=PlainTextObject(text="Refresh", emoji=True), action_id=REFRESH,
                                             value="refresh")]),
    ]
    problems: list[Block] = []
    if dash.unreachable:
        lines = [f"🔌 *{escape(p.node)}* is unreachable — {escape(_cut(p.reason, 400))}"
                 + (f" — {escape(p.services_words)}" if p.services else "")
                 + (f"\n      _{escape(_cut(p.fix, 300))}_" if p.fix else "") for p in dash.unreachable]
        text = cut("\n".join(lines), MAX_TEXT)
        problems = [SectionBlock(text=md(text)), DividerBlock()]
    if not dash.service_count:
        problems.append(SectionBlock(text=md("No services are configured yet: add `[[services]]` to the config.")))
    budget = MAX_VIEW_BLOCKS - len(top) - len(problems)
    body: list[Block] = []
    shown = 0
    for i, c in enumerate(dash.services):
        blocks = _service_blocks(c, dash)
        left = len(dash.services) - i - 1
        reserve = _SUMMARY_BLOCKS if left else 0
        if len(body) + len(blocks) + reserve > budget:
            break
        body += blocks
        shown += 1
    hidden = dash.services[shown:]
    if hidden:
        if len(body) + _SUMMARY_BLOCKS > budget:  # pragma: no cover - the reserve above keeps room
            body = body[: budget - _SUMMARY_BLOCKS]
        names = ", ".join(f"{c.service}@{c.node} ({c.state})" for c in hidden)
        text = (f"*{len(hidden)} more services not shown* (Slack shows at most {MAX_VIEW_BLOCKS} blocks; "
                f"trouble is listed first): {escape(names)}. Ask `status` for all of them.")
        body += [DividerBlock(), ContextBlock(elements=[md(cut(text, MAX_CONTEXT_TEXT))])]
    view = View(type="home", blocks=top + problems + body,
                private_metadata=f"shown={shown};hidden={len(hidden)}")
    return view


def view_dict(dash: Dashboard) -> dict[str, Any]:
    """The view as the JSON ``views.publish`` receives (validated by slack_sdk)."""
    out: dict[str, Any] = render_home(dash).to_dict()
    if len(out["blocks"]) > MAX_VIEW_BLOCKS:  # pragma: no cover - render_home keeps to the budget
        raise ValueError(f"{len(out['blocks'])} blocks in the Home view (max {MAX_VIEW_BLOCKS})")
    return out


def line_view(text: str) -> dict[str, Any]:
    """A Home tab holding only ``text`` (escaped): when the dashboard cannot be drawn, or may not be shown."""
    return View(type="home", blocks=[SectionBlock(text=md(cut(escape(text), MAX_TEXT)))]).to_dict()
