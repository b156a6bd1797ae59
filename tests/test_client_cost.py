"""The bot's own cost per node (issue 15): what keeps it low must not change what it answers.

Uses probe answers recorded from the simulated Kimi node (``tests/samples/probe``, written by
``python -m bench.profile_client record``) through a pool that hands them back without SSH.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from bot.app import GC_THRESHOLDS, runtime
from config.models import BotConfig, Node
from handlers.settings import SETTINGS_PROBE
from services.cluster import Cluster
from services.models import CommandResult, GpuInfo
from services.node.probe import NodeRaw, ProbeOptions, ProbeTarget, build_script, probe_command, remote_command
from services.node.ssh import NodePool

SAMPLES = Path(__file__).parent / "samples" / "probe"
KIMI_UNIT = "vllm-kimi-k25-int4.service"


class RecordedPool(NodePool):
    """Every node answers with the same recorded probe output; the commands it was given are kept."""

    def __init__(self, stdout: str) -> None:
        super().__init__()
        self.stdout = stdout
        self.commands: list[str] = []

    async def run(self, node: Node, command: str, limit_s: float | None = None,
                  stdin: str | None = None, wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        self.runs += 1
        self.commands.append(command)
        return CommandResult(exit_status=0, stdout=self.stdout, stderr="", elapsed_s=0.01)


def fleet(n: int) -> BotConfig:
    """``n`` nodes with one Kimi service each."""
    return BotConfig.model_validate({
        "nodes": [{"name": f"n{i:03d}", "host": f"127.0.0.{i + 2}"} for i in range(n)],
        "services": [{"name": "kimi", "node": f"n{i:03d}", "unit": KIMI_UNIT} for i in range(n)],
    })


async def test_a_snapshot_answers_every_node_and_keeps_no_raw_output() -> None:
    config = fleet(3)
    pool = RecordedPool((SAMPLES / "settings-loading.out").read_text())
    cluster = Cluster(config, pool)
    snap = await cluster.snapshot(config.services, config.nodes, SETTINGS_PROBE)
    assert [s.node for s in snap.services] == ["n000", "n001", "n002"] and pool.runs == 3
    assert all(n.ok for n in snap.nodes) and {s.state for s in snap.services} == {"loading"}
    report, states, raw = await cluster.probe_node(config.nodes[0], config.services[:1], SETTINGS_PROBE)
    assert isinstance(raw, NodeRaw) and raw.units[0].unit == KIMI_UNIT  # the watcher still gets it
    _, again, none = await cluster.probe_node(config.nodes[0], config.services[:1], SETTINGS_PROBE,
                                              keep_raw=False)
    assert none is None and again == states and report.ok
    assert len(report.gpus) == 8 and report.processes  # the GPU answer's node lists
    cards = await cluster.snapshot(config.services, config.nodes, SETTINGS_PROBE, node_gpus=False)
    assert all(n.gpus == [] and n.processes == [] for n in cards.nodes)  # answers about services skip them
    assert [s.gpus for s in cards.services] == [s.gpus for s in snap.services] and len(cards.services[0].gpus) == 8


async def test_the_long_running_bot_settles_the_garbage_collector(tmp_path: Path) -> None:
    config = BotConfig.model_validate({"state": {"dir": str(tmp_path)}})
    async with runtime(config):
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == GC_THRESHOLDS


def test_what_is_parsed_once_per_text_is_never_shared_with_an_answer() -> None:
    """systemctl show, the unit, the command line and vLLM's logged arguments are cached on their text:
    changing one answer must not change the next."""
    from services.node.assemble import NodeFacts, assemble
    from services.node.probe import parse_output

    raw = parse_output((SAMPLES / "settings-ready.out").read_text())
    first = assemble("kimi", "n000", raw.units[0], NodeFacts(raw))
    expected = first.model_copy(deep=True)
    first.flags.clear()
    first.env.clear()
    first.command.clear()
    first.warnings.clear()
    again = assemble("kimi", "n000", raw.units[0], NodeFacts(raw))
    assert again == expected and again.flags and again.env and again.command


async def test_nodes_that_run_the_same_units_are_sent_one_shared_command() -> None:
    """The probe's command (~17 KB) is one object for every node with the same units, not one per node: 512
    copies (and their scripts) were 17 MB of the answer's peak. It is still exactly the fixed template."""
    config = fleet(3)
    pool = RecordedPool((SAMPLES / "settings-loading.out").read_text())
    await Cluster(config, pool).snapshot(config.services, config.nodes, SETTINGS_PROBE)
    target = ProbeTarget(unit=KIMI_UNIT, models=False)
    assert pool.commands[0] == remote_command(build_script([target], SETTINGS_PROBE))
    assert len({id(c) for c in pool.commands}) == 1 and len(pool.commands) == 3
    # Equal targets and options built apart give the same object; a different probe another command.
    again = probe_command((ProbeTarget(unit=KIMI_UNIT),), ProbeOptions(bench=True))
    assert again is pool.commands[0]
    assert probe_command((target,), ProbeOptions(bench=True, journal_lines=10)) != again


