"""The probe delivers the facts the bot needs, on simulated nodes of every shape and for every question.

The oracle is a recording (``tests/samples/probe/facts/*.json``) made with the probe as it was before issue
15, which was written differently (one process per section, the whole process tree, no awk): every raw
section (``NodeRaw``) and every ``ServiceState`` the bot built from them, on the same scenarios. (Until
issue 24 a frozen copy of that probe ran beside the current one, case by case; this recording replaced it.)

What differs from one run to the next is named by what the test knows of the node, not by the probe: its
root path (``<root>``), its units' ports (``<port:UNIT>``), the PIDs the simulator started
(``<UNIT:main>``, ``<UNIT:child:N>``; any other ``<pid>``), and the clock, ids and counters (``<time>``,
``<id>``, ``<n>``). The probe's own access-log lines and the periodic stats lines are left out of the
journal, and the process tree is cut to the GPU processes' ancestry (all that reads it:
``attach_gpu_owners``). The watcher's poll asks less than the probe of the recording did (no unit file,
environment, processes, /version, /v1/models); what the watcher and the health watcher read of it must be
the same.

``INFERBOT_RECORD_PROBE_FACTS=1`` rewrites the recording from the current probe: only for a deliberate
change of what the probe delivers, and review the diff.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from handlers.settings import SETTINGS_PROBE
from handlers.status import STATUS_PROBE
from handlers.watcher import WATCH_PROBE
from services.models import ServiceState
from services.node.assemble import NodeFacts, assemble, attach_gpu_owners
from services.node.probe import (
    METRICS_READ_FILTER,
    NodeRaw,
    ProbeOptions,
    ProbeTarget,
    build_script,
    parse_output,
    stdin_for,
)
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
from tests.sshd import free_port
from tests.test_e2e_live import wait_file

FACTS = Path(__file__).parent / "samples" / "probe" / "facts"
RECORD = os.environ.get("INFERBOT_RECORD_PROBE_FACTS") == "1"
ACCESS_LOG = re.compile(r'"(GET|POST) /[^ ]* HTTP/1\.1" \d{3}')
WATCHED = ("state", "reason", "since", "active", "main_pid", "restarts", "invocation_id", "api_url", "unit")
# Keys whose numbers move with the clock or the load (the scrape's time, GPU telemetry, load progress, …).
MOVING = {"now", "since", "at", "power_w", "utilization_pct", "temperature_c", "memory_used_mib", "memory_mib",
          "progress", "eta_seconds", "eta_basis", "throughput", "journal", "body"}
PID_KEYS = {"pid", "ppid", "main_pid", "settings_pid"}
PID_IN_TEXT = re.compile(r"(?<=pid=)\d+|(?<=MainPID=)\d+|(?<=/proc/)\d+(?=/)|(?<=\[)\d+(?=\])|(?<=PID )\d+"
                         r"|\b\d+(?= \([\w:.@+-]+\))")
TIMES = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?: ?[A-Z]{2,4}\b|Z|[+-]\d\d:?\d\d)?"
                   r"|\b\d\d-\d\d \d\d:\d\d:\d\d\b|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?=<time>)")
IDS = re.compile(r"\b[0-9a-f]{32}\b|(?<=JOURNAL_STREAM=)\d+:\d+|(?<=\"created\": )\d+|(?<=modelperm-)[0-9a-f]+")
NUMBER = re.compile(r"(<[^<>\s]*>)|\d+(?:\.\d+)?(?:e[-+]?\d+)?")  # a name given above stays


@dataclass
class Run:
    """What the test knows of the node it asked, from the simulator: the names of what changes per run."""

    root: str
    temp: str  # the random part of the temporary directory the node's root is in (texts may shorten the root)
    ports: dict[str, str] = field(default_factory=dict)  # the port, as text -> its name
    pids: dict[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, node: SimNode) -> Run:
        run = cls(root=str(node.root), temp=node.root.parent.name.rpartition("-")[2])
        for u in node.sc.units:
            name = u.name.replace(str(u.port), "PORT")  # a template's instance may be its port
            run.ports[str(u.port)] = f"<port:{name}>"
            state = node.state(u.name)
            if state.main_pid:
                run.pids[state.main_pid] = f"<{name}:main>"
            for i, pid in enumerate(state.worker_pids):
                run.pids.setdefault(pid, f"<{name}:child:{i}>")
        return run

    def pid(self, value: int | str) -> str:
        return self.pids.get(int(value), "<pid>") if str(value).isdigit() and int(value) > 0 else str(value)

    def text(self, s: str, moving: bool) -> str:
        s = s.replace(self.root, "<root>").replace(self.temp, "<temp>")
        s = PID_IN_TEXT.sub(lambda m: self.pid(m.group(0)), s)
        for port, name in self.ports.items():
            s = re.sub(rf"(?<![\w.-]){port}(?!\w|\.\d)", name, s)
        s = IDS.sub("<id>", TIMES.sub("<time>", s))
        return NUMBER.sub(lambda m: m.group(1) or "<n>", s) if moving else s


def scrub(value: Any, run: Run, key: str = "", moving: bool = False) -> Any:
    """``value`` with what varies per run replaced by names (see the module's docstring)."""
    moving = moving or key in MOVING
    if isinstance(value, dict):
        return {run.text(str(k), False): scrub(v, run, str(k), moving) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, run, key, moving) for v in value]
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if key in PID_KEYS and isinstance(value, int):
        return run.pid(value)
    if isinstance(value, str):
        return run.text(value, moving)
    if moving and isinstance(value, int | float) and not isinstance(value, bool):
        return "<n>"
    return value


