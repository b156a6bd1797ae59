"""Applying a planned change on the node, and going back: the steps before the restart (which is the restart's
own, ``services/node/restart.py``).

* ``apply_plan``: inferbot's drop-in written (or removed), then ``daemon-reload``;
* ``restore``: inferbot's change set back to an earlier one (a rollback) or removed (a revert), planned again
  against the operator's unit as it is now, with ``reset-failed`` first when the unit met its start limit.

A step that fails stops the rest; the result names what is on disk (redacted) and the commands that restore the
operator's own settings by hand.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from config.models import AccessPolicy, Node, Service
from services.change.catalogue import table_for
from services.change.plan import Plan, PlanRefused, plan_change, shown_dropin
from services.change.spec import ChangeSpec
from services.node import change as remote
from services.node.change import RemoteStep
from services.node.ssh import NodePool, NodeUnreachable

Action = Literal["write", "remove", "nothing"]


class Applied(BaseModel):
    """What was done on the node, step by step; ``ok`` when every step succeeded."""

    model_config = ConfigDict(extra="forbid")
    action: Action
    steps: list[RemoteStep] = Field(default_factory=list)
    refused: str | None = None  # the plan could not be made (nothing was run)
    on_disk: str | None = None  # inferbot's drop-in as it is after a failure (redacted), None when absent
    by_hand: str = ""  # the commands that give the operator's own settings back

    @property
    def ok(self) -> bool:
        """True when nothing was refused and every step ran and exited 0."""
        return self.refused is None and all(s.ok for s in self.steps)

    def summary(self) -> str:
        """One line: "ok", or what failed and what is on disk."""
        if self.refused:
            return self.refused
        failed = next((s for s in self.steps if not s.ok), None)
        if failed is None:
            return "ok"
        disk = "inferbot's drop-in is on disk" if self.on_disk is not None else "inferbot's drop-in is not on disk"
        return f"{failed.summary()} — {disk}; to give {self.by_hand.split()[-1]} its own settings back by hand: " \
               f"`{self.by_hand}`"


def by_hand(service: Service) -> str:
    """The commands a person runs on the node to go back to the operator's unit (``reset-failed``: a rollback
    that failed often leaves the unit at systemd's start limit, which a plain restart does not pass)."""
    return (f"sudo rm -f {service.dropin_path()} && sudo systemctl daemon-reload && "
            f"sudo systemctl reset-failed {service.unit} && sudo systemctl restart {service.unit}")


async def _finish(pool: NodePool, node: Node, service: Service, out: Applied) -> Applied:
    if not out.ok:
        out.by_hand = by_hand(service)
        try:
            text = await remote.read_dropin(pool, node, service)
            out.on_disk = shown_dropin(text) if text is not None else None
        except NodeUnreachable:
            out.on_disk = "(the node could not be asked)"
    return out


async def apply_plan(pool: NodePool, node: Node, service: Service, plan: Plan, policy: AccessPolicy) -> Applied:
    """Write (or remove) inferbot's drop-in as ``plan`` says, then reload systemd. The restart is not run here."""
    out = Applied(action=plan.action)
    if plan.action == "nothing":
        return out
    if plan.dropin_text is not None:
        out.steps.append(await remote.write_dropin(pool, node, service, plan.dropin_text))
    else:
        out.steps.append(await remote.remove_dropin(pool, node, service))
    if out.ok:
        out.steps.append(await remote.daemon_reload(pool, node, policy))
    return await _finish(pool, node, service, out)


async def restore(pool: NodePool, node: Node, service: Service, delta: ChangeSpec | None, policy: AccessPolicy, *,
                  change_id: str, version: str | None = None, clear_start_limit: bool = False) -> Applied:
    """Set inferbot's whole change back to ``delta`` (None or empty: remove the drop-in — a revert), planned
    against the operator's unit as it is now; ``clear_start_limit`` runs ``reset-failed`` first."""
    out = Applied(action="nothing")
    if clear_start_limit:
        out.steps.append(await remote.reset_failed(pool, node, service))
        if not out.ok:
            return await _finish(pool, node, service, out)
    try:
        read = await remote.read_unit(pool, node, service)
    except NodeUnreachable as e:
        out.steps.append(RemoteStep(command=remote.read_command(service).split(" ", 1)[0], unreachable=e.error))
        return await _finish(pool, node, service, out)
    made = plan_change(read.source, delta or ChangeSpec(), table_for(version)[0], change_id, replace=True)
    if isinstance(made, PlanRefused):
        if delta:  # the earlier change cannot be written against the unit as it is now: back to the operator's
            made = plan_change(read.source, ChangeSpec(), table_for(version)[0], change_id, replace=True)
        if isinstance(made, PlanRefused):
            out.refused = made.reason
            return await _finish(pool, node, service, out)
    applied = await apply_plan(pool, node, service, made, policy)
    applied.steps[:0] = out.steps
    return applied
