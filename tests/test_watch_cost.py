"""The watcher at fleet scale (issue 15): its looks cost no database trip unless something changed.

Its baselines and memos are read once and then kept by the leader; its writes (samples, baselines, memos)
are written together once a second, exactly as they would have been one by one; the restart lock is read
only when a look could judge something.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from handlers.health_watch import _may_judge
from services.models import ServiceState
from services.store.records import HealthMemo
from services.store.schema import metric_samples, watches
from services.store.store import Store
from tests.pg import PgServer

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


class CountingStore(Store):
    """A store that counts its trips to the database thread (``Database.run``, the one way there)."""

    trips = 0

    def __init__(self, url: str) -> None:
        super().__init__(url)
        real = self.db.run

        async def counting(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.trips += 1
            return await real(fn, *args, **kwargs)

        self.db.run = counting  # type: ignore[method-assign]


def _rows(store: Store, table: object) -> int:
    with store.db.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        url = server.url(server.database())
    s = CountingStore(url)
    await s.prepare()
    yield s
    await s.close()


async def test_the_baseline_is_read_once_and_written_with_the_next_flush(store: CountingStore) -> None:
    assert await store.watches.get("kimi", "gpu-a") is None
    trips = store.trips
    for _ in range(3):  # the same state look after look: batched
        await store.watches.put("kimi", "gpu-a", 100, T0, 0, "active")
        assert (await store.watches.get("kimi", "gpu-a")).main_pid == 100  # type: ignore[union-attr]
    assert store.trips == trips and _rows(store, watches) == 0  # nothing written yet, nothing read again
    await store.flush_writes()
    assert store.trips == trips + 1 and _rows(store, watches) == 1


async def test_a_changed_baseline_is_written_at_once(store: CountingStore) -> None:
    """A restart the watcher saw must be in the database before a successor leader could read the old one."""
    await store.watches.put("kimi", "gpu-a", 100, T0, 0, "active")
    await store.flush_writes()
    await store.watches.put("kimi", "gpu-a", 200, T0, 1, "active")
    again = Store(store.sqlalchemy_url)  # another process (the next leader) reads what was written
    try:
        seen = await again.watches.get("kimi", "gpu-a")
        assert seen is not None and seen.main_pid == 200 and seen.n_restarts == 1 and seen.started_at == T0
    finally:
        await again.close()


async def test_a_lost_lead_drops_the_queued_baselines_but_not_the_samples(store: CountingStore) -> None:
    await store.samples.record("kimi", "gpu-a", T0, generation_total=1.0, prompt_total=1.0, running=1.0,
                               waiting=0.0, kv_cache_usage=0.1)
    await store.watches.put("kimi", "gpu-a", 100, T0, 0, "active")
    await store.samples.record("kimi", "gpu-a", T0 + timedelta(seconds=15), generation_total=16.0,
                               prompt_total=1.0, running=1.0, waiting=0.0, kv_cache_usage=0.1)
    store.forget_watcher_memos(drop_pending=True)
    await store.flush_writes()
    assert _rows(store, watches) == 0 and _rows(store, metric_samples) == 2
    assert await store.watches.get("kimi", "gpu-a") is None  # read from the database again


async def test_samples_are_batched_with_the_same_rates_and_duplicates(store: CountingStore) -> None:
    async def sample(second: int, gen: float) -> object:
        return await store.samples.record("kimi", "gpu-a", T0 + timedelta(seconds=second),
                                          generation_total=gen, prompt_total=0.0, running=2.0, waiting=0.0,
                                          kv_cache_usage=0.5, process_start=T0 - timedelta(hours=1))

    await sample(0, 100.0)  # the first one of this process: its predecessor is looked up in the database
    trips = store.trips
    points = [await sample(s, g) for s, g in ((15, 400.0), (30, 700.0), (45, 50.0))]
    assert store.trips == trips  # rated against the previous sample in memory, queued
    assert [p.generation_tps for p in points] == [20.0, 20.0, None]  # type: ignore[attr-defined]
    assert await sample(45, 60.0) is None  # the same moment twice: refused, as the unique key would
    stored = await store.samples.between("kimi", "gpu-a", T0)  # a reader sees every sample (it flushes first)
    assert [(p.at, p.generation_tps) for p in stored] == [
        (T0, None), (T0 + timedelta(seconds=15), 20.0), (T0 + timedelta(seconds=30), 20.0),
        (T0 + timedelta(seconds=45), None)]


async def test_the_health_memo_is_kept_and_written_only_when_it_changed(store: CountingStore) -> None:
    assert await store.health_memos.get("kimi", "gpu-a") is None
    memo = HealthMemo(invocation="abc", ready_seen=True, gen_total=10.0)
    await store.health_memos.put("kimi", "gpu-a", memo, T0)
    await store.flush_writes()
    trips = store.trips
    for _ in range(3):
        got = await store.health_memos.get("kimi", "gpu-a")
        assert got == memo
        await store.health_memos.put("kimi", "gpu-a", got, T0)  # unchanged: nothing to write
    await store.flush_writes()
    assert store.trips == trips
    memo.gen_total = 20.0
    await store.health_memos.put("kimi", "gpu-a", memo, T0)
    await store.close()  # closing writes what is queued
    again = Store(store.sqlalchemy_url)
    try:
        got = await again.health_memos.get("kimi", "gpu-a")
        assert got is not None and got.gen_total == 20.0
    finally:
        await again.close()


async def test_a_health_episode_is_written_at_once(store: CountingStore) -> None:
    """Opening an unhealthy episode (its ⚠️ claimed) is in the database before the next leader could look."""
    memo = HealthMemo(invocation="abc", ready_seen=True, gen_total=10.0)
    await store.health_memos.put("kimi", "gpu-a", memo, T0)
    await store.flush_writes()
    memo.unhealthy_since, memo.unhealthy_reason = T0, "/health answered 503"
    await store.health_memos.put("kimi", "gpu-a", memo, T0)
    again = Store(store.sqlalchemy_url)
    try:
        got = await again.health_memos.get("kimi", "gpu-a")
        assert got is not None and got.unhealthy_since == T0 and got.unhealthy_reason == "/health answered 503"
    finally:
        await again.close()


def _state(state: str, reason: str | None = None) -> ServiceState:
    return ServiceState(service="kimi", node="gpu-a", unit="vllm-kimi.service", state=state,  # type: ignore[arg-type]
                        reason=reason, main_pid=4242, active="active (running)")


@pytest.mark.parametrize(("st", "memo", "sample", "judged"), [
    # ready, tokens flowing or idle, nothing open: only counters move, the lock is not read
    (_state("ready"), HealthMemo(ready_seen=True, gen_total=10.0), (20.0, 3, 0), False),
    (_state("ready"), HealthMemo(ready_seen=True, gen_total=10.0), (10.0, 0, 0), False),
    (_state("ready"), HealthMemo(), (None, 0, 0), False),
    (_state("loading", "/health: connection refused on http://x"), HealthMemo(), (None, 0, 0), False),
    # what could post: the ✅ of an open episode, no new tokens while requests run, /health failing after ready
    (_state("ready"), HealthMemo(ready_seen=True, unhealthy_since=T0), (20.0, 3, 0), True),
    (_state("ready"), HealthMemo(ready_seen=True, gen_total=10.0, hung_since=T0), (20.0, 3, 0), True),
    (_state("ready"), HealthMemo(ready_seen=True, gen_total=10.0), (10.0, 3, 1), True),
    (_state("unhealthy", "/health answered 503 on http://x"), HealthMemo(ready_seen=True), (None, 0, 0), True),
])
def test_the_lock_is_read_only_when_a_look_could_judge(st: ServiceState, memo: HealthMemo,
                                                      sample: tuple[float | None, int, int], judged: bool) -> None:
    assert _may_judge(st, memo, "active", sample) is judged


async def test_watchers_run_from_memory_and_old_persisted_ones_are_removed(tmp_path: Path) -> None:
    from bot import jobs
    from bot.app import runtime
    from bot.scheduler import VOLATILE, BotScheduler
    from config.models import BotConfig
    from handlers.notify import RecordingNotifier

    config = BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.2"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "state": {"dir": str(tmp_path)}, "watch": {"interval": "1h"},
    })
    async with runtime(config) as core:
        old = BotScheduler()
        await old.start(core.with_ports(notifier=RecordingNotifier(), jobs=old), watch=False)
        # what an older inferbot left in the database's job store
        old._sched.add_job(jobs.watch_node_job, "interval", seconds=3600, id="watch:gpu-a", args=["gpu-a"],
                           jobstore="default", next_run_time=datetime.now(UTC) + timedelta(hours=1))
        await old.shutdown()
        sched = BotScheduler()
        await sched.start(core.with_ports(notifier=RecordingNotifier(), jobs=sched), watch=True)
        try:
            assert [j.id for j in sched._sched.get_jobs(jobstore="default")] == []
            assert sorted(j.id for j in sched._sched.get_jobs(jobstore=VOLATILE)) == ["reconcile", "watch:gpu-a"]
            assert sched.job_ids() == ["reconcile", "watch:gpu-a"]
        finally:
            await sched.shutdown()
