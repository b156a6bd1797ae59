"""/metrics parsing (new and old metric names), histogram quantiles, and throughput derivation."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.models import MetricsSample, StatsLine
from services.parse import metrics
from services.parse.metrics import (
    MetricsParseError,
    histogram_quantile,
    parse_metrics,
    throughput_from_samples,
    throughput_from_stats,
)

METRICS = Path(__file__).parent / "samples" / "metrics"


def scrape(name: str) -> MetricsSample:
    return parse_metrics((METRICS / name).read_text())


T0 = scrape("new_single_t0.prom")
T1 = scrape("new_single_t1.prom")


def test_new_names_single_engine() -> None:
    assert T1.prompt_tokens_total == 165000.0
    assert T1.generation_tokens_total == 105825.0
    assert (T1.running, T1.waiting, T1.kv_cache_usage) == (18.0, 43.0, 0.959)
    assert T1.model_name == "glm-5"
    assert len(T1.ttft_buckets) == 17
    assert T1.ttft_buckets[0] == (0.001, 0.0)
    assert T1.ttft_buckets[5] == (0.06, 120.0)
    assert T1.ttft_buckets[-1] == (math.inf, 220.0)
    assert T1.itl_buckets[:3] == [(0.01, 1200.0), (0.025, 6800.0), (0.05, 10980.0)]
    assert T1.itl_buckets[-1] == (math.inf, 12000.0)


def test_unrelated_histogram_named_total_is_ignored() -> None:
    # vllm:iteration_tokens_total is a histogram whose name ends in _total: it must not leak into counters.
    assert T0.prompt_tokens_total == 150000.0
    assert T0.generation_tokens_total == 90000.0


def test_two_engines_are_summed() -> None:
    m = scrape("new_two_engines.prom")
    assert (m.prompt_tokens_total, m.generation_tokens_total) == (3500.0, 1000.0)
    assert (m.running, m.waiting) == (8.0, 2.0)
    assert m.kv_cache_usage == pytest.approx(0.6)  # mean of 0.5 and 0.7, not their sum
    assert m.ttft_buckets[4:8] == [(0.04, 10.0), (0.06, 40.0), (0.08, 70.0), (0.1, 100.0)]
    assert m.itl_buckets[:3] == [(0.01, 0.0), (0.025, 40.0), (0.05, 60.0)]


def test_old_names_are_folded_in() -> None:
    m = scrape("old_names_v08.prom")
    assert m.kv_cache_usage == 0.375
    assert m.itl_buckets == [(0.01, 0.0), (0.025, 600.0), (0.05, 1000.0), (math.inf, 1000.0)]
    assert m.ttft_buckets == [(0.02, 0.0), (0.04, 20.0), (0.1, 80.0), (math.inf, 100.0)]
    assert (m.running, m.waiting) == (6.0, 2.0)
    assert (m.prompt_tokens_total, m.generation_tokens_total) == (52000.0, 31000.0)
    assert m.model_name == "meta-llama/Llama-3.1-8B-Instruct"


def test_new_name_wins_when_both_are_exposed() -> None:
    # During the deprecation window a server exposes both names (hidden-metrics flag).
    both = (METRICS / "new_single_t0.prom").read_text() + (
        "# HELP vllm:gpu_cache_usage_perc old\n"
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="glm-5"} 0.9\n'
        "# HELP vllm:time_per_output_token_seconds old\n"
        "# TYPE vllm:time_per_output_token_seconds histogram\n"
        'vllm:time_per_output_token_seconds_bucket{engine="0",le="1.0",model_name="glm-5"} 3.0\n'
        'vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="glm-5"} 3.0\n'
    )
    m = parse_metrics(both)
    assert m.kv_cache_usage == 0.25
    assert m.itl_buckets == T0.itl_buckets


def test_untyped_counters_keep_total_suffix() -> None:
    m = parse_metrics('vllm:generation_tokens_total{engine="0"} 42.0\nvllm:num_requests_running 3\n')
    assert (m.generation_tokens_total, m.running, m.prompt_tokens_total) == (42.0, 3.0, None)


def test_empty_body_is_empty_sample() -> None:
    assert parse_metrics("") == MetricsSample()


def test_html_error_page_raises_parse_error() -> None:
    with pytest.raises(MetricsParseError, match="not Prometheus text exposition"):
        parse_metrics((METRICS / "not_metrics.html").read_text())
    assert issubclass(MetricsParseError, ValueError)


# --- histogram_quantile -----------------------------------------------------------------------------


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = [(0.1, 10.0), (0.2, 30.0), (math.inf, 40.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.04)  # lowest bucket starts at 0
    assert histogram_quantile(0.99, buckets) == 0.2  # falls into +Inf: highest finite bound


def test_histogram_quantile_without_data() -> None:
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.5, [(0.1, 3.0), (0.2, 5.0)]) is None  # no +Inf bucket


# --- throughput from two scrapes --------------------------------------------------------------------


def test_throughput_from_two_scrapes() -> None:
    t = throughput_from_samples(T0, T1, 15.0)
    assert t.generation_tps == pytest.approx(1055.0)
    assert t.prompt_tps == pytest.approx(1000.0)
    assert (t.running, t.waiting, t.kv_cache_usage) == (18, 43, 0.959)
    assert (t.source, t.age_seconds) == ("metrics", 0.0)
    # Window deltas: TTFT 50 obs in (40,60] ms, 40 in (60,80], 9 in (250,500], 1 in (2.5,5] s.
    assert t.ttft_p50_ms == pytest.approx(60.0)
    assert t.ttft_p99_ms == pytest.approx(500.0)
    # ITL: 200 in <=10 ms, 1600 in (10,25], 180 in (25,50], 20 in (100,150].
    assert t.itl_p50_ms == pytest.approx(17.5)
    assert t.itl_p99_ms == pytest.approx(50.0)


def test_quiet_window_falls_back_to_cumulative_buckets() -> None:
    t = throughput_from_samples(T1, T1, 10.0)
    assert t.generation_tps == 0.0
    assert t.ttft_p50_ms == pytest.approx(57.5)  # cumulative: rank 110 in (40,60] ms holding 80
    assert t.itl_p50_ms == pytest.approx(22.857142857)


def test_counter_reset_gives_no_rate() -> None:
    restarted = scrape("new_single_restarted.prom")
    t = throughput_from_samples(T1, restarted, 15.0)
    assert t.generation_tps is None
    assert t.prompt_tps is None
    assert (t.running, t.waiting, t.kv_cache_usage) == (1, 0, 0.01)
    assert t.ttft_p50_ms == pytest.approx(40.0)  # buckets since the restart
    assert t.itl_p50_ms == pytest.approx(17.5)


def test_two_engines_cumulative_latency() -> None:
    m = scrape("new_two_engines.prom")
    t = throughput_from_samples(m, m, 10.0)
    assert t.ttft_p50_ms == pytest.approx(66.666666667)
    assert (t.running, t.waiting) == (8, 2)


def test_no_histograms_no_latency() -> None:
    a = MetricsSample(generation_tokens_total=100.0)
    b = MetricsSample(generation_tokens_total=400.0)
    t = throughput_from_samples(a, b, 10.0)
    assert t.generation_tps == 30.0
    assert (t.prompt_tps, t.ttft_p50_ms, t.itl_p99_ms, t.running, t.kv_cache_usage) == (None,) * 5


def test_zero_interval_gives_no_rate() -> None:
    assert throughput_from_samples(T0, T1, 0.0).generation_tps is None


# --- throughput from a stats line -------------------------------------------------------------------


def test_throughput_from_stats_line() -> None:
    line = StatsLine(
        prompt_tps=0.0,
        generation_tps=1055.3,
        running=18,
        waiting=43,
        kv_cache_usage=0.959,
        at=datetime(2026, 5, 19, 10, 13, 11, tzinfo=UTC),
    )
    t = throughput_from_stats(line, datetime(2026, 5, 19, 10, 13, 36, tzinfo=UTC))
    assert (t.generation_tps, t.prompt_tps, t.running, t.waiting, t.kv_cache_usage) == (
        1055.3,
        0.0,
        18,
        43,
        0.959,
    )
    assert (t.source, t.age_seconds) == ("log", 25.0)
    assert t.ttft_p50_ms is None


def test_throughput_from_stats_without_time() -> None:
    line = StatsLine(prompt_tps=1.0, generation_tps=2.0, running=1, waiting=0)
    assert throughput_from_stats(line, datetime(2026, 1, 1, tzinfo=UTC)).age_seconds is None


# --- the plain-line path (the watcher's filtered scrape) reads what prometheus_client reads ---------------

PLAIN = [
    'vllm:num_requests_running{engine="0",model_name="kimi-k2.5"} 22.0',
    'vllm:generation_tokens_total{engine="0",model_name="kimi-k2.5"} 1807',
    'vllm:kv_cache_usage_perc{engine="0",model_name="a,b c=d"} 4.9e-01',
    'vllm:prompt_tokens_total 12.',
    'vllm:prompt_tokens_total{} -3',
    'vllm:prompt_tokens_total{engine="0",} 12345678901234567890',
    'other_metric:x{a="é ü"} 1E3',
    'vllm:num_requests_waiting{model_name=""} 0',
]
NOT_PLAIN = [
    '# HELP vllm:num_requests_running running',
    'vllm:num_requests_running{model_name="a\\"b"} 1',  # an escape
    'vllm:num_requests_running{model_name="a}b"} 1',  # a brace inside a value
    'vllm:num_requests_running{__name__="x"} 1',  # a reserved label
    'vllm:num_requests_running{a="1",a="2"} 1',  # a label twice
    'vllm:num_requests_running 1 1700000000000',  # a timestamp
    'vllm:num_requests_running  1',
    'vllm:num_requests_running\t1',
    'vllm:num_requests_running { a="1"} 1',
    'vllm:num_requests_running{a = "1"} 1',
    'vllm:num_requests_running NaN',
    'vllm:num_requests_running +Inf',
    'vllm:num_requests_running +1',
    'vllm:num_requests_running .5',
    'vllm:num_requests_running 1_000',
    'vllm:num_requests_running 1 # {trace_id="x"} 1',
    '<html>not metrics</html>',
    '200',
]


def _library(text: str) -> list[tuple[str, dict[str, str], float]] | str:
    try:
        return metrics._library_samples(text)
    except Exception as e:
        return f"error: {type(e).__name__}"


@pytest.mark.parametrize("line", PLAIN)
def test_a_plain_line_is_read_as_prometheus_client_reads_it(line: str) -> None:
    got = metrics._plain_samples(line)
    assert got is not None and got == _library(line)
    for v in got:
        assert type(v[2]) is float


@pytest.mark.parametrize("line", NOT_PLAIN)
def test_anything_else_goes_to_prometheus_client(line: str) -> None:
    assert metrics._plain_samples(line) is None
    assert metrics._plain_samples("\n".join([PLAIN[0], line, PLAIN[1]])) is None


def test_the_recorded_watcher_scrapes_take_the_plain_path_with_the_same_result() -> None:
    from services.node.probe import parse_output

    for name in ("watch-ready.out", "watch-loading.out"):
        raw = parse_output((Path(__file__).parent / "samples" / "probe" / name).read_text())
        for unit in raw.units:
            for scrape in unit.metrics:
                body = scrape.probe.body
                assert metrics._plain_samples(body) == _library(body)
                assert metrics._plain_samples(body) is not None
                assert parse_metrics(body) == metrics._parse_from(metrics._library_samples(body))


@pytest.mark.parametrize("name", sorted(p.name for p in METRICS.glob("*.prom")))
def test_whole_scrapes_without_their_comments_read_the_same_either_way(name: str) -> None:
    text = (METRICS / name).read_text()
    bare = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    plain = metrics._plain_samples(bare)
    assert plain is not None and plain == _library(bare)
    assert metrics._parse(bare) == metrics._parse_from(metrics._library_samples(bare))
    assert metrics._plain_samples(text) is None  # with # HELP / # TYPE: prometheus_client's


@pytest.mark.parametrize("name", sorted(p.name for p in METRICS.glob("*.prom")))
def test_a_whole_scrape_reads_as_prometheus_client_reads_all_of_it(name: str) -> None:
    """Only the families read are parsed (busy_v1_whole.prom: a busy V1 engine's whole exposition, recorded
    from the real-systemd tier); what comes out is what reading every line with prometheus_client gives."""
    text = (METRICS / name).read_text()
    assert parse_metrics(text) == metrics._parse_from(metrics._library_samples(text))


def test_a_scrape_cut_short_or_not_an_exposition_is_read_whole() -> None:
    text = (METRICS / "busy_v1_whole.prom").read_text()
    assert metrics._read_lines(text).count("\n") < text.count("\n") // 5
    cut = text[: text.index("vllm:generation_tokens_total{") + 20]
    assert metrics._read_lines(cut) == cut
    with pytest.raises(MetricsParseError):
        parse_metrics(cut)
    page = "<html><body>502 Bad Gateway</body></html>\n" + text
    assert metrics._read_lines(page) == page