async def test_each_service_record_is_let_go_once_its_card_is_built() -> None:
    """An answer about many services holds each ``ServiceState`` only until its card and its data object
    exist (with every record, card and data object alive at once, 512 nodes peaked ~9 MB higher)."""
    import weakref

    from handlers.context import Context, Request
    from handlers.live import cards_reply, service_cards
    from handlers.reply import Section
    from handlers.settings import service_sections
    from services.models import ServiceState

    config = fleet(4)
    ctx = Context(config=config, cluster=Cluster(config, RecordedPool((SAMPLES / "settings-loading.out").read_text())))
    seen: list[weakref.ref[ServiceState]] = []
    alive_at_card: list[int] = []

    def card(st: ServiceState, c: Context) -> list[Section]:
        gc.collect()
        alive_at_card.append(sum(1 for r in seen if r() is not None))
        seen.append(weakref.ref(st))
        return service_sections(st, c)

    req = Request(intent="settings", services=config.services, nodes=config.nodes)
    cards = await service_cards(ctx, req, SETTINGS_PROBE, card)
    assert alive_at_card == [0, 0, 0, 0]  # the previous services' records were gone when each card was built
    reply = cards_reply("settings", "Current settings", cards)
    services = reply.data["services"]
    assert [s["node"] for s in services] == ["n000", "n001", "n002", "n003"] and services[0]["flags"]
    assert [(b.service, b.node, b.state) for b in cards.services] == [("kimi", f"n00{i}", "loading") for i in range(4)]
    assert reply.ok and reply.status == "loading" and len(reply.sections) == len(cards.sections)


async def test_commands_start_behind_the_gate_and_run_beyond_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``EXEC_GATE`` commands wait for their exec request's answer at once (asyncssh keeps each
    request's bytes until then); once started, any number run and send their output."""
    import asyncio

    from services.node import ssh

    monkeypatch.setattr(ssh, "EXEC_GATE", 2)
    pool = NodePool()
    starting = running = most_starting = most_running = 0

    class Finished:
        exit_status = 0
        stdout = "out"
        stderr = ""

    class Process:
        async def wait(self, check: bool = False, timeout: float | None = None) -> Finished:  # noqa: ASYNC109
            nonlocal running, most_running
            running += 1
            most_running = max(most_running, running)
            await asyncio.sleep(0.05)
            running -= 1
            return Finished()

    class Connection:
        async def create_process(self, command: str, input: str | None = None) -> Process:
            nonlocal starting, most_starting
            starting += 1
            most_starting = max(most_starting, starting)
            await asyncio.sleep(0.005)
            starting -= 1
            return Process()

    async def connection(node: Node, limit_s: float) -> Connection:
        return Connection()

    monkeypatch.setattr(pool, "_connection", connection)
    nodes = fleet(8).nodes
    results = await asyncio.gather(*(pool.run(n, "true") for n in nodes))
    assert [r.stdout for r in results] == ["out"] * 8 and pool.runs == 8
    assert most_starting == 2 and most_running > 2