def ancestry(raw: NodeRaw, run: Run) -> dict[str, str]:
    """The parents of the GPU processes and theirs, up to the first process the simulator did not start."""
    out: dict[str, str] = {}
    for line in raw.gpu_apps.splitlines():
        pid = int(line.split(",")[0]) if line.split(",")[0].isdigit() else 0
        while pid in raw.parents and run.pid(pid) != "<pid>" and run.pid(pid) not in out:
            out[run.pid(pid)] = run.pid(raw.parents[pid])
            pid = raw.parents[pid]
    return out


def journal_lines(text: str | None) -> list[str] | None:
    """The journal the parsers read, without the probes' own requests and the periodic stats lines."""
    if text is None:
        return None
    return [line for line in text.splitlines() if not ACCESS_LOG.search(line) and "throughput: " not in line]


def states(raw: NodeRaw, targets: list[ProbeTarget]) -> list[ServiceState]:
    """The ``ServiceState`` of each unit, as the cluster builds them."""
    facts = NodeFacts(raw)
    by_unit = {u.unit: u for u in raw.units}
    out = [assemble(t.unit, "node", by_unit[t.unit], facts, [KIMI_API_KEY]) for t in targets if t.unit in by_unit]
    attach_gpu_owners(out, facts)
    return out


def digest(raw: NodeRaw, targets: list[ProbeTarget], run: Run) -> dict[str, Any]:
    """Every section and every ``ServiceState``, named and cut as the module's docstring says."""
    node = raw.model_dump(mode="json", exclude={"units", "parents", "gpus", "gpu_apps"})
    # nvidia-smi's GPUs (index, name, uuid, memory total) and their processes (pid, name, uuid): the rest is
    # telemetry.
    node["gpus"] = [[c for i, c in enumerate(line.split(", ")) if i in (0, 1, 2, 4)] for line in raw.gpus.splitlines()]
    node["gpu_apps"] = [[run.pid(c) if i == 0 else c for i, c in enumerate(line.split(", ")) if i != 2]
                        for line in raw.gpu_apps.splitlines()]
    node["ancestry"] = ancestry(raw, run)
    units = []
    for u in raw.units:
        unit = u.model_dump(exclude={"journal", "logs", "procs"})
        unit["journal"] = journal_lines(u.journal)
        unit["log_lines"] = None if u.logs is None else len(u.logs.splitlines())
        unit["procs"] = sorted(json.dumps(scrub(p.model_dump(), run)) for p in u.procs)
        units.append(unit)
    found = [s.model_dump(mode="json") for s in states(raw, targets)]
    for s in found:  # the newest lines: which ones they are moves with the clock
        s["logs"] = None if s["logs"] is None else len(s["logs"])
    return scrub({"node": node, "units": units, "states": found}, run)


def watched(d: dict[str, Any]) -> dict[str, Any]:
    """What the watcher and the health watcher read of an answer."""
    return {"states": [{k: s[k] for k in WATCHED} for s in d["states"]],
            "units": [{k: u[k] for k in ("unit", "show_rc", "show", "url", "health", "metrics")} for u in d["units"]]}


READ_FAMILIES = re.compile(METRICS_READ_FILTER.split("|[0-9]")[0] + ")")  # the families, without the status line


def read_metrics(d: dict[str, Any]) -> dict[str, Any]:
    """An answer as a question that reads only some /metrics families sees it: each scrape's lines of those
    families. Applied to the recorded whole scrapes and to what the node sent, so the node is seen to keep every
    line of them (that it sends nothing else is test_probe_wire's)."""
    out = copy.deepcopy(d)
    for u in out["units"]:
        for m in u["metrics"]:
            m["probe"]["body"] = "\n".join(x for x in m["probe"]["body"].split("\n") if READ_FAMILIES.match(x))
    return out


