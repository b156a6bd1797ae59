"""Questions about restarts ("why did kimi restart?", "who can restart kimi?", "don't restart kimi").

They never start one: this answers with what is known — the current start and systemd's ``NRestarts``
from the node, the last restart events from the audit log, who may restart (``[access]``, by Slack id)
and how. A negation gets a short "I won't restart anything".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from config.models import AccessPolicy, Service
from handlers.common import STATE_STATUS, ago, state_line
from handlers.context import Context, Request
from handlers.down_nodes import DownNodes
from handlers.live import snapshot_data
from handlers.notify import groups_of
from handlers.reply import Reply, Section
from services import mentions
from services.access import check_restart_access
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.store.records import AuditEntry

# systemd's view only (no GPUs, journal or /metrics): the cheapest question a node can be asked.
INFO_PROBE = ProbeOptions(gpus=False, journal_lines=0, metrics_samples=0, http_timeout_s=2.0)
RESTART_EVENTS = ("restart.executed", "restart.unplanned", "restart.requested", "restart.confirmed",
                  "restart.refused", "restart.cancelled", "restart.expired")
SHOWN = 8


def _who(who: str | None) -> str:
    return mentions.user(who, otherwise="—")


def who_may(policy: AccessPolicy) -> str:
    """The access policy in one sentence, by Slack ids."""
    people = ([mentions.user(u) for u in policy.restart_users]
              + [mentions.usergroup(g) for g in policy.restart_usergroups])
    if not people:
        return ("nobody in Slack yet — restarts are off until the config lists who may "
                "(`restart_users` / `restart_usergroups` in `[access]`); anyone with the config and a shell "
                "on the bot's host can use `inferbot restart`")
    text = ", ".join(people)
    if policy.restart_channels:
        text += " — only in " + ", ".join(mentions.channel(c) for c in policy.restart_channels)
    if policy.require_second_person:
        text += "; someone other than the requester must confirm"
    return text


def how_to(service: Service, several_nodes: bool) -> str:
    """How to ask for a restart of ``service``, in Slack and from the terminal."""
    target = f"{service.name} on {service.node}" if several_nodes else service.name
    cli = f"{service.name}@{service.node}" if several_nodes else service.name
    return (f"in Slack `@inferbot restart {target}` (or `/inferbot restart {target}`), then an allowed person "
            f"confirms with the button; on the bot's host `inferbot restart {cli}` (you type the name back; "
            "`--wait` follows the load)")


async def handle(ctx: Context, req: Request) -> Reply:
    """What is known about restarts of the targets (or a short promise, for a negation)."""
    if req.args.negated:
        text = ("OK — I won't restart anything. I only restart a service when someone allowed asks for it "
                "(“restart kimi”) and it is confirmed with the button.")
        return Reply(intent="restarts", title="I won't restart anything", status="info",
                     sections=[Section(kind="text", text=text)], data={"negated": True, "restarted": False})
    if not req.services:
        return Reply(intent="restarts", ok=False, title="Restarts", status="info", error="no services configured",
                     sections=[Section(kind="text", text="No services are configured — see the README's config "
                                                         "reference.")], data={"services": []})
    snap = await ctx.cluster.snapshot(req.services, req.nodes, INFO_PROBE)
    states = {(st.service, st.node): st for st in snap.services}
    audit_ok = ctx.store is not None
    entries: list[AuditEntry] = []
    if ctx.store is not None:
        for name in dict.fromkeys(s.name for s in req.services):
            entries += await ctx.store.audit.recent(service=name, limit=200)
    now = ctx.now()
    names_nodes: dict[str, set[str]] = {}
    for s in ctx.config.services:
        names_nodes.setdefault(s.name, set()).add(s.node)
    sections: list[Section] = []
    out: list[dict[str, Any]] = []
    down = DownNodes(snap.nodes, ((s.name, s.node) for s in req.services))
    for svc in req.services:
        st = states.get((svc.name, svc.node))
        sections += down.card(svc.node)  # a down node's reason once, before its first service
        mine = [e for e in entries if e.service == svc.name and e.node in (svc.node, None)
                and e.event in RESTART_EVENTS][:SHOWN]
        several = len(names_nodes.get(svc.name, ())) > 1
        card, facts = await _service(ctx, svc, st, down, mine, several, audit_ok, now)
        sections += card
        out.append(facts)
    data = snapshot_data(snap)
    data["services"] = out
    # Who may restart and how are answered from the config; only a dead node and no audit log leave nothing.
    reachable = any(n.ok for n in snap.nodes)
    ok = reachable or audit_ok
    title = "Restarts of " + ", ".join(dict.fromkeys(s.name for s in req.services))
    return Reply(intent="restarts", ok=ok, title=title, status="info", sections=sections, data=data,
                 error=None if ok else "every targeted node is unreachable and there is no audit log")


async def _service(ctx: Context, svc: Service, st: ServiceState | None, down: DownNodes, mine: list[AuditEntry],
                   several: bool, audit_ok: bool, now: datetime) -> tuple[list[Section], dict[str, Any]]:
    """One service's card (its start, who may restart it and how, its last restart events) and its facts."""
    policy = ctx.config.access_for(svc)
    decision = await check_restart_access(policy, ctx.asker, groups_of(ctx), svc.name)
    fields = _state_fields(svc, st, down, now)
    fields.append(("who may restart", who_may(policy)))
    if ctx.asker.surface != "slack":
        you = f"may restart it from this shell: `inferbot restart {svc.name}{'@' + svc.node if several else ''}`"
    else:
        you = "may restart it" if decision.allowed else f"may not — {decision.reason}"
    fields.append(("you", you))
    fields.append(("how", how_to(svc, several)))
    status = STATE_STATUS[st.state] if st is not None else "info"
    card = [Section(kind="header", title=f"{svc.name} on {svc.node}", status=status),
            Section(kind="fields", fields=fields), _events(mine, audit_ok)]
    facts = {
        "service": svc.name, "node": svc.node, "state": st.state if st is not None else None,
        "since": st.since.isoformat() if st is not None and st.since else None,
        "n_restarts": st.restarts if st is not None and st.state != "unreachable" else None,
        "restarts": [e.model_dump(mode="json") for e in mine],
        "access": {"users": list(policy.restart_users), "usergroups": list(policy.restart_usergroups),
                   "channels": list(policy.restart_channels),
                   "require_second_person": policy.require_second_person, "asker_allowed": decision.allowed},
        "how": how_to(svc, several),
    }
    return card, facts


