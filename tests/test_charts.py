"""Charts: the samples behind them (rates, counter resets, downsampling, retention), the series a chart
shows, the PNG it draws, the watcher sampling over the real sshd, and matplotlib staying out of the
other commands."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine

from bot.cli import main
from bot.dispatch import answer
from bot.render_chart import render_png
from config.models import BotConfig, Node, Service, StateSettings
from handlers.context import Asker, Context
from handlers.notify import RecordingNotifier
from handlers.watcher import watch_node
from services.cluster import Cluster
from services.node.ssh import NodePool
from services.sim.scenarios import QWEN_UNIT, kimi_node, qwen_node
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.sshd import free_port

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[1]


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


@pytest.fixture
async def store(tmp_path: Path):
    s = Store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    yield s
    await s.close()


async def sample(store: Store, at: datetime, gen: float, prompt: float, running: float = 3, waiting: float = 0,
                 start: datetime = T0 - timedelta(days=30), service: str = "kimi") -> None:
    await store.samples.record(service, "gpu-a", at, generation_total=gen, prompt_total=prompt,
                               running=running, waiting=waiting, kv_cache_usage=0.25, process_start=start)


# -- the store ---------------------------------------------------------------------------------------------

async def test_rates_come_from_consecutive_samples_and_a_reset_gives_none(store: Store) -> None:
    await sample(store, T0, 1000, 5000)
    await sample(store, T0 + timedelta(seconds=60), 7000, 8000)  # +6000 gen, +3000 prompt in 60 s
    await sample(store, T0 + timedelta(seconds=120), 500, 100)  # counters went down: the server restarted
    await sample(store, T0 + timedelta(seconds=180), 3500, 1300)
    new = T0 + timedelta(seconds=200)  # a new process whose counters happen to be higher: still no rate
    await sample(store, T0 + timedelta(seconds=240), 99_000, 99_000, start=new)
    points = await store.samples.between("kimi", "gpu-a", T0 - timedelta(minutes=1))
    assert [(p.generation_tps, p.prompt_tps) for p in points] == [
        (None, None), (100.0, 50.0), (None, None), (50.0, 20.0), (None, None)]
    latest = await store.samples.latest()
    assert latest[("kimi", "gpu-a")].at == T0 + timedelta(seconds=240)


async def test_downsampled_after_24h_and_dropped_after_7_days(store: Store) -> None:
    # A sample a minute for 26 hours, generation rate 10 tok/s in the first 5-minute bucket and 20 after.
    gen = 0.0
    with time_machine.travel(T0, tick=False) as clock:
        for minute in range(26 * 60 + 1):
            gen += (10 if minute <= 5 else 20) * 60
            await sample(store, T0 + timedelta(minutes=minute), gen, 0)
        clock.move_to(T0 + timedelta(hours=26))
        folded, dropped = await store.samples.compact(datetime.now(UTC))
    points = await store.samples.between("kimi", "gpu-a", T0 - timedelta(days=1))
    buckets = [p for p in points if p.resolution_s == 300]
    raw = [p for p in points if p.resolution_s == 0]
    assert folded == 2 * 60 and dropped == 0  # the first two hours are older than 24 h
    assert len(buckets) == 24 and buckets[0].at == T0 and buckets[1].at == T0 + timedelta(minutes=5)
    assert buckets[0].generation_tps == pytest.approx(10.0)  # minutes 0-4: no rate yet, then 10, 10, 10, 10
    assert buckets[1].generation_tps == pytest.approx(18.0)  # minutes 5-9: 10, 20, 20, 20, 20
    assert all(b.generation_tps == pytest.approx(20.0) for b in buckets[2:])
    assert all(b.running == 3 and b.kv_cache_usage == pytest.approx(0.25) for b in buckets)
    assert raw[0].at == T0 + timedelta(hours=2) and len(raw) == 24 * 60 + 1
    assert await store.samples.compact(T0 + timedelta(hours=26)) == (0, 0)  # folding twice changes nothing
    # Seven days later everything older than a week is gone; the newest samples stay.
    assert (await store.samples.compact(T0 + timedelta(days=7, hours=2, minutes=30)))[1] == 24 + 30
    left = await store.samples.between("kimi", "gpu-a", T0 - timedelta(days=1))
    assert left[0].at == T0 + timedelta(hours=2, minutes=30)


async def test_samples_survive_a_restart_of_the_bot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    first = Store(url)
    await sample(first, T0, 0, 0)
    await first.close()
    second = Store(url)  # a new process: the next sample still gets its rate from the stored one
    try:
        await sample(second, T0 + timedelta(seconds=10), 1000, 0)
        points = await second.samples.between("kimi", "gpu-a", T0)
        assert [p.generation_tps for p in points] == [None, 100.0]
    finally:
        await second.close()


# -- the charts' series and pictures -----------------------------------------------------------------------

def offline_config(tmp_path: Path) -> BotConfig:
    """One node nobody listens on: the throughput and loads charts need the store, not the node."""
    return BotConfig(nodes=[Node(name="gpu-a", host="127.0.0.1", port=free_port(), user="root", timeout=2.0)],
                     services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service"),
                               Service(name="qwen", node="gpu-a", unit="vllm-qwen.service")],
                     state=StateSettings(dir=str(tmp_path / "state")))


def write_toml(cfg: BotConfig, path: Path) -> None:
    node = cfg.nodes[0]
    lines = [f'[state]\ndir = "{cfg.state.dir}"\n', "[[nodes]]", f'name = "{node.name}"', 'host = "127.0.0.1"',
             f"port = {node.port}", 'user = "root"', 'timeout = "2s"']
    for s in cfg.services:
        lines += ["[[services]]", f'name = "{s.name}"', f'node = "{s.node}"', f'unit = "{s.unit}"']
    path.write_text("\n".join(lines) + "\n")


async def test_throughput_series_match_the_stored_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = offline_config(tmp_path)
    os.makedirs(cfg.state.directory(), exist_ok=True)
    now = datetime.now(UTC).replace(microsecond=0)
    store = Store(cfg.state.database_url())
    gen = prompt = 0.0
    expected = []
    for i in range(30):  # one sample a minute for the last half hour, a known rate each time
        at = now - timedelta(minutes=30 - i)
        gen += 60 * (100 + i)
        prompt += 60 * 300
        await sample(store, at, gen, prompt, running=i % 5, waiting=i % 2)
        expected.append((at, None if i == 0 else float(100 + i), None if i == 0 else 300.0, i % 5, i % 2))
    await sample(store, now - timedelta(minutes=20), 0, 0, service="qwen")  # another service: not in kimi's chart
    await sample(store, now - timedelta(hours=3), 0, 0)  # outside "last 1h"
    await store.audit.record("restart.executed", "U1", "C1", "kimi", "gpu-a", "restarted",
                             at=now - timedelta(minutes=10))
    await store.close()
    toml = tmp_path / "inferbot.toml"
    write_toml(cfg, toml)
    png = tmp_path / "chart.png"
    assert await asyncio.to_thread(main, ["ask", "chart throughput kimi last 1h", "--config", str(toml), "--json",
                                          "--png", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["intent"] == "chart_throughput" and out["ok"]
    data = out["data"]
    assert data["window_s"] == 3600 and data["service"] == "kimi"
    got = [(datetime.fromisoformat(p["at"]), p["generation_tps"], p["prompt_tps"], p["running"], p["waiting"])
           for p in data["points"]]
    assert got == [(a, None if g is None else pytest.approx(g), None if pr is None else pytest.approx(pr), r, w)
                   for a, g, pr, r, w in expected]
    assert [r["event"] for r in data["restarts"]] == ["restart.executed"]
    assert png_size(png.read_bytes()) == (1000, 500)
    assert data["png"]["file"] == str(png)


async def test_loads_chart_splits_each_load_by_phase(store: Store, tmp_path: Path) -> None:
    start = T0
    seen = {"waiting_for_gpu": 0, "loading_weights": 60, "kv_cache": 1260, "compiling": 1400, "starting_api": 1700}
    for phase, offset in seen.items():
        await store.loads.record_phase("kimi", "gpu-a", "inv-1", phase, start + timedelta(seconds=offset))
    await store.loads.record("kimi", "gpu-a", "inv-1", start, start + timedelta(seconds=1740), "ready", 1740.0)
    later = T0 + timedelta(days=1)
    await store.loads.record("kimi", "gpu-a", "inv-2", later, None, "failed", 300.0)  # no phases seen
    cfg = offline_config(tmp_path)
    pool = NodePool()
    try:
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), store=store, asker=Asker(surface="json"),
                      now=lambda: T0 + timedelta(days=2))
        reply = await answer("chart loads kimi", ctx)
    finally:
        await pool.close()
    assert reply.intent == "chart_loads" and reply.chart is not None
    first, second = reply.data["loads"]
    assert first["phases_s"] == {"waiting_for_gpu": 60.0, "loading_weights": 1200.0, "kv_cache": 140.0,
                                 "compiling": 300.0, "starting_api": 40.0}
    assert second == {"started_at": later.isoformat(), "outcome": "failed", "duration_s": 300.0,
                      "phases_s": {"unknown": 300.0}}
    assert reply.data["eta_basis_s"] == 1740.0
    bars = {s.name: s.y for s in reply.chart.panels[0].series}
    assert bars["loading weights"] == [20.0, 0.0] and bars["phase not seen"] == [0.0, 5.0]
    assert "ETA basis" in reply.chart.panels[0].hlines[0][1]
    png = await asyncio.to_thread(render_png, reply.chart)
    assert png_size(png) == (1000, 500)
    (tmp_path / "loads.png").write_bytes(png)


async def test_a_chart_of_nothing_says_why(store: Store, tmp_path: Path) -> None:
    cfg = offline_config(tmp_path)
    pool = NodePool()
    try:
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), store=store, asker=Asker(surface="json"))
        empty = await answer("chart throughput kimi", ctx)
        which = await answer("chart throughput", ctx)
        no_bench_dir = await answer("chart bench kimi", ctx)
    finally:
        await pool.close()
    assert empty.chart is None and "No throughput samples of kimi on gpu-a" in (empty.sections[0].text or "")
    assert which.chart is None and "Which service?" in (which.sections[0].text or "")
    two_nodes = cfg.model_copy(update={
        "nodes": [*cfg.nodes, cfg.nodes[0].model_copy(update={"name": "gpu-b"})],
        "services": [*cfg.services, cfg.services[0].model_copy(update={"node": "gpu-b"})]})
    pool = NodePool()
    try:
        ctx = Context(config=two_nodes, cluster=Cluster(two_nodes, pool), store=store)
        both = await answer("chart loads kimi", ctx)
        one = await answer("chart loads kimi on gpu-b", ctx)
    finally:
        await pool.close()
    assert "kimi runs on gpu-a and gpu-b: name the node, e.g. `chart loads kimi on gpu-a`" in (
        both.sections[0].text or "")
    assert one.data["node"] == "gpu-b"
    assert no_bench_dir.chart is None and "no bench_dir" in (no_bench_dir.sections[0].text or "")


async def test_bench_chart_reads_the_files_over_the_real_sshd(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())})
    svc = cluster.config.services[0].model_copy(update={"bench_dir": cluster.sims["gpu-a"].bench_dir})
    cfg = cluster.config.model_copy(update={"services": [svc]})
    pool = NodePool()
    try:
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), asker=Asker(surface="json"))
        reply = await answer("chart bench kimi", ctx)
    finally:
        await pool.close()
    assert reply.data["dates"] == [
        {"date": "2026-02-14", "single_stream_tps": None, "peak_tps": 1712.9},
        {"date": "2026-02-21", "single_stream_tps": 82.5, "peak_tps": 1536.42},
    ]
    assert reply.chart is not None and png_size(render_png(reply.chart)) == (1000, 500)


# -- the watcher takes the samples -------------------------------------------------------------------------

async def test_watcher_samples_metrics_on_its_one_round_trip(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-b": qwen_node(fast=True, port=free_port(), traffic_tps=900.0)},
                                 watch={"interval": "1s", "safety_interval": "1s"})
    await cluster.sims["gpu-b"].wait_for(QWEN_UNIT, "ready", 45)
    cfg = cluster.config
    store = Store(cfg.state.database_url())
    pool = NodePool()
    commands: list[str] = []
    real_run = pool.run

    async def counting_run(node, command, limit_s=None, stdin=None, wait_s=None, read_only=False):  # type: ignore[no-untyped-def]
        commands.append(command)
        return await real_run(node, command, limit_s=limit_s, stdin=stdin, wait_s=wait_s, read_only=read_only)

    pool.run = counting_run  # type: ignore[method-assign]
    try:
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), store=store)
        for _ in range(3):
            await watch_node(ctx, "gpu-b", RecordingNotifier())
            await asyncio.sleep(1.0)
        points = await store.samples.between(cfg.services[0].name, "gpu-b", datetime.now(UTC) - timedelta(minutes=5))
    finally:
        await pool.close()
        await store.close()
    assert len(commands) == 3  # one SSH command per watch poll, metrics included
    assert all("/metrics" in c for c in commands)
    assert len(points) == 3
    assert points[0].generation_tps is None  # the first sample has nothing to compare with
    for p in points[1:]:
        assert p.generation_tps is not None and 600 < p.generation_tps < 1200, p
        assert p.running == 24 and p.kv_cache_usage == pytest.approx(0.41, abs=0.05)


# -- matplotlib stays out of everything but drawing --------------------------------------------------------

def test_cli_and_a_settings_answer_do_not_import_matplotlib(tmp_path: Path) -> None:
    code = """
