"""handlers/common.py: the words every answer shares — durations, "13 min ago", the state line, the tables.

The expected words are written out by hand, as a person reads a card; the states are typed records as the
service layer hands them over.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handlers.common import (
    ago,
    env_section,
    flag_rows,
    fmt_duration,
    gpu_section,
    node_not_reached,
    not_reached,
    remaining,
    state_line,
    throughput_line,
    warnings_section,
    worst,
)
from services.models import GpuInfo, NodeError, ServiceState, Throughput

NOW = datetime(2026, 2, 21, 13, 30, tzinfo=UTC)


def st(**kw: Any) -> ServiceState:
    base: dict[str, Any] = {"service": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service", "state": "ready"}
    return ServiceState(**{**base, **kw})


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0s"), (-5, "0s"), (45, "45s"), (59.6, "1m 00s"), (1754, "29m 14s"), (3600, "1h 00m"), (7500, "2h 05m"),
    (47 * 3600 + 59 * 60, "47h 59m"), (48 * 3600, "2d 0h"), (3 * 86400 + 5 * 3600, "3d 5h"),
])
def test_durations_read_as_people_write_them(seconds: float, words: str) -> None:
    assert fmt_duration(seconds) == words


@pytest.mark.parametrize(("before", "words"), [
    (timedelta(seconds=12), "12 s ago"), (timedelta(minutes=13, seconds=40), "13 min ago"),
    (timedelta(hours=2), "2 h ago"), (timedelta(hours=2, minutes=5), "2 h 5 min ago"),
    (timedelta(days=3, hours=1), "3 days ago"), (timedelta(seconds=-30), "just now (node clock ahead)"),
])
def test_how_long_ago(before: timedelta, words: str) -> None:
    assert ago(NOW - before, NOW) == words
    assert ago(None, NOW) == "at an unknown time"


@pytest.mark.parametrize(("seconds", "words"), [
    (40, "~40 s remaining"), (89, "~89 s remaining"), (90, "~2 min remaining"), (17 * 60, "~17 min remaining"),
    (119 * 60, "~119 min remaining"), (150 * 60, "~2 h 30 min remaining"),
])
def test_time_remaining(seconds: float, words: str) -> None:
    assert remaining(seconds) == words


def test_the_state_line_says_what_a_person_wants_first() -> None:
    loading = st(state="loading", active="active (running)", since=NOW - timedelta(minutes=13), phase="loading_weights",
                 eta_seconds=17 * 60)
    assert state_line(loading, NOW) == "active, loading — started 13 min ago (loading weights), ~17 min remaining"
    ready = st(state="ready", active="active (running)", since=NOW - timedelta(hours=2, minutes=5))
    assert state_line(ready, NOW) == "active, ready — up since 2 h 5 min ago"
    failed = st(state="failed", active="failed (Result: exit-code)", since=NOW - timedelta(minutes=3),
                reason="CUDA out of memory")
    assert state_line(failed, NOW) == "failed — failed 3 min ago\nreason: CUDA out of memory"
    assert state_line(st(state="stopped"), NOW) == "stopped"


def test_a_node_not_reached_is_blamed_only_when_it_is_the_node() -> None:
    down = st(state="unreachable", reason="connection refused on 10.0.0.5:22")
    busy = st(state="unreachable", reason="inferbot is busy: 64 questions wait for gpu-a", reason_kind="busy")
    assert state_line(down, NOW) == not_reached(down) == "unreachable — connection refused on 10.0.0.5:22"
    assert not_reached(busy) == "inferbot is busy: 64 questions wait for gpu-a"
    assert node_not_reached("gpu-a", NodeError(kind="timeout", reason="no answer in 8 s")) == \
        "node gpu-a is unreachable — no answer in 8 s"
    assert node_not_reached("gpu-a", NodeError(kind="busy", reason="inferbot is busy")) == "inferbot is busy"
    assert node_not_reached("gpu-a", None) == "node gpu-a is unreachable — no answer"


def test_the_throughput_line_says_where_the_numbers_come_from() -> None:
    live = st(throughput=Throughput(generation_tps=1234.56, prompt_tps=3000, source="metrics", age_seconds=4))
    assert throughput_line(live) == "live 1,234.6 tok/s generation, 3,000.0 tok/s prompt (from /metrics, 4 s old)"
    logged = st(throughput=Throughput(generation_tps=80.0, source="log"))
    assert throughput_line(logged) == "live 80.0 tok/s generation, 0.0 tok/s prompt (from the stats log line)"
    assert throughput_line(st()) == "live: idle (no recent stats line)"
    assert throughput_line(st(state="loading")) is None


def test_flags_are_grouped_and_every_value_is_shown_whole() -> None:
    long_value = "x" * 5000
    tables = flag_rows(st(flags={"tensor-parallel-size": "8", "model": "/models/kimi", "enforce-eager": True,
                                 "chat-template": long_value}))
    cells = {row[0]: row[1] for t in tables for row in t.rows or []}
    assert cells["--tensor-parallel-size"] == "8" and cells["--chat-template"] == long_value
    assert all(t.title and t.title.startswith("Flags — ") for t in tables)
    assert len({t.title for t in tables}) == len(tables) > 1  # one table per group
    [only] = flag_rows(st(flags={"tensor-parallel-size": "8", "model": "/m"}), only=tables[0].title[len("Flags — "):])
    assert only.title == tables[0].title


def test_environment_gpus_and_warnings_sections() -> None:
    s = st(env={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "HF_TOKEN": "[redacted]"},
           gpus=[GpuInfo(index=0, name="NVIDIA H100 PCIe", memory_used_mib=71234, memory_total_mib=81559,
                         utilization_pct=97), GpuInfo(index=1, name="NVIDIA H100 PCIe")])
    env = env_section(s)
    assert env is not None and env.rows == [["NCCL_PROTO", "LL"], ["NCCL_ALGO", "Ring"], ["HF_TOKEN", "[redacted]"]]
    nccl = env_section(s, "NCCL_")
    assert nccl is not None and nccl.title == "Environment (NCCL_*)" and len(nccl.rows or []) == 2
    assert env_section(s, "CUDA_") is None
    gpus = gpu_section(s)
    assert gpus is not None and gpus.title == "GPUs on gpu-a"
    assert gpus.rows == [["0", "NVIDIA H100 PCIe", "71,234 / 81,559 MiB", "97 %"],
                         ["1", "NVIDIA H100 PCIe", "n/a", "n/a"]]
    assert gpu_section(st()) is None
    w = warnings_section(st(warnings=["unit file changed on disk"], fix="systemctl daemon-reload"))
    assert w is not None and w.text == "Fix: systemctl daemon-reload\n⚠ unit file changed on disk"
    fix_only = warnings_section(st(fix="start it"))
    assert fix_only is not None and (fix_only.title, fix_only.text) == ("Fix", "start it")
    assert warnings_section(st()) is None


def test_the_most_urgent_status_wins() -> None:
    assert worst(["ok", "loading", "warn"]) == "warn"
    assert worst(["ok", "error", "warn"]) == "error"
    assert worst(["ok", "info"]) == "info"
    assert worst([]) == "info"
