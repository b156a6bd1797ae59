"""Bench result files: grep extracts and full JSON, newest-per-concurrency summary, one-line format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.models import BenchResult, BenchSummary
from services.parse.bench import format_bench, parse_bench_extract, parse_bench_json, summarize_bench

BENCH = Path(__file__).parent / "samples" / "bench"
REMOTE_DIR = "/srv/vllm/bench"
GLM_FILES = [
    "openai-infqps-concurrency1-GLM-5-FP8-20260221-101500",
    "openai-infqps-concurrency8-GLM-5-FP8-20260221-102000",
    "openai-infqps-concurrency64-GLM-5-FP8-20260115-090000",
    "openai-infqps-concurrency64-GLM-5-FP8-20260221-103000",
    "sweep",
]


def remote(stem: str) -> str:
    return f"{REMOTE_DIR}/{stem}.json"


def extract_records(stems: list[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for stem in stems:
        records += parse_bench_extract(remote(stem), (BENCH / "extracts" / f"{stem}.txt").read_text())
    return records


def json_records(stems: list[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for stem in stems:
        records += parse_bench_json(remote(stem), (BENCH / "json" / f"{stem}.json").read_text())
    return records


def test_extract_one_run() -> None:
    [rec] = extract_records(["openai-infqps-concurrency1-GLM-5-FP8-20260221-101500"])
    assert rec == {
        "date": "20260221-101500",
        "backend": "openai",
        "label": None,
        "model_id": "/models/GLM-5-FP8",
        "num_prompts": 100,
        "request_rate": "inf",
        "max_concurrency": 1,
        "completed": 100,
        "output_throughput": 82.46,
        "max_output_tokens_per_s": 97.0,
        "median_ttft_ms": 180.2,
        "p99_ttft_ms": 950.7,
        "mean_tpot_ms": 12.1,
        "_file": "/srv/vllm/bench/openai-infqps-concurrency1-GLM-5-FP8-20260221-101500.json",
    }


def test_extract_append_result_file_splits_at_date() -> None:
    recs = extract_records(["sweep"])
    assert [(r["date"], r["max_concurrency"], r["output_throughput"], r["completed"]) for r in recs] == [
        ("20260210-080000", 8, 499.0, 1000),
        ("20260221-120000", 16, 0.0, 0),
        ("20260221-110000", None, 1402.7, 1000),
    ]
    assert {r["label"] for r in recs} == {"sweep"}


def test_extract_tolerates_grep_filename_prefix_and_junk() -> None:
    text = (
        'sweep.json:"date": "20260301-000000"\n'
        "grep: other.json: Permission denied\n"
        'sweep.json:"output_throughput": 12.5\n'
        '"max_concurrency": null\n'
    )
    assert parse_bench_extract("x.json", text) == [
        {"date": "20260301-000000", "output_throughput": 12.5, "max_concurrency": None, "_file": "x.json"}
    ]


def test_extract_missing_date_uses_file_name() -> None:
    stem = "vllm-infqps-concurrency2-tiny-llama-20261202-102553"
    [rec] = extract_records([stem])
    assert rec["date"] == "20261202-102553"
    summary = summarize_bench([rec])
    assert summary.peak == BenchResult(
        output_throughput=150.25, max_concurrency=2, date="2026-12-02", file=remote(stem)
    )
    assert summary.single_stream is None


def test_json_and_extract_agree() -> None:
    keys = ("date", "max_concurrency", "output_throughput", "completed", "_file")
    from_json = [{k: r.get(k) for k in keys} for r in json_records(GLM_FILES)]
    from_extract = [{k: r.get(k) for k in keys} for r in extract_records(GLM_FILES)]
    assert from_json == from_extract
    assert len(from_json) == 7


def test_json_pretty_printed_single_object_and_list() -> None:
    stem = "vllm-infqps-concurrency2-tiny-llama-20261202-102553"
    [rec] = json_records([stem])
    assert (rec["date"], rec["output_throughput"], rec["max_concurrency"]) == ("20261202-102553", 150.25, 2)
    listed = parse_bench_json("l.json", '[{"date": "20260101-000000", "output_throughput": 1.5}]')
    assert listed == [{"date": "20260101-000000", "output_throughput": 1.5, "_file": "l.json"}]


def test_json_skips_a_corrupt_line_in_an_append_file() -> None:
    text = (
        '{"date": "20260101-000000", "output_throughput": 1.5}\n{"date": "2026\n{"date": "20260102-000000"}\n'
    )
    assert [r["date"] for r in parse_bench_json("a.json", text)] == ["20260101-000000", "20260102-000000"]


# --- summary ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reader", [extract_records, json_records])
def test_summary_newest_per_concurrency(reader: Any) -> None:
    summary = summarize_bench(reader(GLM_FILES))
    assert summary == BenchSummary(
        single_stream=BenchResult(
            output_throughput=82.46,
            max_concurrency=1,
            date="2026-02-21",
            file=remote("openai-infqps-concurrency1-GLM-5-FP8-20260221-101500"),
        ),
        # The Jan run at 64 (1790 tok/s) is superseded; max_output_tokens_per_s (2304) is a burst.
        peak=BenchResult(
            output_throughput=1536.42,
            max_concurrency=64,
            date="2026-02-21",
            file=remote("openai-infqps-concurrency64-GLM-5-FP8-20260221-103000"),
        ),
    )


def test_example_line() -> None:
    summary = summarize_bench(extract_records(GLM_FILES))
    assert format_bench(summary) == (
        "82.5 tok/s single-stream (2026-02-21), 1,536 tok/s peak (concurrency 64, 2026-02-21)"
    )


def test_order_of_files_does_not_matter() -> None:
    forward = summarize_bench(extract_records(GLM_FILES))
    backward = summarize_bench(extract_records(list(reversed(GLM_FILES))))
    assert forward == backward


def test_unlimited_concurrency_is_its_own_group_and_can_be_peak() -> None:
    recs = extract_records(["sweep"])
    summary = summarize_bench(recs)
    assert summary.single_stream is None
    assert summary.peak is not None
    assert (summary.peak.output_throughput, summary.peak.max_concurrency) == (1402.7, None)
    assert format_bench(summary) == "1,403 tok/s peak (concurrency unlimited, 2026-02-21)"


def test_failed_and_incomplete_runs_are_ignored() -> None:
    recs: list[dict[str, Any]] = [
        {"date": "20260301-000000", "max_concurrency": 1, "completed": 0, "output_throughput": 0.0},
        {"date": "20260302-000000", "max_concurrency": 1, "completed": 5},
        {"date": "20260201-000000", "max_concurrency": 1, "completed": 5, "output_throughput": 40.04},
    ]
    summary = summarize_bench(recs)
    assert summary.single_stream is not None
    assert (summary.single_stream.output_throughput, summary.single_stream.date) == (40.04, "2026-02-01")
    # Only a single-stream run: it is not repeated as the peak.
    assert format_bench(summary) == "40.0 tok/s single-stream (2026-02-01)"


def test_nothing_to_summarize() -> None:
    assert summarize_bench([]) == BenchSummary()
    assert format_bench(BenchSummary()) == ""


def test_format_thousands_and_decimals() -> None:
    summary = BenchSummary(
        single_stream=BenchResult(output_throughput=99.94, max_concurrency=1, date="2026-01-02", file="a"),
        peak=BenchResult(output_throughput=12345.6, max_concurrency=256, date="2026-01-03", file="b"),
    )
    assert format_bench(summary) == (
        "99.9 tok/s single-stream (2026-01-02), 12,346 tok/s peak (concurrency 256, 2026-01-03)"
    )