import asyncio, sys
import bot.cli
from bot.app import runtime
from bot.dispatch import answer
from config.models import BotConfig, StateSettings
from handlers.context import Asker

async def go():
    cfg = BotConfig(state=StateSettings(dir=sys.argv[1]))
    async with runtime(cfg) as rt:
        reply = await answer("what are current settings?", rt.context(Asker(surface="cli")))
    return reply.intent

intent = asyncio.run(go())
print(intent, sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"))
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=60, check=True).stdout.split()
    assert out == ["settings", "[]"]


# -- routing and the follow's phase record -----------------------------------------------------------------

def test_chart_questions_route_to_the_charts_with_their_window(tmp_path: Path) -> None:
    from bot.router import route

    cfg = offline_config(tmp_path)
    cases = {
        "chart throughput kimi": ("chart_throughput", None),
        "throughput kimi chart last 6h": ("chart_throughput", 6 * 3600),
        "chart throughput kimi 24h": ("chart_throughput", 24 * 3600),
        "@inferbot chart throughput kimi last 7d": ("chart_throughput", 7 * 86400),
        "graph of kimi's throughput for the last 90 min": ("chart_throughput", 90 * 60),
        "chart loads kimi": ("chart_loads", None),
        "chart bench kimi": ("chart_bench", None),
        "benchmark chart for kimi": ("chart_bench", None),
        "throughput kimi": ("throughput", None),  # no chart asked: the live numbers, as before
        "bench kimi": ("bench", None),  # issue 14 makes `bench kimi` run the benchmark (was: throughput)
        "benchmark kimi": ("bench", None),  # the understanding corpus: "benchmark kimi pls" is the order too
        "benchmark results for kimi": ("throughput", None),
    }
    for text, (name, window) in cases.items():
        intent = route(text, cfg)
        assert (intent.command.name, intent.args.window_s) == (name, window), text
        assert [s.name for s in intent.services] == ["kimi"], text


