"""Ask every node at once: one probe round trip per node, per-node timeout, typed results."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from pydantic import Field

from config.models import BotConfig, Node, Service
from services.models import CommandResult, GpuInfo, GpuProcess, Model, NodeError, ServiceState
from services.node.assemble import NodeFacts, assemble, attach_gpu_owners
from services.node.probe import (
    NodeRaw,
    ProbeOptions,
    ProbeTarget,
    parse_output,
    probe_command,
    session_answer_end,
    session_command,
    stdin_for,
)
from services.node.ssh import NodePool, NodeUnreachable

log = logging.getLogger("inferbot.cluster")


class NodeReport(Model):
    """What one node said (or why it said nothing)."""

    node: str
    ok: bool
    error: NodeError | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    processes: list[GpuProcess] = Field(default_factory=list)
    leftovers: list[GpuProcess] = Field(default_factory=list)
    elapsed_s: float = 0.0
    discovered: list[str] | None = None


class Snapshot(Model):
    """The answer to one probe of the cluster."""

    services: list[ServiceState] = Field(default_factory=list)
    nodes: list[NodeReport] = Field(default_factory=list)
    elapsed_s: float = 0.0


def discovered_name(unit: str) -> str:
    """The name people type for a discovered unit: its unit name without ``.service``."""
    return unit.removesuffix(".service").lower().replace("@", "-").replace("_", "-").replace(".", "-")


NodeAnswer = tuple[NodeReport, list[ServiceState], NodeRaw | None]
"""What :meth:`Cluster.probe_node` returns: the node's report, its services' records, its decoded output."""
# What makes two probes of a node the same question: the node, each service's name and what is asked of its unit,
# the options, what the caller keeps, how long it waits inside the bot, and the API keys (they go on stdin).
FlightKey = tuple[Node, tuple[tuple[str, str, str | None, str | None, str | None], ...], ProbeOptions, bool, bool,
                  float | None, tuple[str | None, ...]]


class _OwnerGone(Exception):
    """The question that was asking the node for everyone was called off: whoever waited for it asks again."""


@dataclass
class _Flight:
    """One probe of a node in progress, and the questions waiting for its answer."""

    generation: int  # the node's ``NodePool.generation`` when it was asked
    waiters: list[asyncio.Future[NodeAnswer]] = field(default_factory=list)


class Cluster:
    """Probes nodes over the pool; knows nothing of Slack or rendering."""

    def __init__(self, config: BotConfig, pool: NodePool) -> None:
        self.config = config
        self.pool = pool
        self._flights: dict[FlightKey, _Flight] = {}

    async def probe_node(
        self, node: Node, services: Sequence[Service], options: ProbeOptions, keep_raw: bool = True,
        node_gpus: bool = True, wait_s: float | None = None,
    ) -> NodeAnswer:
        """One round trip to ``node`` for ``services`` (or discovery when none are configured).

        The node's decoded output comes back too unless ``keep_raw`` is False (then None): a snapshot of
        hundreds of nodes does not keep every node's output alive until the last node has answered.
        ``node_gpus`` False leaves the node's own GPU and process lists out of its report (the services'
        GPUs are kept): only the GPU answer reads them, and they were a third of a node's records.
        ``wait_s``: how long the question may wait inside the bot before the node reads "busy"
        (``NodePool.run``; a restart waits longer than a question).

        Single-flight: the same question of the same node asked while it is being asked (same services,
        options, API keys, ``keep_raw``, ``node_gpus`` and ``wait_s``) waits for that one probe — one SSH
        command — and gets its own copy of its answer (records are the caller's to change). A question asked
        after the probe started shares it too: the answer is read after the question was asked, or up to one
        probe's time before it, as if it had been asked a moment earlier. Never when this bot ran a command that
        may change the node (a restart) since that probe started (``NodePool.generation``): then it asks anew.
        """
        keys = tuple(_api_key(s) for s in services)
        key: FlightKey = (node, tuple((s.name, s.unit, s.api_url, s.log_file, s.bench_dir) for s in services),
                          options, keep_raw, node_gpus, wait_s, keys)
        while (flight := self._flights.get(key)) is not None and flight.generation == self.pool.generation(node):
            waiter: asyncio.Future[NodeAnswer] = asyncio.get_running_loop().create_future()
            flight.waiters.append(waiter)
            try:
                return await waiter
            except _OwnerGone:
                continue  # the question asking for everyone was called off: ask (or join) anew
        flight = self._flights[key] = _Flight(self.pool.generation(node))
        try:
            answer = await self._probe_node(node, services, options, keep_raw, node_gpus, wait_s, keys)
        except BaseException as e:
            for w in flight.waiters:
                if not w.done():
                    w.set_exception(_OwnerGone() if isinstance(e, asyncio.CancelledError) else e)
            raise
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]
        # Each waiter gets its own copy, made now, before any caller can change the records it was handed.
        for w in flight.waiters:
            if not w.done():
                w.set_result(_copy(answer))
        return answer

    async def _probe_node(
        self, node: Node, services: Sequence[Service], options: ProbeOptions, keep_raw: bool, node_gpus: bool,
        wait_s: float | None, keys: tuple[str | None, ...],
    ) -> NodeAnswer:
        """:meth:`probe_node`, asked of the node."""
        discover = not services and not any(s.node == node.name for s in self.config.services)
        opts = options.model_copy(update={"discover": discover})
        started = time.monotonic()
        try:
            result = await self._ask(node, services, opts, wait_s, keys)
        except NodeUnreachable as e:
            err = e.error
            states = [
                ServiceState(service=s.name, node=node.name, unit=s.unit, state="unreachable",
                             reason=err.reason, fix=err.fix or None, reason_kind="busy" if err.kind == "busy" else None)
                for s in services
            ]
            return NodeReport(node=node.name, ok=False, error=err, elapsed_s=time.monotonic() - started), states, None
        raw = parse_output(result.stdout)
        elapsed = time.monotonic() - started
        if raw.now is None:
            first = (result.stderr or result.stdout).strip().splitlines()
            said = first[0] if first else "no output"
            err = NodeError(kind="protocol", reason=f"the node's shell did not run the probe: {said}",
                            fix="the login shell must be able to run `sh -c`; check the account's shell")
            failed = [ServiceState(service=s.name, node=node.name, unit=s.unit, state="unreachable", reason=err.reason,
                                   fix=err.fix) for s in services]
            return NodeReport(node=node.name, ok=False, error=err, elapsed_s=elapsed), failed, raw if keep_raw else None
        report, states = _read_answer(node, services, raw, opts, [k for k in keys if k], node_gpus, elapsed)
        return report, states, raw if keep_raw else None

    async def _ask(self, node: Node, services: Sequence[Service], opts: ProbeOptions, wait_s: float | None,
                   keys: tuple[str | None, ...]) -> CommandResult:
        """Run the probe on the node: on the pool's long-lived session for a persistent probe (the watcher's,
        on the scheduler's leader: one newline and its answer per poll, the script sent once), else one exec."""
        timeout = node.timeout + (opts.metrics_interval_s * max(0, opts.metrics_samples - 1))
        if opts.persistent and self.pool.sessions:
            targets = tuple(ProbeTarget(unit=s.unit, api_url=s.api_url, log_file=s.log_file,
                                        bench_dir=s.bench_dir) for s in services)
            return await self.pool.ask(node, session_command(targets, opts), session_answer_end,
                                       limit_s=timeout, wait_s=wait_s)
        probe = [
            ProbeTarget(unit=s.unit, api_url=s.api_url, log_file=s.log_file, bench_dir=s.bench_dir,
                        models=key is not None)  # /v1/models is always asked: with the key when held
            for s, key in zip(services, keys, strict=True)
        ]
        return await self.pool.run(node, probe_command(tuple(probe), opts), limit_s=timeout,
                                   stdin=stdin_for(probe, list(keys)), wait_s=wait_s, read_only=True)

    async def answers(
        self, services: Sequence[Service], nodes: Sequence[Node], options: ProbeOptions | None = None,
        node_gpus: bool = True, batch: int = 64, wait_s: float | None = None,
    ) -> AsyncIterator[list[tuple[int, NodeReport, list[ServiceState]]]]:
        """What :meth:`snapshot` gathers, handed over as the nodes answer: batches of up to ``batch`` nodes
        (their index in ``nodes``, report and records), in the order they answered; every node exactly once.

        For answers about many nodes: a caller that turns each batch into cards and lets its records go never
        holds every record at once (at 512 nodes, ~9 MB of the answer's peak). All nodes are asked at once, as
        by :meth:`snapshot`, and keep answering while the caller works on a batch. Closing the iterator early
        cancels the questions still out.
        """
        opts = options or ProbeOptions()
        by_node: dict[str, list[Service]] = {}
        for s in services:
            by_node.setdefault(s.node, []).append(s)
        done: asyncio.Queue[tuple[int, NodeReport, list[ServiceState]]] = asyncio.Queue()

        async def ask(i: int, node: Node) -> None:
            report, states, _raw = await self.probe_node(node, by_node.get(node.name, []), opts, keep_raw=False,
                                                         node_gpus=node_gpus, wait_s=wait_s)
            done.put_nowait((i, report, states))

        tasks = [asyncio.create_task(ask(i, node)) for i, node in enumerate(nodes)]
        try:
            left = len(tasks)
            while left:
                got = [await done.get()]
                while len(got) < batch and not done.empty():
                    got.append(done.get_nowait())
                left -= len(got)
                yield got
                del got
        finally:
            # Left early (the caller stopped, or was cancelled): the questions still out are called off.
            # probe_node turns every failure into a report: a task ends by answering or by being cancelled.
            pending = [t for t in tasks if not t.done()]
            tasks.clear()
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def snapshot(
        self, services: Sequence[Service], nodes: Sequence[Node], options: ProbeOptions | None = None,
        node_gpus: bool = True, wait_s: float | None = None,
    ) -> Snapshot:
        """Probe ``nodes`` (all at once) for ``services``; slow or dead nodes become ``unreachable``.

        :meth:`answers`, gathered: every report and record at once, in the order of ``nodes``.
        ``node_gpus``: see :meth:`probe_node` (answers about services leave the nodes' GPU lists out);
        ``wait_s`` too.
        """
        started = time.monotonic()
        reports: list[NodeReport | None] = [None] * len(nodes)
        found: list[list[ServiceState]] = [[] for _ in nodes]
        async for batch in self.answers(services, nodes, options, node_gpus, batch=max(1, len(nodes)), wait_s=wait_s):
            for i, report, states in batch:
                reports[i], found[i] = report, states
        snap = Snapshot(elapsed_s=0.0, nodes=[r for r in reports if r is not None])
        for states in found:
            snap.services.extend(states)
        found.clear()
        snap.elapsed_s = time.monotonic() - started
        return snap


def _api_key(service: Service) -> str | None:
    """The API key the bot holds for ``service`` (from the variable ``api_key_env`` names), if any."""
    if service.api_key_env:
        return os.environ.get(service.api_key_env) or None
    return None


def _copy(answer: NodeAnswer) -> NodeAnswer:
    """A waiter's own copy of a shared answer (the decoded output is only ever read: it is shared)."""
    report, states, raw = answer
    return report.model_copy(deep=True), [st.model_copy(deep=True) for st in states], raw


def held_api_key(service: Service) -> str | None:
    """The API key the bot holds for ``service``, if any (the smoke completion and the benchmark send it)."""
    return _api_key(service)


def _read_answer(node: Node, services: Sequence[Service], raw: NodeRaw, opts: ProbeOptions, secrets: list[str],
                 node_gpus: bool, elapsed: float) -> tuple[NodeReport, list[ServiceState]]:
    """What a node that ran the probe said: each asked (or discovered) service's state and the node's report."""
    facts = NodeFacts(raw)
    by_unit = {u.unit: u for u in raw.units}
    states = []
    if opts.discover:
        for u in raw.units:
            states.append(assemble(discovered_name(u.unit), node.name, u, facts, secrets, opts.settings))
    for s in services:
        found = by_unit.get(s.unit)
        if found is None:
            states.append(ServiceState(service=s.name, node=node.name, unit=s.unit, state="unreachable",
                                       reason="the probe was cut short before this unit (node too slow?)"))
            continue
        states.append(assemble(s.name, node.name, found, facts, secrets, opts.settings))
    leftovers = attach_gpu_owners(states, facts)
    if not raw.complete:
        log.warning("probe output from %s was incomplete", node.name)
    report = NodeReport(node=node.name, ok=True, gpus=facts.gpus if node_gpus else [],
                        processes=facts.processes if node_gpus else [], leftovers=leftovers, elapsed_s=elapsed,
                        discovered=raw.discovered)
    return report, states
