"""handlers/charts.py: the series a chart shows, the PNG it draws, and a chart of nothing saying why.

The throughput and loads charts read the store (SQLite); the bench chart reads the benchmark files on a
simulated node over the real sshd.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.dispatch import answer
from bot.render_chart import render_png
from config.models import BotConfig, Node, Service, StateSettings
from handlers import charts
from handlers.context import Args, Asker, Context, Request
from services.cluster import Cluster
from services.node.ssh import NodePool
from services.sim.scenarios import kimi_node
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.sshd import free_port
from tests.unit.services.store.test_samples import sample

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


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
        await sample(store.samples, at, gen, prompt, running=i % 5, waiting=i % 2)
        expected.append((at, None if i == 0 else float(100 + i), None if i == 0 else 300.0, i % 5, i % 2))
    # another service: not in kimi's chart
    await sample(store.samples, now - timedelta(minutes=20), 0, 0, service="qwen")
    await sample(store.samples, now - timedelta(hours=3), 0, 0)  # outside "last 1h"
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



async def test_the_window_is_clamped_to_what_the_store_keeps_and_says_so(store: Store, tmp_path: Path) -> None:
    cfg = offline_config(tmp_path)
    kimi = cfg.services[0]
    now = datetime.now(UTC).replace(microsecond=0)
    await sample(store.samples, now - timedelta(days=8), 0, 0)  # older than the store keeps: not shown
    for minutes in (3, 2, 1):
        await sample(store.samples, now - timedelta(minutes=minutes), 6000 * (4 - minutes), 0)
    await store.audit.record("restart.executed", "U1", "C1", "kimi", "gpu-b", "another node", at=now)
    ctx = Context(config=cfg, cluster=Cluster(cfg, NodePool()), store=store, now=lambda: now)

    def asked(window_s: int) -> Request:  # as a button or the App Home asks: no message, typed arguments
        return Request(intent="chart_throughput", services=[kimi], nodes=[], explicit_target=True,
                       args=Args(window_s=window_s))

    month = await charts.throughput(ctx, asked(30 * 86400))
    assert month.data["window_s"] == 7 * 86400 and month.title == "Throughput of kimi on gpu-a — last 7 d"
    assert month.sections[-1].text == "samples are kept for 7 days, so this shows the last 7 days"
    assert [p["generation_tps"] for p in month.data["points"]][1:] == [100.0, 100.0]  # 3 of the 4 samples
    assert month.data["restarts"] == []  # gpu-b's restart is not kimi on gpu-a's
    short = await charts.throughput(ctx, asked(60))
    assert short.data["window_s"] == 600 and short.sections[-1].text == "the shortest window is 10 minutes"
    six = await charts.throughput(ctx, asked(6 * 3600))
    assert six.title.endswith("— last 6 h") and all(s.text != "the shortest window is 10 minutes"
                                                    for s in six.sections)
