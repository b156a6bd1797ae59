"""services/node/throughput.py: recorded vLLM /metrics scrapes (tests/samples/metrics), each parsed once; the
expected numbers are the recordings' own lines."""

from __future__ import annotations

import logging

import pytest

from services.models import HttpProbe
from services.node import throughput
from services.node.node_facts import NodeFacts
from services.node.probe import MetricsScrape, NodeRaw, UnitRaw
from services.node.throughput import read_traffic
from tests.unit.services.node.recorded import SAMPLES, node, unit

METRICS = SAMPLES / "metrics"
FACTS = NodeFacts(node("settings-ready"))


def scrape(name: str, at: float) -> MetricsScrape:
    return MetricsScrape(at=at, probe=HttpProbe(url="http://n:8000/metrics", status=200,
                                                body=(METRICS / name).read_text()))


def scraped(*scrapes: MetricsScrape) -> UnitRaw:
    return UnitRaw(unit="vllm.service", metrics=list(scrapes))


def test_two_scrapes_give_rates_and_the_newest_gauges() -> None:
    t = read_traffic(scraped(scrape("new_single_t0.prom", 100.0), scrape("new_single_t1.prom", 115.0)), "", FACTS)
    assert t.throughput is not None and t.throughput.source == "metrics"
    # generation_tokens_total 90000 → 105825 and prompt_tokens_total 150000 → 165000 in 15 s
    assert t.throughput.generation_tps == pytest.approx(1055.0)
    assert t.throughput.prompt_tps == pytest.approx(1000.0)
    assert (t.throughput.running, t.throughput.waiting, t.throughput.kv_cache_usage) == (18, 43, 0.959)
    assert t.sample is not None and t.sample.generation_tokens_total == 105825.0  # the newest scrape
    assert (t.sample.running, t.sample.waiting) == (18.0, 43.0)


def test_a_restarted_server_has_no_rate() -> None:
    t = read_traffic(scraped(scrape("new_single_t1.prom", 0.0), scrape("new_single_restarted.prom", 2.0)), "", FACTS)
    assert t.throughput is not None and t.throughput.generation_tps is None  # 105825 → 1200: a counter reset
    assert t.sample is not None and t.sample.generation_tokens_total == 1200.0


def test_one_scrape_gives_its_gauges_summed_over_engines() -> None:
    t = read_traffic(scraped(scrape("new_two_engines.prom", 0.0)), "", FACTS)
    assert t.throughput is not None
    assert (t.throughput.running, t.throughput.waiting) == (8, 2)  # 3 + 5 running, 0 + 2 waiting
    assert t.throughput.kv_cache_usage == pytest.approx(0.6)  # (0.5 + 0.7) / 2
    assert t.throughput.generation_tps is None and t.throughput.age_seconds == 0
    assert t.sample is not None and t.sample.generation_tokens_total == 1000.0  # 400 + 600


def test_old_metric_names_are_read_too() -> None:
    t = read_traffic(scraped(scrape("old_names_v08.prom", 0.0)), "", FACTS)
    assert t.sample is not None and (t.sample.generation_tokens_total, t.sample.kv_cache_usage) == (31000.0, 0.375)


def test_a_body_that_is_not_prometheus_text_leaves_no_sample_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=throughput.log.name):
        t = read_traffic(scraped(scrape("not_metrics.html", 0.0)), "", FACTS)
    assert t.sample is None and t.throughput is None
    assert "/metrics of vllm.service not read" in caplog.text


def test_without_a_scrape_the_journals_stats_line_says_it() -> None:
    journal = (SAMPLES / "logs" / "stats_v0.log").read_text()
    facts = NodeFacts(NodeRaw(now=FACTS.now))
    t = read_traffic(scraped(), journal, facts)
    assert t.sample is None and t.throughput is not None and t.throughput.source == "log"
    # The newest stats line of the recording: 298.2 tokens/s generated, 6 running, 5 pending.
    assert (t.throughput.generation_tps, t.throughput.running, t.throughput.waiting) == (298.2, 6, 5)


def test_the_watchers_filtered_scrape_is_a_sample() -> None:
    t = read_traffic(unit("watch-ready"), "", NodeFacts(node("watch-ready")))
    # The recorded scrape's lines: generation_tokens_total 1807, 22 running, 0 waiting, KV cache 0.49.
    assert t.sample is not None
    assert (t.sample.generation_tokens_total, t.sample.running, t.sample.waiting) == (1807.0, 22.0, 0.0)
    assert t.throughput is not None and t.throughput.kv_cache_usage == 0.49


def test_only_answered_scrapes_count() -> None:
    failed = MetricsScrape(at=0.0, probe=HttpProbe(url="http://n:8000/metrics", status=503, body="busy"))
    t = read_traffic(scraped(failed, scrape("new_single_t1.prom", 1.0)), "", FACTS)
    assert t.throughput is not None and t.throughput.generation_tps is None and t.throughput.running == 18
