"""Logs: the last N journal lines of a service (across starts), each line whole, secrets redacted."""

from __future__ import annotations

from handlers.common import STATE_STATUS, not_reached, worst
from handlers.context import Context, Request
from handlers.down_nodes import DownNodes
from handlers.live import answered, failure, node_error_sections, snapshot_data
from handlers.reply import Attachment, Reply, Section
from services.node.probe import ProbeOptions

DEFAULT_LINES = 30
MAX_LINES = 200
INLINE_LINES = 40  # more than this goes to Slack as a file (the terminal prints it all either way)


async def handle(ctx: Context, req: Request) -> Reply:
    """The last lines of the targets' journals."""
    asked = req.args.lines
    n = DEFAULT_LINES if not asked else min(asked, MAX_LINES)
    note = f"(capped at {MAX_LINES} lines)" if asked and asked > MAX_LINES else ""
    if not req.explicit_target and len(req.services) > 1:
        names = ", ".join(s.name for s in req.services)
        return Reply(intent="logs", ok=False, error="name one service", title="Which service?", status="info",
                     sections=[
            Section(kind="text", text=f"Name the service whose logs you want — e.g. “logs {req.services[0].name}”. "
                                      f"Known: {names}.")], data={"services": [s.name for s in req.services]})
    snap = await ctx.cluster.snapshot(req.services, req.nodes, ProbeOptions(journal_lines=0, log_lines=n, gpus=False))
    sections: list[Section] = []
    attachments: list[Attachment] = []
    down = DownNodes(snap.nodes, ((st.service, st.node) for st in snap.services))
    for st in snap.services:
        if st.node in down:  # one card for the node, its reason said once
            sections += down.card(st.node)
            continue
        lines = st.logs or []
        title = f"{st.service} on {st.node} — last {len(lines)} lines {note}".strip()
        sections.append(Section(kind="header", title=title, status=STATE_STATUS[st.state]))
        if st.state == "unreachable":
            sections.append(Section(kind="text", text=not_reached(st)))
            continue
        if not lines:
            sections.append(Section(kind="text", text="the journal has no lines for this unit (or I may not read it: "
                                                      "add the bot's user to the systemd-journal group)"))
            continue
        text = "\n".join(lines)
        if len(lines) > INLINE_LINES:
            attachments.append(Attachment(filename=f"{st.service}-{st.node}.log",
                                          title=f"{st.service} on {st.node}: last {len(lines)} journal lines",
                                          content=text))
            sections.append(Section(kind="code", text="\n".join(lines[-10:]), title="newest 10 lines (all attached)"))
        else:
            sections.append(Section(kind="code", text=text))
    sections += node_error_sections(snap, {s.node for s in snap.services})  # discovery nodes
    statuses = [STATE_STATUS[s.state] for s in snap.services]
    data = snapshot_data(snap)
    ok = answered(snap)
    return Reply(intent="logs", ok=ok, title="Logs", status=worst(statuses), sections=sections,
                 attachments=attachments, data=data, error=None if ok else failure(snap))
