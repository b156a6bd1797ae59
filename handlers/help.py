"""Help, generated from the command table: what the bot answers, with examples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from handlers.context import Context, Request
from handlers.notify import groups_of
from handlers.reply import Action, Reply, Section
from services.access import check_restart_access

# The table is ordered for matching (specific first); people want the everyday questions first.
HELP_ORDER = ("settings", "status", "throughput", "gpus", "flag", "logs", "changes", "compare", "restart", "restarts",
              "audit")


async def _may_restart(ctx: Context) -> bool:
    """True when the asker may restart at least one service (restricted commands are hidden otherwise)."""
    for service in ctx.config.services:
        decision = await check_restart_access(ctx.config.access_for(service), ctx.asker, groups_of(ctx), service.name)
        if decision.allowed:
            return True
    return False


class HelpEntry(Protocol):
    """What help reads of a command in the table (``handlers.commands.Command``)."""

    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def examples(self) -> tuple[str, ...]: ...
    @property
    def restricted(self) -> bool: ...
    @property
    def hidden(self) -> bool: ...


async def answer(table: Sequence[HelpEntry], ctx: Context, req: Request) -> Reply:
    """List the commands of ``table`` the asker may run, with examples (restricted ones hidden unless allowed)."""
    may_restart = await _may_restart(ctx)
    order = {name: i for i, name in enumerate(HELP_ORDER)}
    rows = [
        [c.name, c.summary, " · ".join(f"“{e}”" for e in c.examples)]
        for c in sorted(table, key=lambda c: order.get(c.name, len(order)))
        if c.name != "help" and not c.hidden and (not c.restricted or may_restart)
    ]
    sections: list[Section] = []
    sections.append(Section(kind="table", title="Ask me", headers=["what", "answers", "try"], rows=rows))
    names = sorted({s.name for s in ctx.config.services})
    nodes = sorted({n.name for n in ctx.config.nodes})
    known = []
    if names:
        known.append("services: " + ", ".join(names))
    if nodes:
        known.append("nodes: " + ", ".join(nodes))
    if known:
        hint = "Name a service or node to narrow the answer — " + "; ".join(known)
        sections.append(Section(kind="context", text=hint))
    return Reply(intent="help", title="inferbot — what I can answer", status="info", sections=sections,
                 data={"commands": [r[0] for r in rows], "services": names, "nodes": nodes})


SUGGEST_ACTION = "suggest_run"  # the button that runs a suggested command as if the clicker typed it
SUGGEST_ACTIONS = (SUGGEST_ACTION, f"{SUGGEST_ACTION}_2")  # Slack wants a different id for each button
MAX_SUGGESTIONS = len(SUGGEST_ACTIONS)


def suggestion_actions(commands: list[str]) -> list[Action]:
    """A button per suggested command (at most two): Slack runs it as if the clicker typed it."""
    return [Action(action_id=SUGGEST_ACTIONS[i], text=c, value=c) for i, c in enumerate(commands[:MAX_SUGGESTIONS])]


def short(req: Request) -> Reply:
    """A message that could not be placed: at most four lines — what it might have meant, as full commands
    (buttons in Slack), and "`help` for everything" — never the whole table."""
    offers = list(req.understood.suggestions[:MAX_SUGGESTIONS]) if req.understood else []
    if offers:
        text = "Did you mean " + " or ".join(f"`{c}`" for c in offers) + "?"
    else:
        text = "Ask about a service — e.g. `status kimi`, `settings`, `throughput`."
    return Reply(intent="help", ok=False, title="I'm not sure what you meant", status="info",
                 sections=[Section(kind="text", text=text), Section(kind="context", text="`help` for everything.")],
                 actions=suggestion_actions(offers),
                 data={"suggestions": offers}, error="not understood")
