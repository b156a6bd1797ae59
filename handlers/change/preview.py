"""Before anyone is asked to confirm a settings change: the restart's checks on every node, the change read
into typed values, the preflight on every node (each step named), and the preview — the exact difference, the
new command line and the drop-in (redacted), where it goes, the cost, and the restart confirmation's warnings.

A refusal writes nothing on any node and asks nobody; the change's row keeps it for the history (``refused``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from config.models import Service
from handlers.change.guard import in_flight_words, running_change
from handlers.change.words import change_data, diff_line, diff_rows, refused_data
from handlers.common import fmt_duration
from handlers.confirmable.flow import new_id
from handlers.confirmable.kind import Asked, Preview, Refusal
from handlers.context import Args, Context, require_store
from handlers.notify import groups_of
from handlers.reply import Section
from handlers.restart import impact, state_checks
from handlers.restart_diff import NO_CHANGES, leftover_section
from services import mentions
from services.access import check_restart_access
from services.change.catalogue import table_for
from services.change.plan import Plan, PlanRefused, plan_change
from services.change.preflight import Preflight, check_allowed, run_preflight
from services.change.spec import ChangeSpec, SpecError, parse_text
from services.models import ServiceState
from services.node import change as remote
from services.node.ssh import NodeUnreachable
from services.parse.vllm_args import format_flag_value
from services.store.records import ChangeRecord

PREFIX = "c-"
MARK = {"ok": "✅", "failed": "❌", "skipped": "⏭"}


def spec_of_args(args: Args, version: str | None) -> ChangeSpec | SpecError:
    """The change the message asked for (its words after the verb, the service left out)."""
    if args.change_verb is None or args.change_text is None:
        return SpecError(message="nothing to change: say what, e.g. `set max-num-seqs 256 on kimi`")
    found = parse_text(args.change_verb, args.change_text, table_for(version)[0])
    if isinstance(found, SpecError) and found.unknown and not found.suggestions and args.flag:
        # Everyday words the `flag` answer reads ("context length") name a flag the spec reads only by its names.
        return found.model_copy(update={"message": f"{found.message} — did you mean --{args.flag}?",
                                        "suggestions": [args.flag]})
    return found


async def _access(ctx: Context, services: Sequence[Service]) -> str | None:
    """Who may change every node (the flow checked the first): each node's own ``[access]``."""
    for s in services:
        decision = await check_restart_access(ctx.config.access_for(s), ctx.asker, groups_of(ctx), s.name)
        if not decision.allowed:
            return f"not allowed on {s.node}: {decision.reason}"
    return None


async def _checks(ctx: Context, services: Sequence[Service], force: bool) -> tuple[str | None, list[ServiceState]]:
    """The restart's checks on every node (reachable, no restart in flight, the cooldown)."""
    states: list[ServiceState] = []
    for s in services:
        refusal, st = await state_checks(ctx, s, force)
        if refusal is not None:
            return refusal, states
        if st is None:
            return f"refused: {s.name} on {s.node} could not be read", states
        states.append(st)
    return None, states


async def _revert_preflight(ctx: Context, service: Service, number: int, version: str | None) -> Preflight:
    """A revert's checks: changes allowed, inferbot's drop-in there, and what removing it changes."""
    pf = Preflight(service=service.name, node=service.node)
    pf.steps.append(check_allowed(service, ChangeSpec()))
    if not pf.ok:
        return pf
    try:
        read = await remote.read_unit(ctx.cluster.pool, ctx.config.node(service.node), service)
    except NodeUnreachable as e:
        pf.add("unit", "failed", f"{service.node} could not be asked: {e.error.reason}")
        return pf
    made = plan_change(read.source, ChangeSpec(), table_for(version)[0], f"#{number}", replace=True)
    if isinstance(made, PlanRefused):
        pf.add("unit", "failed", made.reason)
        return pf
    if read.source.dropin_text is None:
        pf.add("unit", "failed", f"inferbot has no drop-in for {service.unit} on {service.node} "
                                 f"({made.dropin_path}): nothing to revert")
        return pf
    pf.plan = made
    pf.add("unit", "ok", f"inferbot's drop-in {made.dropin_path} is removed; the operator's unit and drop-ins stay")
    if made.action == "nothing":
        pf.add("changes", "failed", "nothing would change: inferbot's drop-in sets what the unit already says "
                                    f"(remove it by hand: sudo rm {made.dropin_path})")
    else:
        pf.add("changes", "ok", diff_line_of(made))
    return pf


