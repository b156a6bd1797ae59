"""handlers/samples.py: one metric sample per ready server whose ``/metrics`` answered, for the charts.

Over the real sshd the watcher's one round trip per poll brings the samples of a simulated Qwen server
serving ~900 tok/s; on its own, the handler stores what a ready service's scrape said and nothing else.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handlers.context import Context
from handlers.notify import RecordingNotifier
from handlers.samples import record_samples
from handlers.watcher import watch_node
from services.cluster import Cluster
from services.models import MetricsSample, ServiceState
from services.node.ssh import NodePool
from services.sim.scenarios import QWEN_UNIT, qwen_node
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.sshd import free_port

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


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


def st(service: str, state: str, metrics: MetricsSample | None, **kw: Any) -> ServiceState:
    return ServiceState(service=service, node="gpu-b", unit=f"vllm-{service}.service", state=state,  # type: ignore[arg-type]
                        metrics=metrics, **kw)


async def test_only_ready_services_whose_metrics_answered_are_sampled(url: str) -> None:
    # The numbers of tests/samples/metrics/new_single_t1.prom, as a person reads them off the scrape.
    scrape = MetricsSample(prompt_tokens_total=165000.0, generation_tokens_total=105825.0, running=18.0, waiting=43.0,
                           kv_cache_usage=0.959)
    started = T0 - timedelta(days=1)
    store = Store(url)
    try:
        stored = await record_samples(store.samples, [
            st("glm", "ready", scrape, since=started),
            st("kimi", "loading", scrape),  # a load's counters are not traffic
            st("qwen", "ready", None),  # /metrics did not answer (or was not Prometheus text)
        ], T0)
        assert stored == 1
        later = scrape.model_copy(update={"generation_tokens_total": 105825.0 + 6000})
        assert await record_samples(store.samples, [st("glm", "ready", later, since=started)],
                                    T0 + timedelta(seconds=60)) == 1
        restarted = later.model_copy(update={"generation_tokens_total": 999_999.0})  # a new process, higher by chance
        assert await record_samples(store.samples, [st("glm", "ready", restarted, since=T0 + timedelta(seconds=90))],
                                    T0 + timedelta(seconds=120)) == 1
        points = await store.samples.between("glm", "gpu-b", T0 - timedelta(minutes=1))
        assert await store.samples.between("kimi", "gpu-b", T0 - timedelta(minutes=1)) == []
        assert await store.samples.between("qwen", "gpu-b", T0 - timedelta(minutes=1)) == []
    finally:
        await store.close()
    first, second, third = points
    assert (first.at, first.running, first.waiting, first.kv_cache_usage) == (T0, 18, 43, pytest.approx(0.959))
    assert first.generation_tps is None and second.generation_tps == pytest.approx(100.0)
    assert third.generation_tps is None  # not a rate across two processes
