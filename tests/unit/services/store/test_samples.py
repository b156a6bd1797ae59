"""services/store/samples.py: the charts' metric samples — rates from consecutive samples of one process, a
counter reset giving no rate, 5-minute buckets after 24 h, nothing after 7 days, and samples outliving the bot.

On a SQLite file and on a real PostgreSQL; the repository on its own database and the leader's write queue.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from services.store.ports import MetricSamples
from services.store.samples import SamplesRepo
from services.store.store import Store
from services.store.write_queue import WriteQueue

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def samples(queue: WriteQueue) -> SamplesRepo:
    return SamplesRepo(queue)


async def sample(samples: MetricSamples, at: datetime, gen: float, prompt: float, running: float = 3,
                 waiting: float = 0, start: datetime = T0 - timedelta(days=30), service: str = "kimi") -> None:
    await samples.record(service, "gpu-a", at, generation_total=gen, prompt_total=prompt,
                         running=running, waiting=waiting, kv_cache_usage=0.25, process_start=start)


async def test_rates_come_from_consecutive_samples_and_a_reset_gives_none(samples: SamplesRepo) -> None:
    await sample(samples, T0, 1000, 5000)
    await sample(samples, T0 + timedelta(seconds=60), 7000, 8000)  # +6000 gen, +3000 prompt in 60 s
    await sample(samples, T0 + timedelta(seconds=120), 500, 100)  # counters went down: the server restarted
    await sample(samples, T0 + timedelta(seconds=180), 3500, 1300)
    new = T0 + timedelta(seconds=200)  # a new process whose counters happen to be higher: still no rate
    await sample(samples, T0 + timedelta(seconds=240), 99_000, 99_000, start=new)
    points = await samples.between("kimi", "gpu-a", T0 - timedelta(minutes=1))
    assert [(p.generation_tps, p.prompt_tps) for p in points] == [
        (None, None), (100.0, 50.0), (None, None), (50.0, 20.0), (None, None)]
    latest = await samples.latest()
    assert latest[("kimi", "gpu-a")].at == T0 + timedelta(seconds=240)


async def test_downsampled_after_24h_and_dropped_after_7_days(samples: SamplesRepo) -> None:
    # A sample a minute for 26 hours, generation rate 10 tok/s in the first 5-minute bucket and 20 after.
    gen = 0.0
    with time_machine.travel(T0, tick=False) as clock:
        for minute in range(26 * 60 + 1):
            gen += (10 if minute <= 5 else 20) * 60
            await sample(samples, T0 + timedelta(minutes=minute), gen, 0)
        clock.move_to(T0 + timedelta(hours=26))
        folded, dropped = await samples.compact(datetime.now(UTC))
    points = await samples.between("kimi", "gpu-a", T0 - timedelta(days=1))
    buckets = [p for p in points if p.resolution_s == 300]
    raw = [p for p in points if p.resolution_s == 0]
    assert folded == 2 * 60 and dropped == 0  # the first two hours are older than 24 h
    assert len(buckets) == 24 and buckets[0].at == T0 and buckets[1].at == T0 + timedelta(minutes=5)
    assert buckets[0].generation_tps == pytest.approx(10.0)  # minutes 0-4: no rate yet, then 10, 10, 10, 10
    assert buckets[1].generation_tps == pytest.approx(18.0)  # minutes 5-9: 10, 20, 20, 20, 20
    assert all(b.generation_tps == pytest.approx(20.0) for b in buckets[2:])
    assert all(b.running == 3 and b.kv_cache_usage == pytest.approx(0.25) for b in buckets)
    assert raw[0].at == T0 + timedelta(hours=2) and len(raw) == 24 * 60 + 1
    assert await samples.compact(T0 + timedelta(hours=26)) == (0, 0)  # folding twice changes nothing
    # Seven days later everything older than a week is gone; the newest samples stay.
    assert (await samples.compact(T0 + timedelta(days=7, hours=2, minutes=30)))[1] == 24 + 30
    left = await samples.between("kimi", "gpu-a", T0 - timedelta(days=1))
    assert left[0].at == T0 + timedelta(hours=2, minutes=30)


async def test_samples_survive_a_restart_of_the_bot(url: str) -> None:
    first = Store(url)
    await sample(first.samples, T0, 0, 0)
    await first.close()
    second = Store(url)  # a new process: the next sample still gets its rate from the stored one
    try:
        await sample(second.samples, T0 + timedelta(seconds=10), 1000, 0)
        points = await second.samples.between("kimi", "gpu-a", T0)
        assert [p.generation_tps for p in points] == [None, 100.0]
    finally:
        await second.close()
