"""A unit's traffic: its ``/metrics`` scrapes, each parsed once, and the throughput they (or vLLM's periodic
stats line in the journal) show."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from services.models import MetricsSample, Throughput
from services.node.node_facts import NodeFacts
from services.node.probe import MetricsScrape, UnitRaw
from services.parse import metrics as metrics_parser
from services.parse import vllm_log

log = logging.getLogger("inferbot.metrics")


@dataclass(frozen=True, slots=True)
class Traffic:
    """What a probe saw of a unit's traffic."""

    sample: MetricsSample | None  # the newest scrape that answered, parsed (None: none, or not Prometheus text)
    throughput: Throughput | None


def read_traffic(raw: UnitRaw, journal: str, facts: NodeFacts) -> Traffic:
    """The newest ``/metrics`` sample and the throughput: the rate between the first and the newest scrape,
    else vLLM's newest stats line, else the gauges of the one scrape."""
    ok = [m for m in raw.metrics if m.probe.status == 200]
    newest = _parse(raw.unit, ok[-1]) if ok else None
    if len(ok) >= 2:
        first = _parse(raw.unit, ok[0])
        if first is not None and newest is not None:
            dt = max(0.001, ok[-1].at - ok[0].at)
            return Traffic(newest, metrics_parser.throughput_from_samples(first, newest, dt))
    now = facts.now
    if journal and now is not None:
        line = vllm_log.parse_stats_lines(journal, year=now.year, tz_offset=facts.raw.tz)
        if line is not None:
            return Traffic(newest, metrics_parser.throughput_from_stats(line, now))
    if len(ok) == 1 and newest is not None:
        return Traffic(newest, Throughput(
            running=int(newest.running) if newest.running is not None else None,
            waiting=int(newest.waiting) if newest.waiting is not None else None,
            kv_cache_usage=newest.kv_cache_usage, source="metrics", age_seconds=0,
        ))
    return Traffic(newest, None)


def _parse(unit: str, scrape: MetricsScrape) -> MetricsSample | None:
    try:
        return metrics_parser.parse_metrics(scrape.probe.body)
    except metrics_parser.MetricsParseError as e:
        # An HTML error page or a cut body: no sample, and no rate from it; the next probe tries again.
        log.info("/metrics of %s not read: %s", unit, e)
        return None