async def sh(node: SimNode, script: str, stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", script, env={**os.environ, **node.shell_env()}, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate((stdin or "").encode()), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


class Recording:
    """One case's recorded digests, by question; checked, or written with INFERBOT_RECORD_PROBE_FACTS=1."""

    def __init__(self, case: str) -> None:
        self.path = FACTS / f"{case}.json"
        self.got: dict[str, Any] = {}
        self.want: dict[str, Any] = {} if RECORD else json.loads(self.path.read_text())

    async def check(self, question: str, node: SimNode, targets: list[ProbeTarget], options: ProbeOptions,
                    keys: list[str | None] | None = None, tries: int = 3) -> NodeRaw:
        """The probe's answer to ``question`` is the recorded one (a load in progress may be mid-change: then
        ask again)."""
        for attempt in range(tries):
            stdin = stdin_for(targets, keys) if keys else None
            raw = parse_output(await sh(node, build_script(targets, options), stdin))
            assert raw.complete
            got = digest(raw, targets, Run.of(node))
            if options.metrics_read:
                got = read_metrics(got)
            if options is WATCH_PROBE:
                got = watched(got)
                for u in raw.units if not RECORD else []:  # it asks less
                    assert not u.cat and u.environ is None and not u.files and u.version is None and u.models is None
            self.got[question] = got
            want = self.want.get(question)
            if want is not None and options.metrics_read:
                want = read_metrics(want)
            if RECORD or got == want or attempt == tries - 1:
                break
            await asyncio.sleep(0.5)
        if not RECORD:
            want = read_metrics(self.want[question]) if options.metrics_read else self.want[question]
            assert json.dumps(got, indent=1, sort_keys=True) == json.dumps(want, indent=1, sort_keys=True)
        return raw

    def save(self) -> None:
        if RECORD:
            FACTS.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.fixture
async def started() -> AsyncIterator[Callable[[NodeScenario], Any]]:
    nodes: list[SimNode] = []

    async def start(scenario: NodeScenario) -> SimNode:
        root = Path(tempfile.mkdtemp(prefix="inferbot-facts-")) / "node"  # see Run.temp
        node = SimNode(root, scenario)
        nodes.append(node)
        await node.start()
        return node

    yield start
    for n in nodes:
        await n.stop()


def stats_often(scenario: NodeScenario) -> NodeScenario:
    """vLLM's periodic stats line (the live throughput's source) every second instead of every ten."""
    for u in scenario.units:
        u.profile.stats_interval_s = 1.0
    return scenario


def without_stats(node: SimNode, log_file: Path | None) -> list[str]:
    """The units that have not logged a stats line yet (in the journal, or in ``log_file``: the file-log unit's)."""
    journal = node.journal_path().read_text(errors="replace")
    logged = log_file.read_text(errors="replace") if log_file is not None and log_file.exists() else ""
    return [u.name for u in node.sc.units
            if not any(f"\t{u.name}\t" in line and "throughput: " in line for line in journal.splitlines())
            and not ("filelog" in u.name and "throughput: " in logged)]


async def wait_stats(node: SimNode, log_file: Path | None = None, limit: float = 45) -> None:
    """Every unit has logged a stats line: whether an answer has a throughput then does not depend on when it
    was asked."""
    deadline = asyncio.get_running_loop().time() + limit
    while missing := without_stats(node, log_file):
        assert asyncio.get_running_loop().time() < deadline, f"no stats line of {missing}"
        await asyncio.sleep(0.1)


async def test_kimi_ready_every_question(started: Callable[[NodeScenario], Any]) -> None:
    kimi: SimNode = await started(kimi_node(fast=True, port=free_port()))
    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    await wait_file(kimi.journal_path(), "Avg prompt throughput")  # the live throughput's first stats line
    facts = Recording("kimi-ready")
    target = [ProbeTarget(unit=KIMI_UNIT, bench_dir=kimi.bench_dir)]
    raw = await facts.check("settings", kimi, target, SETTINGS_PROBE)
    u = raw.units[0]
    assert u.version is not None and u.models is not None and len(u.bench_files) == 4 and u.files and u.cat
    raw = await facts.check("status", kimi, target, STATUS_PROBE)
    assert len(raw.units[0].metrics) == 2 and raw.units[0].metrics[0].probe.status == 200
    sent = [x for m in raw.units[0].metrics for x in m.probe.body.splitlines() if x]
    assert all(re.match(METRICS_READ_FILTER, x) for x in sent)  # only what the answer reads ...
    assert any(x.startswith("vllm:time_to_first_token_seconds_bucket{") for x in sent)  # ... latencies included
    await facts.check("check", kimi, target, ProbeOptions(journal_lines=5))  # inferbot check
    raw = await facts.check("charts", kimi, target, ProbeOptions(gpus=False, journal_lines=0, bench=True))
    assert len(raw.units[0].bench_files) == 4
    raw = await facts.check("logs", kimi, target, ProbeOptions(journal_lines=0, log_lines=20, gpus=False))
    assert raw.units[0].logs and len(raw.units[0].logs.splitlines()) == 20
    keyed = [ProbeTarget(unit=KIMI_UNIT, models=True)]
    raw = await facts.check("models with the key", kimi, keyed, ProbeOptions(journal_lines=0, gpus=False, models=True),
                            keys=[KIMI_API_KEY])
    assert raw.units[0].models is not None and raw.units[0].models.status == 200 and raw.units[0].models_keyed
    await facts.check("settings, api_url configured", kimi,
                      [ProbeTarget(unit=KIMI_UNIT, api_url=kimi.api_url(KIMI_UNIT))], SETTINGS_PROBE)
    await facts.check("watch", kimi, target, WATCH_PROBE)
    # discovery (a node with no services configured)
    raw = await facts.check("discovery", kimi, [], ProbeOptions(discover=True, gpus=False, journal_lines=0))
    assert raw.discovered == [KIMI_UNIT]
    # a unit that does not exist, and a stopped one
    await kimi.stop_unit(KIMI_UNIT)
    await facts.check("stopped, and a unit that does not exist", kimi,
                      [*target, ProbeTarget(unit="nope.service")], SETTINGS_PROBE)
    await facts.check("watch, stopped", kimi, target, WATCH_PROBE)
    facts.save()


async def test_kimi_loading(started: Callable[[NodeScenario], Any]) -> None:
    kimi: SimNode = await started(kimi_node(port=free_port()))
    await kimi.wait_for(KIMI_UNIT, "loading", 20)
    await wait_file(kimi.journal_path(), "Completed |")
    facts = Recording("kimi-loading")
    target = [ProbeTarget(unit=KIMI_UNIT, bench_dir=kimi.bench_dir)]
    raw = await facts.check("settings", kimi, target, SETTINGS_PROBE)
    assert raw.units[0].health is not None and raw.units[0].health.curl_exit == 7 and raw.units[0].version is None
    await facts.check("watch", kimi, target, WATCH_PROBE)
    facts.save()


async def test_odd_units(started: Callable[[NodeScenario], Any]) -> None:
    """bash -c, docker run (-p: the port the URL is derived from), a log file instead of the journal, %i."""
    sc = NodeScenario(units=[bash_unit(port=free_port())])
    sc.units += [docker_unit(port=free_port()), file_log_unit(port=free_port()), template_unit(str(free_port()))]
    sc.gpus.count = 4
    for i, u in enumerate(sc.units):
        u.gpu_indices = [i]
    node: SimNode = await started(stats_often(sc))
    for u in sc.units:
        await node.wait_for(u.name, "ready", 45)
    log_file = node.root / "var/log/vllm/filelog.log"
    await wait_stats(node, log_file)
    targets = [ProbeTarget(unit=u.name, log_file=str(log_file) if "filelog" in u.name else None) for u in sc.units]
    facts = Recording("odd-units")
    raw = await facts.check("settings", node, targets, SETTINGS_PROBE)
    assert all(u.health is not None and u.health.status == 200 for u in raw.units)
    await facts.check("watch", node, targets, WATCH_PROBE)
    facts.save()


async def test_launchers(started: Callable[[NodeScenario], Any]) -> None:
    """Wrappers that stay the parent (sudo -u, uv run, a Python launcher): the server is a child, its argv,
    environment and port are read from the unit's other processes."""
    units = [sudo_unit(port=free_port()), numactl_unit(port=free_port()), uv_unit(port=free_port()),
             python_launcher_unit(port=free_port()), opaque_unit(port=free_port())]
    node: SimNode = await started(stats_often(launcher_node(units)))
    for u in units:
        await node.wait_for(u.name, "ready", 45)
    await wait_stats(node)
    targets = [ProbeTarget(unit=u.name) for u in units]
    facts = Recording("launchers")
    raw = await facts.check("settings", node, targets, SETTINGS_PROBE)
    assert any(u.child_environ is not None for u in raw.units) and any(p.argv for u in raw.units for p in u.procs)
    assert all(u.health is not None and u.health.status == 200 for u in raw.units)
    await facts.check("watch", node, targets, WATCH_PROBE)
    facts.save()
