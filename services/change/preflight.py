"""The preflight of a settings change: every check that can be made before anyone is asked to confirm.

Each step is a typed record — a name (a stable code), ok / failed / skipped, one line — in this order:

1. ``allowed``: ``[services.changes] enabled``, and the allow/deny lists of flags and variables;
2. ``secrets``: no secret through chat — setting a secret flag or variable (or a value the redactor would hide)
   is refused; removing one is allowed. It runs before anything is sent to the node;
3. ``flags``: every flag exists for the vLLM version that runs there and every value has its type (inferbot's
   table; an unknown version gets the newest table, and the step says so);
4. ``unit``: the unit runs vLLM directly and the change can be written as inferbot's drop-in (the plan);
5. ``parser``: the node's own vLLM parses the whole new command line, run with the unit's interpreter (skipped,
   with the reason, when it cannot be loaded there);
6. ``gpus``: tensor × pipeline × data parallel size against the GPUs the service sees;
7. ``port``: a new port is not already taken on the node;
8. ``changes``: a change that changes nothing says so and stops.

A failed step makes the preflight fail: nothing is written and nobody is asked. The steps after a failure that
need the node or are costly are skipped (the parser imports vLLM, which takes seconds).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from config.models import Node, Service
from services.change import catalogue
from services.change.catalogue import Resolved, VersionTable
from services.change.plan import Plan, PlanRefused, plan_change
from services.change.spec import ChangeSpec
from services.models import FlagValue
from services.node import change as remote
from services.node.ssh import NodePool, NodeUnreachable
from services.parse import vllm_args
from services.redact import is_secret_name, redact_value

StepName = Literal["allowed", "secrets", "flags", "unit", "parser", "gpus", "port", "changes"]
Status = Literal["ok", "failed", "skipped"]
SECRET_REFUSAL = "set secrets on the node, not in chat"
DEFAULT_PORT = "8000"


class Step(BaseModel):
    """One check of the preflight."""

    model_config = ConfigDict(extra="forbid")
    name: StepName
    status: Status
    detail: str


class Preflight(BaseModel):
    """Every step in order, the plan when one could be made, and which vLLM check ran."""

    model_config = ConfigDict(extra="forbid")
    service: str
    node: str
    steps: list[Step] = Field(default_factory=list)
    plan: Plan | None = None
    checked_with: str = ""  # "vLLM 0.20.1's own parser on gpu-a" or "inferbot's table of vLLM 0.20 flags"

    @property
    def ok(self) -> bool:
        """True when no step failed (the change may be offered for confirmation)."""
        return all(s.status != "failed" for s in self.steps)

    @property
    def failure(self) -> Step | None:
        """The first failed step, if any."""
        return next((s for s in self.steps if s.status == "failed"), None)

    def add(self, name: StepName, status: Status, detail: str) -> None:
        """Record one step."""
        self.steps.append(Step(name=name, status=status, detail=detail))


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def check_allowed(service: Service, spec: ChangeSpec) -> Step:
    """``[services.changes]``: enabled, and every flag and variable allowed."""
    c = service.changes
    if not c.enabled:
        return Step(name="allowed", status="failed", detail=f"changes are off for {service.name}: an operator turns "
                    "them on with [services.changes] enabled = true in the config")
    flags = [*spec.set_flags, *spec.unset_flags]
    env = [*spec.set_env, *spec.unset_env]
    bad = [f"--{f}" for f in flags if (c.allow_flags and not _matches(f, c.allow_flags)) or _matches(f, c.deny_flags)]
    bad += [e for e in env if (c.allow_env and not _matches(e, c.allow_env)) or _matches(e, c.deny_env)]
    if bad:
        return Step(name="allowed", status="failed", detail=f"the config does not allow changing {', '.join(bad)} on "
                    f"{service.name} ([services.changes] allow_flags / deny_flags / allow_env / deny_env)")
    return Step(name="allowed", status="ok", detail=f"changes are on for {service.name}")


def _secret_value(name: str, value: FlagValue) -> bool:
    values = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return is_secret_name(name) or any(redact_value(name, v) != v for v in values)


def check_secrets(spec: ChangeSpec) -> Step:
    """No secret through chat: setting one is refused (by name, or by a value the redactor hides)."""
    bad = [f"--{n}" for n, v in spec.set_flags.items() if _secret_value(n, v)]
    bad += [n for n, v in spec.set_env.items() if _secret_value(n, v)]
    if bad:
        return Step(name="secrets", status="failed", detail=f"{SECRET_REFUSAL}: {', '.join(bad)} would carry a "
                    "secret — inferbot never writes one from chat (removing one is fine)")
    return Step(name="secrets", status="ok", detail="no secret in the change")


def check_flags(spec: ChangeSpec, table: VersionTable, note: str | None) -> Step:
    """Every flag exists in ``table`` and every value has its type."""
    problems: list[str] = []
    for name in [*spec.set_flags, *spec.unset_flags]:
        found = catalogue.resolve(table, name)
        if not isinstance(found, Resolved):
            problems.append(found.reason(table.key))
    for name, value in spec.set_flags.items():
        flag = table.flags.get(name)
        why = catalogue.value_error(flag, value) if flag is not None else None
        if why:
            problems.append(f"--{name} {why}")
    where = f"inferbot's table of vLLM {table.key} flags" + (f" ({note})" if note else "")
    if problems:
        return Step(name="flags", status="failed", detail="; ".join(problems) + f" — checked with {where}")
    count = len(spec.set_flags) + len(spec.unset_flags)
    return Step(name="flags", status="ok" if count else "skipped",
                detail=f"{count} flag(s) exist and have values of their type — checked with {where}" if count
                else "no flag in the change")


def _int(flags: dict[str, FlagValue], name: str, default: int = 1) -> int:
    value = flags.get(name)
    try:
        return int(value) if isinstance(value, str) else default
    except ValueError:
        return default


def check_gpus(plan: Plan, spec: ChangeSpec, gpu_count: int | None, node: str) -> Step:
    """Tensor × pipeline × data parallel size against the GPUs the service will see."""
    touched = {"tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "data-parallel-size-local"}
    if not (touched & {*spec.set_flags, *spec.unset_flags}) and "CUDA_VISIBLE_DEVICES" not in \
            {*spec.set_env, *spec.unset_env}:
        return Step(name="gpus", status="skipped", detail="the change does not touch parallelism or visible GPUs")
    flags = vllm_args.parse_vllm_argv(plan.argv).flags
    if _int(flags, "nnodes") > 1 or flags.get("headless") is True:
        return Step(name="gpus", status="skipped", detail="a multi-node service: its GPUs are not all on " + node)
    dp = _int(flags, "data-parallel-size-local", _int(flags, "data-parallel-size"))
    need = _int(flags, "tensor-parallel-size") * _int(flags, "pipeline-parallel-size") * dp
    visible = plan.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        have, where = len([d for d in visible.split(",") if d.strip()]), f"CUDA_VISIBLE_DEVICES={visible}"
    elif gpu_count is None:
        return Step(name="gpus", status="skipped", detail=f"nvidia-smi did not answer on {node}: GPUs not counted")
    else:
        have, where = gpu_count, f"{node} has {gpu_count}"
    shape = f"tensor {_int(flags, 'tensor-parallel-size')} × pipeline {_int(flags, 'pipeline-parallel-size')}" + (
        f" × data {dp}" if dp > 1 else "")
    if need > have:
        return Step(name="gpus", status="failed", detail=f"{shape} needs {need} GPUs, and {where}")
    return Step(name="gpus", status="ok", detail=f"{shape} = {need} GPU(s); {where}")


def check_port(plan: Plan, before_argv: list[str], listening: list[int], node: str) -> Step:
    """A new ``--port`` is not already taken by another process on the node."""
    after = vllm_args.parse_vllm_argv(plan.argv).flags.get("port", DEFAULT_PORT)
    before = vllm_args.parse_vllm_argv(before_argv).flags.get("port", DEFAULT_PORT) if before_argv else after
    if after == before or not isinstance(after, str):
        return Step(name="port", status="skipped", detail="the port does not change")
    try:
        port = int(after)
    except ValueError:
        return Step(name="port", status="skipped", detail=f"--port {after} is not a number (the flags step says why)")
    if port in listening:
        return Step(name="port", status="failed", detail=f"port {port} is already taken on {node}: another process "
                    "listens on it")
    return Step(name="port", status="ok", detail=f"port {port} is free on {node}")


def check_changes(plan: Plan) -> Step:
    """A change that changes nothing stops here."""
    if plan.changes_nothing:
        return Step(name="changes", status="failed", detail="nothing would change: the unit already has these "
                    "settings")
    shown = "; ".join(f"{d.key} {vllm_args.format_flag_value(d.old, '(unset)')} → "
                      f"{vllm_args.format_flag_value(d.new, '(unset)')}" for d in plan.diff)
    return Step(name="changes", status="ok", detail=shown)


async def _parser_step(pool: NodePool, node: Node, plan: Plan, table: VersionTable, pf: Preflight) -> None:
    program, args = plan.argv[0], plan.argv[plan.args_from:]
    try:
        parsed = await remote.parse_on_node(pool, node, program, args)
    except NodeUnreachable as e:
        pf.add("parser", "skipped", f"{node.name} could not be asked: {e.error.reason}")
        return
    if not parsed.loaded:
        pf.add("parser", "skipped", f"vLLM's own parser could not be loaded on {node.name} ({parsed.error}); "
               f"checked with inferbot's table of vLLM {table.key} flags only")
        return
    who = f"vLLM {parsed.version or '(version unknown)'}'s own parser on {node.name}"
    pf.checked_with = who
    with_py = f" (run with {parsed.interpreter})" if parsed.interpreter else ""
    if parsed.ok:
        pf.add("parser", "ok", f"{who} accepts the new command line{with_py}")
    else:
        pf.add("parser", "failed", f"{who} refuses the new command line: {parsed.error}")


async def run_preflight(pool: NodePool, node: Node, service: Service, spec: ChangeSpec, *, change_id: str,
                        version: str | None = None, node_parser: bool = True) -> Preflight:
    """Every step of the preflight for ``spec`` on ``service`` at ``node`` (``version``: the vLLM the probe saw).

    Reads the unit once and, when the steps before it passed, asks the node's own vLLM to parse the new command
    line. Writes nothing. Never raises for a node that cannot be asked: the ``unit`` step fails with why.
    """
    pf = Preflight(service=service.name, node=node.name)
    pf.steps += [check_allowed(service, spec), check_secrets(spec)]
    table, note = catalogue.table_for(version)
    pf.checked_with = f"inferbot's table of vLLM {table.key} flags"
    pf.steps.append(check_flags(spec, table, note))
    if not pf.ok:
        return pf
    try:
        read = await remote.read_unit(pool, node, service)
    except NodeUnreachable as e:
        pf.add("unit", "failed", f"{node.name} could not be asked: {e.error.reason}")
        return pf
    if not read.cat_ok:
        pf.add("unit", "failed", f"systemd on {node.name} has no unit {service.unit}")
        return pf
    made = plan_change(read.source, spec, table, change_id)
    if isinstance(made, PlanRefused):
        pf.add("unit", "failed", made.reason)
        return pf
    pf.plan = made
    merged = " (merged with inferbot's earlier change)" if made.previous is not None else ""
    pf.add("unit", "ok", f"{service.unit} runs `{made.form}`; the change goes to {made.dropin_path}{merged}")
    if made.changes_nothing:
        pf.steps.append(check_changes(made))
        return pf
    if node_parser:
        await _parser_step(pool, node, made, table, pf)
    else:
        pf.add("parser", "skipped", "not asked")
    before = plan_change(read.source, ChangeSpec(), table, change_id)
    before_argv = before.argv if isinstance(before, Plan) else []
    pf.steps += [check_gpus(made, spec, read.gpu_count, node.name), check_port(made, before_argv, read.listening,
                                                                               node.name), check_changes(made)]
    return pf