def _state_fields(svc: Service, st: ServiceState | None, down: DownNodes, now: datetime) -> list[tuple[str, str]]:
    """The current start and systemd's restart count, or why the node could not say."""
    if st is not None and st.state != "unreachable":
        started = f"{st.since:%Y-%m-%d %H:%M} UTC ({ago(st.since, now)})" if st.since else "unknown"
        return [("current start", started),
                ("automatic restarts", f"{st.restarts} (systemd's NRestarts for this unit)")]
    if svc.node in down:
        return [("node", f"{down.words(svc.node)} (above)")]
    if st is not None:
        return [("node", state_line(st, now))]
    return []


def _events(mine: list[AuditEntry], audit_ok: bool) -> Section:
    """The last restart events of the audit log, or why there are none to show."""
    if mine:
        rows = [[f"{e.at.astimezone(UTC):%Y-%m-%d %H:%M}", e.event.removeprefix("restart."), _who(e.who), e.detail]
                for e in mine]
        return Section(kind="table", title="Last restart events (audit log)",
                       headers=["when (UTC)", "what", "who", "detail"], rows=rows)
    if audit_ok:
        return Section(kind="text", text="No restart recorded in the audit log (by inferbot, or noticed by its "
                                         "watcher).")
    return Section(kind="text", text="No state database ([state]), so no audit log to read.")
