"""services/node/probe/options.py: what a probe asks, and the fixed filters the node applies — checked on recorded
real output: the journal filter keeps every line the log parser reads, the /metrics filter every number the
watcher samples, and the benchmark pattern reads exactly what the node extracted from vLLM's result files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from services.node.probe.options import BENCH_RE, JOURNAL_FILTER, METRICS_FILTER, ProbeOptions, ProbeTarget
from services.parse import vllm_log
from services.parse.metrics import parse_metrics

ROOT = Path(__file__).resolve().parents[5]
SAMPLES = ROOT / "tests" / "samples"


@pytest.mark.parametrize("name", ["new_single_t1.prom", "new_two_engines.prom", "old_names_v08.prom",
                                  "new_single_restarted.prom"])
def test_the_watchers_metrics_filter_keeps_every_number_it_samples(name: str) -> None:
    full = (ROOT / "tests" / "samples" / "metrics" / name).read_text()
    pattern = re.compile(METRICS_FILTER)  # grep -E on the node: the same syntax for this pattern
    kept = "\n".join(line for line in (full + "\n200").splitlines() if pattern.search(line))
    body, _, code = kept.rpartition("\n")
    assert code == "200"
    a, b = parse_metrics(full), parse_metrics(body)
    assert (b.prompt_tokens_total, b.generation_tokens_total, b.running, b.waiting, b.kv_cache_usage) == (
        a.prompt_tokens_total, a.generation_tokens_total, a.running, a.waiting, a.kv_cache_usage)
    assert a.generation_tokens_total is not None and a.running is not None
    assert len(body) < len(full) / 3, (len(body), len(full))


@pytest.mark.parametrize("path", sorted((SAMPLES / "logs").glob("*.log")), ids=lambda p: p.name)
def test_the_journal_filter_keeps_every_line_the_log_parser_reads(path: Path) -> None:
    full = path.read_text()
    pattern = re.compile(JOURNAL_FILTER)  # awk's ERE on the node: the same syntax for this pattern
    kept = "\n".join(line for line in full.splitlines() if pattern.search(line))
    a, b = vllm_log.parse_load_progress(full), vllm_log.parse_load_progress(kept)
    assert a.model_dump(exclude={"last_line"}) == b.model_dump(exclude={"last_line"})  # access-log lines go
    assert vllm_log.load_durations(kept) == vllm_log.load_durations(full)
    assert vllm_log.parse_stats_lines(kept, 2026) == vllm_log.parse_stats_lines(full, 2026)
    assert vllm_log.parse_banner_version(kept) == vllm_log.parse_banner_version(full)


def test_the_journal_filter_drops_a_busy_servers_access_log() -> None:
    pattern = re.compile(JOURNAL_FILTER)
    access = '(APIServer pid=48211) INFO:     127.0.0.1:51944 - "GET /v1/models HTTP/1.1" 200 OK'
    assert not pattern.search(access)
    startup = (SAMPLES / "logs" / "startup_tp8_119shards.log").read_text().splitlines()
    assert len([line for line in startup if pattern.search(line)]) < len(startup)


@pytest.mark.parametrize("path", sorted((SAMPLES / "bench" / "json").glob("*.json")), ids=lambda p: p.name)
def test_the_bench_pattern_reads_what_the_node_extracted(path: Path) -> None:
    extract = (SAMPLES / "bench" / "extracts" / path.name.replace(".json", ".txt")).read_text().splitlines()
    assert [m.group(0) for m in re.finditer(BENCH_RE, path.read_text())] == extract


def test_a_question_is_hashable_and_bounded() -> None:
    # Hashable: the remote command is built once per distinct question and set of units.
    assert len({ProbeOptions(), ProbeOptions(), ProbeOptions(journal_lines=0)}) == 2
    assert hash(ProbeTarget(unit="vllm-kimi.service")) == hash(ProbeTarget(unit="vllm-kimi.service"))
    for bad in ({"journal_lines": 5001}, {"metrics_samples": 3}, {"log_lines": 201}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            ProbeOptions.model_validate(bad)
    with pytest.raises(ValidationError, match="a persistent probe cannot ask /v1/models"):
        ProbeOptions(persistent=True)
    assert ProbeOptions(persistent=True, api_info=False).persistent
