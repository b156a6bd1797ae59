"""Metric samples for charts: what the watcher's poll saw of each ready server's ``/metrics``."""

from __future__ import annotations

import logging
from datetime import datetime

from services.models import ServiceState
from services.node.probe import NodeRaw
from services.parse.metrics import MetricsParseError, parse_metrics
from services.store.ports import MetricSamples

log = logging.getLogger("inferbot.samples")


async def record_samples(samples: MetricSamples, states: list[ServiceState], raw: NodeRaw | None, now: datetime) -> int:
    """Store one sample per ready service whose ``/metrics`` answered in this probe; returns how many.

    A body that is not Prometheus text is skipped (logged), never fatal to the watcher.
    """
    if raw is None:
        return 0
    by_unit = {u.unit: u for u in raw.units}
    stored = 0
    for st in states:
        unit = by_unit.get(st.unit)
        if st.state != "ready" or unit is None:
            continue
        scrapes = [m for m in unit.metrics if m.probe.status == 200]
        if not scrapes:
            continue
        try:
            sample = parse_metrics(scrapes[-1].probe.body)
        except MetricsParseError as e:
            log.info("metrics of %s@%s not sampled: %s", st.service, st.node, e)
            continue
        point = await samples.record(
            st.service, st.node, now, generation_total=sample.generation_tokens_total,
            prompt_total=sample.prompt_tokens_total, running=sample.running, waiting=sample.waiting,
            kv_cache_usage=sample.kv_cache_usage, process_start=st.since)
        stored += point is not None
    return stored