def diff_line_of(plan: Plan) -> str:
    """A plan's difference on one line."""
    return "; ".join(f"{d.key} {format_flag_value(d.old, '(unset)')} → {format_flag_value(d.new, '(unset)')}"
                     for d in plan.diff)


async def _preflights(ctx: Context, op: str, spec: ChangeSpec | None, services: Sequence[Service],
                      states: Sequence[ServiceState], number: int) -> list[Preflight]:
    pool = ctx.cluster.pool
    if op == "revert" or spec is None:
        return list(await asyncio.gather(*(_revert_preflight(ctx, s, number, st.version)
                                            for s, st in zip(services, states, strict=True))))
    return list(await asyncio.gather(*(
        run_preflight(pool, ctx.config.node(s.node), s, spec, change_id=f"#{number}", version=st.version)
        for s, st in zip(services, states, strict=True))))


def _steps_data(pfs: Sequence[Preflight]) -> list[dict[str, object]]:
    return [{"node": pf.node, "name": s.name, "status": s.status, "detail": s.detail} for pf in pfs for s in pf.steps]


def _steps_section(pfs: Sequence[Preflight], title: str) -> Section:
    many = len(pfs) > 1
    rows = [([pf.node] if many else []) + [s.name, MARK.get(s.status, s.status), s.detail] for pf in pfs
            for s in pf.steps]
    return Section(kind="table", title=title, headers=(["node"] if many else []) + ["check", "", "detail"],
                   rows=rows)


async def prepare(ctx: Context, asked: Asked, op: str, nodes: Sequence[str],
                  spec: ChangeSpec | None) -> Preview | Refusal | str:
    """Everything before the confirmation: the checks, the preflight, and the preview (or the refusal)."""
    service = asked.service
    services = [s for s in (ctx.config.service(service.name, n) for n in nodes) if s is not None] or [service]
    refusal = await _access(ctx, services[1:])
    if refusal is not None:
        return refusal
    other = await running_change(ctx, service.name)
    if other is not None:
        return in_flight_words(other, ctx)
    refusal, states = await _checks(ctx, services, asked.force)
    if refusal is not None:
        return refusal
    if op == "change" and spec is None:
        read = spec_of_args(asked.request.args, states[0].version)
        if isinstance(read, SpecError):
            return _spec_refusal(service, read)
        spec = read
    store = require_store(ctx)
    rid = new_id(PREFIX)
    # What was asked is kept only once the preflight passed: a refused change may carry a secret.
    ch = await store.changes.create(rid, op, service.name, [s.node for s in services], None, ctx.asker.user_id,
                                    ctx.now())
    pfs = await _preflights(ctx, op, spec, services, states, ch.number)
    plan = pfs[0].plan
    facts: dict[str, object] = {"diff": [d.model_dump(mode="json") for d in plan.diff] if plan is not None else [],
             "preflight": _steps_data(pfs), "checked_with": pfs[0].checked_with}
    failed = next((pf for pf in pfs if not pf.ok), None)
    if failed is not None or plan is None:
        return await _refused(ctx, ch, failed or pfs[0], pfs, facts)
    facts["spec"] = spec.model_dump(mode="json") if spec is not None else None
    await store.changes.move(rid, {"proposed"}, "proposed", ctx.now(), facts)
    ch = await store.changes.get(rid) or ch
    return await _preview(ctx, ch, services, states, pfs, plan)


def _spec_refusal(service: Service, found: SpecError) -> Refusal:
    """What the person typed is not a change (a typo, unbalanced quotes, a value of the wrong type)."""
    text = f"refused: {found.message} — nothing was written and nobody is asked"
    step: dict[str, object] = {"node": service.node, "name": "flags", "status": "failed", "detail": found.message}
    data: dict[str, object] = {"change": refused_data("change", service.name, service.node, found.message, [step],
                                                      suggestions=found.suggestions)}
    return Refusal(text, data=data)


