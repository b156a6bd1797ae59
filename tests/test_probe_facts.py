"""The light probe (issue 15) delivers the same facts as the probe before it, on the same simulated nodes.

Each case runs the old probe (``tests/samples/probe_before15.py``) and the new one back to back on one node
and compares what the bot gets from them: every raw section (``NodeRaw``) and every ``ServiceState`` built
from them. What legitimately differs between two runs a moment apart is set aside first: the clock, the
access-log lines the probes' own HTTP requests add to the journal, ``created`` and the permission id in
``/v1/models``, the scrape times. The one deliberate change: the node's process tree is now sent only for
the GPU processes and their ancestors (all that reads it: ``attach_gpu_owners``), checked against the
full one.

The watcher's poll asks less than before (no unit file, environment, processes, /version, /v1/models);
what the watcher and the health watcher read from it must be the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from handlers.settings import SETTINGS_PROBE
from handlers.status import STATUS_PROBE
from handlers.watcher import WATCH_PROBE
from services.models import ServiceState
from services.node.assemble import NodeFacts, assemble, attach_gpu_owners
from services.node.probe import NodeRaw, ProbeOptions, ProbeTarget, build_script, parse_output, stdin_for
from services.sim.node import SimNode
from services.sim.scenarios import (
    KIMI_API_KEY,
    KIMI_UNIT,
    NodeScenario,
    bash_unit,
    docker_unit,
    file_log_unit,
    kimi_node,
    launcher_node,
    numactl_unit,
    opaque_unit,
    python_launcher_unit,
    sudo_unit,
    template_unit,
    uv_unit,
)
from tests.samples import probe_before15 as old
from tests.sshd import free_port

ACCESS_LOG = re.compile(r'^.*"(GET|POST) /[^ ]* HTTP/1\.1" \d{3}.*\n?', re.MULTILINE)
WATCHED = ("state", "reason", "since", "active", "main_pid", "restarts", "invocation_id", "api_url", "unit")


async def sh(node: SimNode, script: str, stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", script, env={**os.environ, **node.shell_env()}, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate((stdin or "").encode()), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def both(node: SimNode, targets: list[ProbeTarget], options: ProbeOptions,
               keys: list[str | None] | None = None) -> tuple[NodeRaw, NodeRaw]:
    """(old, new) raw answers to the same question, a moment apart."""
    stdin = stdin_for(targets, keys) if keys else None
    old_targets = [old.ProbeTarget(**t.model_dump()) for t in targets]
    known = old.ProbeOptions.model_fields
    old_options = old.ProbeOptions(**{k: v for k, v in options.model_dump().items() if k in known})
    before = await sh(node, old.build_script(old_targets, old_options), stdin)
    after = await sh(node, build_script(targets, options), stdin)
    raw_old = NodeRaw.model_validate(old.parse_output(before).model_dump())
    raw_new = parse_output(after)
    assert raw_old.complete and raw_new.complete
    return raw_old, raw_new


def normalized(raw: NodeRaw, like: NodeRaw) -> NodeRaw:
    """``raw`` without what differs between two runs: the clock (``like``'s), the probes' own access-log
    lines, ids and times in /v1/models, scrape times; the process tree cut to the GPU ancestry ``like`` has."""
    out = raw.model_copy(deep=True)
    out.now = like.now
    out.parents = {pid: ppid for pid, ppid in out.parents.items() if pid in like.parents}
    for u, v in zip(out.units, like.units, strict=True):
        if u.journal is not None:
            u.journal = ACCESS_LOG.sub("", u.journal)
        if u.logs is not None and v.logs is not None:  # the newest lines: as many as both runs have
            mine, theirs = (ACCESS_LOG.sub("", x).splitlines() for x in (u.logs, v.logs))
            u.logs = "\n".join(mine[len(mine) - min(len(mine), len(theirs)):])
        if u.models is not None:
            u.models.body = re.sub(r'"created": \d+|"modelperm-[0-9a-f]+"', "0", u.models.body)
        for m in u.metrics:
            m.at = 0.0
    return out


def states(raw: NodeRaw, targets: list[ProbeTarget]) -> list[dict[str, Any]]:
    """The ``ServiceState`` of each unit, as the cluster builds them (minus the clock-derived ages)."""
    facts = NodeFacts(raw)
    by_unit = {u.unit: u for u in raw.units}
    out: list[ServiceState] = [assemble(t.unit, "node", by_unit[t.unit], facts, [KIMI_API_KEY])
                               for t in targets if t.unit in by_unit]
    attach_gpu_owners(out, facts)
    return [json.loads(s.model_dump_json()) for s in out]


def check_ancestry(full: NodeRaw, cut: NodeRaw) -> None:
    """The new process tree is the GPU processes and their ancestors, as the full one says."""
    gpu_pids = {int(line.split(",")[0]) for line in cut.gpu_apps.splitlines() if line.split(",")[0].isdigit()}
    for pid in gpu_pids & set(full.parents):
        while pid in full.parents and pid > 1:
            assert cut.parents.get(pid) == full.parents[pid], pid
            pid = full.parents[pid]


async def same_facts(node: SimNode, targets: list[ProbeTarget], options: ProbeOptions,
                     keys: list[str | None] | None = None, tries: int = 3) -> NodeRaw:
    """Old and new probes agree (a load in progress may move between the two runs: then ask again)."""
    for attempt in range(tries):
        raw_old, raw_new = await both(node, targets, options, keys)
        check_ancestry(raw_old, raw_new)
        a, b = normalized(raw_old, raw_new), normalized(raw_new, raw_new)
        if a == b and states(a, targets) == states(b, targets):
            return raw_new
        if attempt == tries - 1:
            assert a.model_dump(mode="json") == b.model_dump(mode="json")
            assert states(a, targets) == states(b, targets)
        await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def same_watch(node: SimNode, targets: list[ProbeTarget], tries: int = 3) -> None:
    """What the watcher and the health watcher read from the poll is what they read from the old, fuller one."""
    for attempt in range(tries):
        raw_old, raw_new = await both(node, targets, WATCH_PROBE)
        a, b = normalized(raw_old, raw_new), normalized(raw_new, raw_new)
        seen = ([{k: s[k] for k in WATCHED} for s in states(a, targets)],
                [{k: s[k] for k in WATCHED} for s in states(b, targets)])
        samples = ([(u.unit, u.show_rc, u.show, u.url, u.health, u.metrics) for u in a.units],
                   [(u.unit, u.show_rc, u.show, u.url, u.health, u.metrics) for u in b.units])
        if (seen[0] == seen[1] and samples[0] == samples[1]) or attempt == tries - 1:
            assert seen[0] == seen[1]
            assert samples[0] == samples[1]
            for u in raw_new.units:  # and it asks less
                assert not u.cat and u.environ is None and not u.files and u.version is None and u.models is None
            return
        await asyncio.sleep(0.2)


@pytest.fixture
async def started() -> AsyncIterator[Callable[[NodeScenario], Any]]:
    nodes: list[SimNode] = []

    async def start(scenario: NodeScenario) -> SimNode:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="inferbot-facts-")) / "node"
        node = SimNode(root, scenario)
        nodes.append(node)
        await node.start()
        return node

    yield start
    for n in nodes:
        await n.stop()


async def test_kimi_ready_every_question(started: Callable[[NodeScenario], Any]) -> None:
    kimi: SimNode = await started(kimi_node(fast=True, port=free_port()))
    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    target = [ProbeTarget(unit=KIMI_UNIT, bench_dir=kimi.bench_dir)]
    raw = await same_facts(kimi, target, SETTINGS_PROBE)
    u = raw.units[0]
    assert u.version is not None and u.models is not None and len(u.bench_files) == 4 and u.files and u.cat
    raw = await same_facts(kimi, target, STATUS_PROBE)
    assert len(raw.units[0].metrics) == 2 and raw.units[0].metrics[0].probe.status == 200
    await same_facts(kimi, target, ProbeOptions(journal_lines=5))  # inferbot check
    raw = await same_facts(kimi, target, ProbeOptions(gpus=False, journal_lines=0, bench=True))  # charts
    assert len(raw.units[0].bench_files) == 4
    await same_facts(kimi, target, ProbeOptions(journal_lines=0, log_lines=20, gpus=False))  # logs
    keyed = [ProbeTarget(unit=KIMI_UNIT, models=True)]
    raw = await same_facts(kimi, keyed, ProbeOptions(journal_lines=0, gpus=False, models=True), keys=[KIMI_API_KEY])
    assert raw.units[0].models is not None and raw.units[0].models.status == 200 and raw.units[0].models_keyed
    await same_facts(kimi, [ProbeTarget(unit=KIMI_UNIT, api_url=kimi.api_url(KIMI_UNIT))], SETTINGS_PROBE)
    await same_watch(kimi, target)
    # discovery (a node with no services configured)
    raw = await same_facts(kimi, [], ProbeOptions(discover=True, gpus=False, journal_lines=0))
    assert raw.discovered == [KIMI_UNIT]
    # a unit that does not exist, and a stopped one
    await kimi.stop_unit(KIMI_UNIT)
    await same_facts(kimi, [*target, ProbeTarget(unit="nope.service")], SETTINGS_PROBE)
    await same_watch(kimi, target)


async def test_kimi_loading(started: Callable[[NodeScenario], Any]) -> None:
    kimi: SimNode = await started(kimi_node(port=free_port()))
    await kimi.wait_for(KIMI_UNIT, "loading", 20)
    target = [ProbeTarget(unit=KIMI_UNIT, bench_dir=kimi.bench_dir)]
    raw = await same_facts(kimi, target, SETTINGS_PROBE)
    assert raw.units[0].health is not None and raw.units[0].health.curl_exit == 7 and raw.units[0].version is None
    await same_watch(kimi, target)


async def test_odd_units(started: Callable[[NodeScenario], Any]) -> None:
    """bash -c, docker run (-p: the port the URL is derived from), a log file instead of the journal, %i."""
    sc = NodeScenario(units=[bash_unit(port=free_port())])
    sc.units += [docker_unit(port=free_port()), file_log_unit(port=free_port()), template_unit(str(free_port()))]
    sc.gpus.count = 4
    for i, u in enumerate(sc.units):
        u.gpu_indices = [i]
    node: SimNode = await started(sc)
    for u in sc.units:
        await node.wait_for(u.name, "ready", 45)
    targets = [ProbeTarget(unit=u.name, log_file=str(node.root / "var/log/vllm/filelog.log") if "filelog" in u.name
                           else None) for u in sc.units]
    raw = await same_facts(node, targets, SETTINGS_PROBE)
    assert all(u.health is not None and u.health.status == 200 for u in raw.units)
    await same_watch(node, targets)


async def test_launchers(started: Callable[[NodeScenario], Any]) -> None:
    """Wrappers that stay the parent (sudo -u, uv run, a Python launcher): the server is a child, its argv,
    environment and port are read from the unit's other processes."""
    units = [sudo_unit(port=free_port()), numactl_unit(port=free_port()), uv_unit(port=free_port()),
             python_launcher_unit(port=free_port()), opaque_unit(port=free_port())]
    node: SimNode = await started(launcher_node(units))
    for u in units:
        await node.wait_for(u.name, "ready", 45)
    targets = [ProbeTarget(unit=u.name) for u in units]
    raw = await same_facts(node, targets, SETTINGS_PROBE)
    assert any(u.child_environ is not None for u in raw.units) and any(p.argv for u in raw.units for p in u.procs)
    assert all(u.health is not None and u.health.status == 200 for u in raw.units)
    await same_watch(node, targets)
