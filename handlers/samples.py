"""Metric samples for charts: what the watcher's poll saw of each ready server's ``/metrics``."""

from __future__ import annotations

from datetime import datetime

from services.models import ServiceState
from services.store.ports import MetricSamples


async def record_samples(samples: MetricSamples, states: list[ServiceState], now: datetime) -> int:
    """Store one sample per ready service whose ``/metrics`` answered in this probe; returns how many.

    A body that was not Prometheus text left no sample (``ServiceState.metrics``; the service layer logs it).
    """
    stored = 0
    for st in states:
        sample = st.metrics
        if st.state != "ready" or sample is None:
            continue
        point = await samples.record(
            st.service, st.node, now, generation_total=sample.generation_tokens_total,
            prompt_total=sample.prompt_tokens_total, running=sample.running, waiting=sample.waiting,
            kv_cache_usage=sample.kv_cache_usage, process_start=st.since)
        stored += point is not None
    return stored
