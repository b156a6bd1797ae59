"""Run the configured restart command for one unit, and say plainly what happened.

The remote command is built from exactly two things, both from the validated config: the
``restart_command`` template (which may only contain ``{unit}``, no shell metacharacters) and the
service's unit name, shell-quoted. No text from a chat message can reach it. After the command, one
``systemctl show`` of the unit tells a start refused by systemd's start limit (``Result=start-limit-hit``)
from an ordinary failure: that case is reported with its fix and never retried.
"""

from __future__ import annotations

import shlex

from config.models import UNIT_RE, AccessPolicy, Node, Service
from services.models import Model
from services.node.ssh import NodePool, NodeUnreachable
from services.parse.systemd import parse_show
from services.redact import redact_patterns

SHOW_AFTER = "Id,ActiveState,SubState,Result,MainPID,InvocationID,NRestarts"
RESTART_LIMIT_S = 120.0  # systemctl restart waits for the stop (vLLM frees GPUs) and the start job
# How long a restart's commands, and the looks at the unit before it, may wait inside the bot for one of the
# node's channels (``NodePool.run``'s ``wait_s``) before the answer is "busy": someone asked for this restart
# (or confirmed it), and it is worth waiting for behind a burst of questions rather than refused.
RESTART_WAIT_S = 300.0


class RestartResult(Model):
    """What the restart command did, as facts (stderr already redacted)."""

    command: str
    exit_status: int | None = None
    stderr: str = ""
    stdout: str = ""
    unreachable: str | None = None  # the reason the node could not be asked
    busy: bool = False  # ... because the bot itself had too many commands waiting for the node (not the node's fault)
    start_limit_hit: bool = False
    active_state: str = ""
    sub_state: str = ""
    result: str = ""
    main_pid: int = 0
    invocation_id: str = ""
    n_restarts: int = 0
    fix: str | None = None
    elapsed_s: float = 0.0
    reload_command: str = ""  # run first because the unit changed on disk without daemon-reload
    reload_failed: bool = False

    @property
    def ok(self) -> bool:
        """True when the command succeeded and systemd did not refuse the start."""
        return (self.unreachable is None and self.exit_status == 0 and not self.start_limit_hit
                and not self.reload_failed)

    def summary(self) -> str:
        """One line for people: what failed and why (or "exit 0")."""
        if self.unreachable and self.busy:
            return f"nothing was restarted: {self.unreachable}"
        if self.unreachable:
            return f"the node could not be reached: {self.unreachable}"
        if self.reload_failed:
            err = self.stderr.strip().splitlines()
            said = f": {err[-1]}" if err else ""
            return (f"the unit changed on disk, and reloading systemd first (`{self.reload_command}`) failed with "
                    f"status {self.exit_status}{said} — nothing was restarted")
        if self.start_limit_hit:
            return (f"systemd refused to start {self.command.split()[-1]}: it was started too often in a short "
                    "time (Result=start-limit-hit)")
        if self.exit_status != 0:
            err = self.stderr.strip().splitlines()
            said = f": {err[-1]}" if err else ""
            return f"the restart command exited with status {self.exit_status}{said}"
        return "exit 0"


def build_restart_command(policy: AccessPolicy, service: Service) -> str:
    """The exact remote command: the config's template with the config's unit name, shell-quoted."""
    if not UNIT_RE.match(service.unit):  # defence in depth; the config validated it already
        raise ValueError(f"refusing unit name {service.unit!r}")
    return policy.restart_command.format(unit=shlex.quote(service.unit))


def build_reload_command(policy: AccessPolicy) -> str:
    """The exact remote daemon-reload command: the config's fixed ``reload_command`` (validated, no placeholder)."""
    return policy.reload_command


async def _reload_if_needed(pool: NodePool, node: Node, service: Service, policy: AccessPolicy,
                            out: RestartResult) -> bool:
    """Reload systemd first when the unit changed on disk (NeedDaemonReload=yes, asked on the node right now).

    False when the reload was needed and failed (``out`` says why); the restart must not run then.
    """
    shown = await pool.run(node, f"systemctl show -p NeedDaemonReload -- {shlex.quote(service.unit)}",
                           wait_s=RESTART_WAIT_S, read_only=True)
    if not parse_show(shown.stdout).need_daemon_reload:
        return True
    out.reload_command = build_reload_command(policy)
    done = await pool.run(node, out.reload_command, limit_s=max(node.timeout, RESTART_LIMIT_S), wait_s=RESTART_WAIT_S)
    if done.exit_status == 0:
        return True
    out.reload_failed = True
    out.exit_status = done.exit_status
    out.stderr = redact_patterns(done.stderr)[-2000:]
    return False


async def execute_restart(pool: NodePool, node: Node, service: Service, policy: AccessPolicy) -> RestartResult:
    """Run the restart command once (never retried), then read the unit's state once.

    When the unit changed on disk without ``daemon-reload``, the configured ``reload_command`` runs first,
    so the restart starts what is on disk.
    """
    command = build_restart_command(policy, service)
    out = RestartResult(command=command)
    try:
        if not await _reload_if_needed(pool, node, service, policy, out):
            return out
    except NodeUnreachable as e:
        out.unreachable, out.busy = e.error.reason, e.error.kind == "busy"
        return out
    try:
        done = await pool.run(node, command, limit_s=max(node.timeout, RESTART_LIMIT_S), wait_s=RESTART_WAIT_S)
    except NodeUnreachable as e:
        out.unreachable, out.busy = e.error.reason, e.error.kind == "busy"
        return out
    out.exit_status = done.exit_status
    out.stderr = redact_patterns(done.stderr)[-2000:]
    out.stdout = redact_patterns(done.stdout)[-2000:]
    out.elapsed_s = done.elapsed_s
    try:
        shown = await pool.run(node, f"systemctl show -p {SHOW_AFTER} -- {shlex.quote(service.unit)}",
                               wait_s=RESTART_WAIT_S, read_only=True)
    except NodeUnreachable:
        return out  # the restart ran; the follow-up probe will see the state
    show = parse_show(shown.stdout)
    out.active_state, out.sub_state, out.result = show.active_state, show.sub_state, show.result
    out.main_pid, out.invocation_id, out.n_restarts = show.main_pid, show.invocation_id, show.n_restarts
    if show.result == "start-limit-hit" or "start-limit-hit" in done.stderr or "too often" in done.stderr:
        out.start_limit_hit = True
        out.fix = (f"find out why it keeps failing (`logs {service.name}`), then on {node.name}: "
                   f"`sudo systemctl reset-failed {service.unit}` and restart again — inferbot does not retry this")
    return out