async def test_a_followed_restart_records_its_phases_for_chart_loads(make_cluster: MakeCluster) -> None:
    from tests.test_restart import BOB, bot, kimi_cluster, ready_in_both, request, set_profile, until

    cluster = await kimi_cluster(make_cluster)
    # ~4 s of weights: long enough for the follow's 0.2 s polls to see the phase on a loaded machine.
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.035)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid, user=BOB)).executed
        await until(ready_in_both(b), 45, "the ready notices")
        reply = await b.ask("chart loads kimi")
    assert reply.chart is not None
    [load] = reply.data["loads"]
    assert load["outcome"] == "ready"
    split = load["phases_s"]
    assert "loading_weights" in split and "unknown" not in split, split
    assert sum(split.values()) == pytest.approx(load["duration_s"], abs=0.5)
    assert list(split) == [p for p in ("waiting_for_gpu", "loading_weights", "kv_cache", "compiling",
                                       "starting_api") if p in split]  # in the order they happened


@pytest.mark.parametrize("name", ["new_single_t1.prom", "new_two_engines.prom", "old_names_v08.prom",
                                  "new_single_restarted.prom"])
def test_the_watchers_metrics_filter_keeps_every_number_it_samples(name: str) -> None:
    import re

    from services.node.probe import METRICS_FILTER
    from services.parse.metrics import parse_metrics

    full = (ROOT / "tests" / "samples" / "metrics" / name).read_text()
    pattern = re.compile(METRICS_FILTER)  # grep -E on the node: the same syntax for this pattern
    kept = "\n".join(line for line in (full + "\n200").splitlines() if pattern.search(line))
    body, _, code = kept.rpartition("\n")
    assert code == "200"
    a, b = parse_metrics(full), parse_metrics(body)
    assert (b.prompt_tokens_total, b.generation_tokens_total, b.running, b.waiting, b.kv_cache_usage) == (
        a.prompt_tokens_total, a.generation_tokens_total, a.running, a.waiting, a.kv_cache_usage)
    assert a.generation_tokens_total is not None and a.running is not None
    assert len(body) < len(full) / 3, (len(body), len(full))


async def test_demo_draws_its_throughput_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "demo.png"
    assert await asyncio.to_thread(main, ["demo", "chart throughput qwen", "--json", "--png", str(png)]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert len(data["points"]) > 600 and [r["event"] for r in data["restarts"]] == ["restart.executed"]
    rates = [p["generation_tps"] for p in data["points"]]
    assert rates.count(None) == 1  # the first sample after the restart has no rate (its counters started at 0)
    assert png_size(png.read_bytes()) == (1000, 500)