async def test_gpu_records_share_one_set_of_field_names_and_stay_apart() -> None:
    """A service's GPU records (eight per node) share one ``model_fields_set`` holding every field, instead
    of one 728-byte set each: an assignment to one record only adds a name already there, and changes
    nothing of any other record."""
    config = fleet(2)
    cluster = Cluster(config, RecordedPool((SAMPLES / "settings-loading.out").read_text()))
    report, states, _ = await cluster.probe_node(config.nodes[0], config.services[:1], SETTINGS_PROBE)
    gpus = states[0].gpus
    assert len(gpus) == 8 and all(g.processes for g in gpus)  # the recording's vLLM workers, one per GPU
    assert all(g.processes == [] for g in report.gpus)  # the node's own list is left as it was
    assert len({id(g.model_fields_set) for g in gpus}) == 1 and gpus[0].model_fields_set == set(GpuInfo.model_fields)
    brief = gpus[0].processes[0]
    assert brief.model_fields_set == {"pid", "name", "memory_mib"}
    before = [g.model_dump() for g in gpus[1:]]
    gpus[0].name = "changed"
    assert [g.model_dump() for g in gpus[1:]] == before and gpus[0].model_fields_set == set(GpuInfo.model_fields)
    _, again, _ = await cluster.probe_node(config.nodes[0], config.services[:1], SETTINGS_PROBE)
    assert again[0].gpus[0].name != "changed"  # nothing is shared between answers


def test_sections_are_slim_and_still_validated() -> None:
    """A section (thousands per answer at fleet scale) keeps no per-instance dictionary or set of field names,
    and is validated as before: unknown kinds and unknown fields are refused, rows are copied as strings."""
    import sys

    from pydantic import ValidationError

    from handlers.reply import Reply, Section

    s = Section(kind="table", title="Flags", headers=["flag", "value"], rows=[["--tp", "8"]])
    assert not hasattr(s, "__dict__") and sys.getsizeof(s) < 150
    assert s == Section(kind="table", title="Flags", headers=["flag", "value"], rows=[["--tp", "8"]])
    for bad in ({"kind": "nope"}, {"kind": "text", "colour": "red"}, {"kind": "fields", "fields": [("a",)]}):
        with pytest.raises(ValidationError):
            Section(**bad)  # type: ignore[arg-type]
    reply = Reply(intent="x", title="t", sections=[s])
    assert reply.sections[0] is s and reply.model_copy(update={"sections": []}).sections == []


async def test_a_snapshot_of_many_nodes_collects_the_cycles_its_commands_left() -> None:
    """asyncssh leaves each finished command in reference cycles; a snapshot of COLLECT_FROM_NODES nodes or
    more collects them before the answer is built on top (a smaller one leaves that to the collector)."""
    import weakref

    from services.cluster import COLLECT_FROM_NODES

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    class CyclePool(RecordedPool):
        def __init__(self, stdout: str) -> None:
            super().__init__(stdout)
            self.left: list[weakref.ref[Cycle]] = []

        async def run(self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                      wait_s: float | None = None, read_only: bool = False) -> CommandResult:
            self.left.append(weakref.ref(Cycle()))  # garbage at once, but only a collection frees it
            return await super().run(node, command, limit_s, stdin, wait_s, read_only)

    out = (SAMPLES / "settings-ready.out").read_text()
    gc.disable()  # only the snapshot's own collection may run
    try:
        for n, freed in ((3, False), (COLLECT_FROM_NODES, True)):
            config = fleet(n)
            pool = CyclePool(out)
            await Cluster(config, pool).snapshot(config.services, config.nodes, SETTINGS_PROBE)
            assert all((r() is None) == freed for r in pool.left), n
    finally:
        gc.enable()
