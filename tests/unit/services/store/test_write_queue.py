"""services/store/write_queue.py: the leader's rows, written together once a second, and forgotten with the lead."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from services.store.schema import metric_samples, watches
from services.store.store import Store
from services.store.write_queue import WATCHER_FLUSH_S, WriteQueue

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


def _sample(at: datetime) -> dict[str, object]:
    return {"service": "kimi", "node": "gpu-a", "at": at, "resolution_s": 0, "generation_total": 1.0,
            "prompt_total": None, "running": None, "waiting": None, "kv_cache_usage": None,
            "process_start": None, "generation_tps": None, "prompt_tps": None}


def _watch(pid: int) -> dict[str, object]:
    return {"main_pid": pid, "started_at": None, "n_restarts": 0, "active_state": "active", "updated_at": T0}


def _rows(store: Store, table: object) -> list[tuple[object, ...]]:
    with store.db.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(table))]  # type: ignore[call-overload]


async def test_queued_rows_go_in_one_trip_and_the_newest_upsert_wins(store: Store) -> None:
    await store.prepare()
    trips = 0
    real = store.db.run

    async def counting(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal trips
        trips += 1
        return await real(fn, *args, **kwargs)

    store.db.run = counting  # type: ignore[method-assign]
    key = {"service": "kimi", "node": "gpu-a"}
    for pid in (100, 200, 300):
        store.writes.upsert_later(watches, key, _watch(pid))
    for s in range(3):
        store.writes.insert_later(metric_samples, _sample(T0 + timedelta(seconds=15 * s)))
    assert _rows(store, watches) == [] and trips == 0  # nothing written yet
    await store.flush_writes()
    assert trips == 1
    assert [r[2] for r in _rows(store, watches)] == [300]
    assert len(_rows(store, metric_samples)) == 3
    await store.flush_writes()  # nothing queued: no trip
    assert trips == 1


async def test_a_row_another_process_wrote_meanwhile_does_not_lose_the_batch(store: Store, url: str) -> None:
    other = Store(url)
    try:
        store.writes.insert_later(metric_samples, _sample(T0))
        store.writes.insert_later(metric_samples, _sample(T0 + timedelta(seconds=15)))
        store.writes.upsert_later(watches, {"service": "kimi", "node": "gpu-a"}, _watch(100))
        other.writes.insert_later(metric_samples, _sample(T0))  # the same sample, by the other replica
        await other.flush_writes()
        await store.flush_writes()  # the batch collides; its rows are written one by one instead
        with store.db.engine.connect() as conn:
            count = conn.execute(select(func.count()).select_from(metric_samples)).scalar_one()
        assert count == 2
        assert [r[2] for r in _rows(store, watches)] == [100]
    finally:
        await other.close()


async def test_forgetting_the_lead_clears_memos_and_drops_only_the_upserts(store: Store) -> None:
    memo = store.writes.memo({("kimi", "gpu-a"): "seen"})
    store.writes.insert_later(metric_samples, _sample(T0))
    store.writes.upsert_later(watches, {"service": "kimi", "node": "gpu-a"}, _watch(100))
    store.forget_watcher_memos()
    assert memo == {}
    store.forget_watcher_memos(drop_pending=True)
    await store.flush_writes()
    assert _rows(store, watches) == [] and len(_rows(store, metric_samples)) == 1


async def test_queued_rows_go_by_themselves_within_the_batching_second(queue: WriteQueue) -> None:
    await queue.db.prepare()
    started = time.monotonic()
    queue.insert_later(metric_samples, _sample(T0))
    queue.upsert_later(watches, {"service": "kimi", "node": "gpu-a"}, _watch(100))

    def count(table: object) -> int:
        with queue.db.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]

    assert count(metric_samples) == 0  # not yet: they wait for the others of this second
    for _ in range(int((WATCHER_FLUSH_S + 5) / 0.05)):
        if count(watches):
            break
        await asyncio.sleep(0.05)
    assert count(metric_samples) == 1 and count(watches) == 1
    assert time.monotonic() - started >= 0.9  # by the timer, about a second later, not at once
