"""The exact commands inferbot sends, built from the config the bot reads: every contender sends the same."""

from __future__ import annotations

import asyncio

from config.loader import load_config
from config.models import Node
from handlers.settings import SETTINGS_PROBE
from services.cluster import Cluster
from services.models import CommandResult, NodeError
from services.node.probe import ProbeTarget, build_script, remote_command
from services.node.ssh import AnswerEnd, NodePool, NodeUnreachable


def settings_commands(config_path: str) -> dict[str, str]:
    """Node name -> the exact command inferbot sends for the settings question (as in ``Cluster.probe_node``)."""
    config = load_config(config_path)
    out: dict[str, str] = {}
    for node in config.nodes:
        services = [s for s in config.services if s.node == node.name]
        targets = [ProbeTarget(unit=s.unit, api_url=s.api_url, log_file=s.log_file, bench_dir=s.bench_dir)
                   for s in services]
        opts = SETTINGS_PROBE.model_copy(update={"discover": not services})
        out[node.name] = remote_command(build_script(targets, opts))
    return out


class _RecordingPool(NodePool):
    """A pool that only notes what would be sent (command and stdin) and reaches no node."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, tuple[str, str | None]] = {}

    async def run(self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                  wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        self.sent[node.name] = (command, stdin)
        raise NodeUnreachable(NodeError(kind="other", reason="recorded, not sent", fix=""))

    async def ask(self, node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                  wait_s: float | None = None) -> CommandResult:
        self.sent[node.name] = (command, None)  # a session's stdin is the trigger: one newline per answer
        raise NodeUnreachable(NodeError(kind="other", reason="recorded, not sent", fix=""))


def watch_commands(config_path: str, persistent: bool = False) -> dict[str, tuple[str, str | None]]:
    """Node name -> (command, stdin) the unplanned-restart watcher sends: taken from ``Cluster.probe_node``
    with ``handlers.watcher.WATCH_PROBE`` itself, so it follows whatever the product builds.

    ``persistent``: the command of the leader's persistent session instead (``NodePool.ask``: it answers once
    per newline written to it), not the one-shot command a pool without sessions runs.
    """
    # Imported here: handlers.watcher brings the store (SQLAlchemy), which would raise this runner's own RSS,
    # and so the floor below which a child's ru_maxrss cannot be told from ours (see report.RSS_CAVEAT).
    from handlers.watcher import WATCH_PROBE

    config = load_config(config_path)
    pool = _RecordingPool()
    pool.keep_sessions(persistent)
    cluster = Cluster(config, pool)

    async def all_nodes() -> None:
        for node in config.nodes:
            services = [s for s in config.services if s.node == node.name]
            await cluster.probe_node(node, services, WATCH_PROBE)

    asyncio.run(all_nodes())
    return dict(pool.sent)
