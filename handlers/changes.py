""""What changed on kimi?" (diff against the previous different snapshot) and "compare A and B"."""

from __future__ import annotations

from typing import Any

from handlers.change.history import settings_history
from handlers.common import STATE_STATUS, ago, not_reached, worst
from handlers.context import Context, Request
from handlers.down_nodes import DownNodes
from handlers.live import answered, failure, record_snapshots, snapshot_data
from handlers.reply import Reply, Section
from handlers.settings import SETTINGS_PROBE
from services.models import FlagValue, ServiceState
from services.parse.vllm_args import format_flag_value


async def handle(ctx: Context, req: Request) -> Reply:
    """Diff each target's settings against the previous different snapshot."""
    if ctx.store is None:
        return Reply(intent="changes", ok=False, error="no state store", title="No history", status="warn", sections=[
            Section(kind="text", text="I keep no state here (no [state] store), so I can't tell what changed.")])
    snap = await ctx.cluster.snapshot(req.services, req.nodes, SETTINGS_PROBE)
    await record_snapshots(ctx, snap.services)
    now = ctx.now()
    sections: list[Section] = []
    data = snapshot_data(snap)
    down = DownNodes(snap.nodes, ((st.service, st.node) for st in snap.services))
    for st, out in zip(snap.services, data["services"], strict=True):
        sections += down.card(st.node)  # a down node's reason once, before its first service
        sections.append(Section(kind="header", title=f"{st.service} on {st.node}", status=STATE_STATUS[st.state]))
        snaps = await ctx.store.snapshots.latest(st.service, st.node, limit=2)
        if st.node in down:
            sections.append(Section(kind="text", text=f"{down.words(st.node)} (above); showing what I saw last"))
        elif st.state == "unreachable":
            sections.append(Section(kind="text", text=f"{not_reached(st)}; showing what I saw last"))
        if len(snaps) < 2:
            first = snaps[0].first_seen_at if snaps else None
            text = ("no change seen since I first looked " + ago(first, now)) if first else "no snapshots yet"
            sections.append(Section(kind="text", text=text))
            out["diff"], out["since"] = [], None
            continue
        new, old = snaps[0], snaps[1]
        from services.settings_diff import diff_snapshots

        diff = diff_snapshots(old, new)
        out["diff"] = [d.model_dump(mode="json") for d in diff]
        out["since"] = new.first_seen_at.isoformat()
        sections.append(Section(kind="text", text=f"changed {ago(new.first_seen_at, now)} "
                                                  f"({new.first_seen_at:%Y-%m-%d %H:%M} UTC):"))
        rows = [[d.kind, d.key, format_flag_value(d.old), format_flag_value(d.new)] for d in diff]
        sections.append(Section(kind="table", headers=["what", "name", "before", "now"], rows=rows))
    history, data["settings_changes"] = await settings_history(ctx, [s.name for s in req.services])
    sections += history
    statuses = [STATE_STATUS[s.state] for s in snap.services]
    # What was seen last is still an answer to "what changed?" when the node is down now.
    ok = answered(snap) or any(out.get("since") for out in data["services"]) or bool(history)
    return Reply(intent="changes", ok=ok, title="What changed", status=worst(statuses), sections=sections,
                 data=data, error=None if ok else failure(snap))


def compare_rows(a: ServiceState, b: ServiceState) -> list[dict[str, Any]]:
    """Side-by-side rows: model, version, every flag and variable of either service."""
    rows: list[dict[str, Any]] = []

    def add(kind: str, key: str, left: object, right: object) -> None:
        rows.append({"kind": kind, "key": key, "left": left, "right": right, "same": left == right})

    add("model", "model", a.model, b.model)
    add("version", "version", a.version, b.version)
    for key in dict.fromkeys([*a.flags, *b.flags]):
        fa: FlagValue | None = a.flags.get(key)
        fb: FlagValue | None = b.flags.get(key)
        add("flag", key, fa, fb)
    for key in dict.fromkeys([*a.env, *b.env]):
        add("env", key, a.env.get(key), b.env.get(key))
    return rows


async def compare(ctx: Context, req: Request) -> Reply:
    """Compare two services (or one service on two nodes) side by side."""
    if len(req.services) != 2:
        found = ", ".join(f"{s.name}@{s.node}" for s in req.services) or "none"
        return Reply(intent="compare", ok=False, error="name exactly two services", title="Compare what?",
                     status="info", sections=[Section(
            kind="text", text="Name exactly two services, or one service and two nodes — e.g. “compare kimi and "
                              f"qwen” or “compare kimi on gpu-a and gpu-b”. I matched: {found}.")],
            data={"compare": None})
    snap = await ctx.cluster.snapshot(req.services, req.nodes, SETTINGS_PROBE)
    await record_snapshots(ctx, snap.services)
    a, b = snap.services[0], snap.services[1]
    la, lb = f"{a.service}@{a.node}", f"{b.service}@{b.node}"
    rows = compare_rows(a, b)
    diff_rows = [
        [("≠ " if not r["same"] else "  ") + r["key"], format_flag_value(r["left"]), format_flag_value(r["right"])]
        for r in rows
    ]
    different = sum(1 for r in rows if not r["same"])
    sections = [Section(kind="text", text=f"{different} of {len(rows)} settings differ (marked ≠)")]
    down = DownNodes(snap.nodes, ((st.service, st.node) for st in (a, b)))
    for st in (a, b):
        if st.node in down:  # both sides on one down node: its reason once
            sections += down.card(st.node)
        elif st.state == "unreachable":
            sections.append(Section(kind="context", text=f"⚠ {st.service}@{st.node}: {not_reached(st)}"))
    sections.append(Section(kind="table", headers=["setting", la, lb], rows=diff_rows))
    data = snapshot_data(snap)
    data["compare"] = {"left": la, "right": lb, "rows": rows}
    # Both sides are needed: one unreachable side leaves nothing to compare.
    ok = a.state != "unreachable" and b.state != "unreachable"
    return Reply(intent="compare", ok=ok, title=f"{la} vs {lb}",
                 status=worst([STATE_STATUS[a.state], STATE_STATUS[b.state]]), sections=sections, data=data,
                 error=None if ok else "unreachable: " + ", ".join(
                     f"{st.service}@{st.node}" for st in (a, b) if st.state == "unreachable"))