async def _refused(ctx: Context, ch: ChangeRecord, failed: Preflight, pfs: Sequence[Preflight],
                   facts: dict[str, object]) -> Refusal:
    """The preflight failed: nothing was written, nobody is asked; the history keeps the refusal."""
    step = failed.failure
    if step is not None and step.name == "changes":
        text = f"nothing to change on {failed.node}: {step.detail}"
    elif step is not None:
        text = f"refused: the preflight failed at `{step.name}` on {failed.node}: {step.detail}"
    else:
        text = "refused: no plan could be made"
    text += " — nothing was written and nobody is asked"
    store = require_store(ctx)
    await store.changes.move(ch.id, {"proposed"}, "refused", ctx.now(), {**facts, "outcome": text})
    fresh = await store.changes.get(ch.id) or ch
    return Refusal(text, sections=[_steps_section(pfs, f"Preflight of change #{ch.number}")],
                   data={"change": change_data(fresh, None)})


async def _preview(ctx: Context, ch: ChangeRecord, services: Sequence[Service], states: Sequence[ServiceState],
                   pfs: Sequence[Preflight], plan: Plan) -> Preview:
    """What the confirmation shows: the difference, the checks, the command line, the drop-in, the cost."""
    service, st = services[0], states[0]
    fields, unavailable, facts = await impact(ctx, service, st)
    loads = await require_store(ctx).loads.durations(service.name, service.node, limit=1)
    cost = f"a restart: the last load took {fmt_duration(loads[0])}" if loads else \
        "a restart: no earlier load is on record"
    what = "revert *{0}* to the operator's unit (inferbot's drop-in removed)" if ch.op == "revert" else \
        "change *{0}*"
    text = (f"{mentions.user(ctx.asker.user_id)} asked to {what.format(service.name)} on *{service.node}* — "
            f"change #{ch.number}: {diff_line(ch)}. The cost: {cost}; {unavailable}.")
    sections = [Section(kind="text", text=text),
                Section(kind="table", title="What changes", headers=["what", "name", "before", "after"],
                        rows=diff_rows(ch)),
                _steps_section(pfs, f"Preflight — checked with {pfs[0].checked_with}"),
                Section(kind="code", title="The new command line (redacted)", text=" ".join(plan.command))]
    if plan.dropin_shown:
        sections.append(Section(kind="code", title=f"The drop-in written to {plan.dropin_path} (redacted)",
                                text=plan.dropin_shown))
    else:
        sections.append(Section(kind="text", text=f"inferbot's drop-in {plan.dropin_path} is removed."))
    sections.append(Section(kind="fields", fields=[*_restart_fields(fields), ("cost", cost),
                                                   ("then", _then(service, services))]))
    for s, sst in zip(services, states, strict=True):
        sections += leftover_section(sst, s)[0]
    sections += [Section(kind="context", text=note) for note in plan.notes]
    policy = ctx.config.access_for(service)
    data = {**facts, "change": change_data(ch, None), "unavailable": unavailable, "cost": cost,
            "leftovers": [row for s, sst in zip(services, states, strict=True) for row in leftover_section(sst, s)[1]],
            "require_second_person": policy.require_second_person}
    return Preview(sections=sections, data=data, detail=f"change #{ch.number}: {diff_line(ch)}; {unavailable}",
                   request_id=ch.id)


def _restart_fields(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The restart confirmation's facts, for a change: what the unit on disk already changes besides it."""
    out: list[tuple[str, str]] = []
    for key, value in fields:
        if key == "this restart applies":
            if value == NO_CHANGES:
                continue
            key = "also applied (the unit on disk)"
        out.append((key, value))
    return out


def _then(service: Service, services: Sequence[Service]) -> str:
    """What happens after the restart: the verification, the rollback, the other nodes."""
    checks = "ready and the smoke completion passes" if service.readiness.smoke else "ready"
    if service.acceptance.bench and service.bench_dir:
        checks += f", the acceptance benchmark within {service.acceptance.regression_pct:g} %"
    then = (f"kept when {checks} and no crash, unhealthy or hung notice fires within "
            f"{fmt_duration(service.changes.verify_window)}; otherwise "
            + ("rolled back automatically" if service.changes.rollback else "left as it is (rollback = false)"))
    if len(services) > 1:
        then += (f". {service.node} first; then {', '.join(s.node for s in services[1:])} "
                 f"({service.changes.max_parallel} at a time), stopping at the first failure")
    return then
