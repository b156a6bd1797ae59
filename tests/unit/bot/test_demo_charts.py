"""bot/demo_charts.py: the history a fresh demo database is given so that its charts have something to show.

Written through the store's own methods and read back by the chart handlers, as ``inferbot demo "chart loads
kimi"`` would: Kimi's earlier loads split by phase (the last one the 30m 02s the demo's ETA calls "last
time"), and a day and a half of the Qwen server's traffic with one restart by a person.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.demo_charts import DEMO_USER, seed_chart_history
from bot.dispatch import answer
from handlers.context import Asker, Context
from services.cluster import Cluster
from services.node.ssh import NodePool
from services.store.store import Store
from tests.unit.handlers.test_charts import offline_config

NOW = datetime(2026, 12, 2, 16, 0, tzinfo=UTC)


async def test_the_demo_has_earlier_kimi_loads_split_by_phase(tmp_path: Path) -> None:
    cfg = offline_config(tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    pool = NodePool()
    try:
        await seed_chart_history(store, NOW)
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), store=store, asker=Asker(surface="json"),
                      now=lambda: NOW)
        loads = await answer("chart loads kimi", ctx)
        demo_load = await store.loads.last("kimi", "gpu-a")
    finally:
        await pool.close()
        await store.close()
    assert loads.chart is not None
    shown = loads.data["loads"]
    assert [x["outcome"] for x in shown] == ["ready", "failed", "ready", "ready", "ready"]
    for x in shown:
        assert 20 * 60 < x["duration_s"] < 32 * 60 and "unknown" not in x["phases_s"]
        assert sum(x["phases_s"].values()) == x["duration_s"]
        assert list(x["phases_s"]) == [p for p in ("waiting_for_gpu", "loading_weights", "kv_cache", "compiling",
                                                   "starting_api") if p in x["phases_s"]]
    assert shown[-1]["duration_s"] == 1802.0  # the load the demo's ETA says "last time 30m 02s" of
    assert demo_load is not None and demo_load.invocation_id == "demo-previous-load"


async def test_the_qwen_traffic_follows_the_working_day_with_one_restart(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    try:
        await seed_chart_history(store, NOW)
        points = await store.samples.between("qwen", "gpu-b", NOW - timedelta(days=2), NOW)
        restarts = [e for e in await store.audit.recent("qwen") if e.event == "restart.executed"]
    finally:
        await store.close()
    assert [(e.who, e.node) for e in restarts] == [(DEMO_USER, "gpu-b")]
    # The restart: four minutes without samples, then no rate for the new process's first sample.
    assert [p.at for p in points if p.generation_tps is None] == [restarts[0].at + timedelta(minutes=4)]
    assert not [p for p in points if restarts[0].at <= p.at < restarts[0].at + timedelta(minutes=4)]
    assert {p.resolution_s for p in points if p.at < NOW - timedelta(hours=24, minutes=5)} == {300}  # folded
    night = [p.generation_tps for p in points if p.generation_tps is not None and p.at.hour in (1, 2, 3)]
    noon = [p.generation_tps for p in points if p.generation_tps is not None and p.at.hour in (12, 13)]
    assert night and noon and sum(noon) / len(noon) > 3 * sum(night) / len(night)
    assert 700 < max(noon) < 1200
