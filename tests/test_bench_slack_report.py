"""Issue 26's goals 5 and 6 as the benchmark judges them (bench/slack_report.py), on hand-made measurements."""

from __future__ import annotations

from typing import Any

from bench import slack_report
from bench.real_cheap import QUESTIONS


def _burst(kind_walls: dict[str, float], alone: dict[str, float], answered: int = 50, execs: float = 1.0,
           unreachable: int = 0) -> dict[str, Any]:
    return {"asked": 50, "answered": answered, "slowest_s": max(kind_walls.values()), "median_s": 1.0,
            "slowest_by_question": {QUESTIONS[k]: w for k, w in kind_walls.items()},
            "slowest_vs_one": max(kind_walls.values()) / max(alone.values()), "unreachable": unreachable,
            "busy": 0, "ssh_execs_per_node": execs, "bot_cpu_s": 0.5, "one_question_s": max(alone.values())}


ALONE = {"settings": 0.3, "status": 1.1, "gpus": 0.1, "throughput": 2.1}


def _result(mixed_walls: dict[str, float], identical_wall: float = 1.2) -> dict[str, Any]:
    bursts = [{"nodes": n, "people": 50, "alone": {k: {"wall_s": w, "bot_cpu_s": 0.03} for k, w in ALONE.items()},
               "identical": _burst({"status": identical_wall}, {"status": ALONE["status"]}),
               "mixed": _burst(mixed_walls, ALONE, execs=4.0)} for n in (8, 64)]
    cpu = [{"question": "status", "nodes": 64, "runs": 6, "messages": 4, "cpu_ms_per_node": [2.5],
            "cpu_ms_per_node_median": 2.5, "cpu_ms_per_node_batch": 2.5, "wall_s_median": 1.2}]
    return {"client_cpu": cpu, "bursts": bursts}


def _verdicts(result: dict[str, Any]) -> list[str]:
    return [g["verdict"] for g in slack_report.goals(result)]


def test_bursts_pass_when_every_question_is_answered_within_its_own_time_alone() -> None:
    result = _result({"settings": 0.4, "status": 1.3, "gpus": 0.14, "throughput": 2.3})
    assert _verdicts(result) == ["PASS", "PASS", "PASS"]


def test_a_fast_question_made_slow_by_the_others_misses_though_the_slowest_answer_is_in_time() -> None:
    # gpus alone: 0.1 s; in the burst 0.3 s (3×), while the burst's slowest (throughput) is within 1.5× of the
    # slowest question alone: judged against that, the gpus answer's wait would not show.
    result = _result({"settings": 0.4, "status": 1.3, "gpus": 0.3, "throughput": 2.3})
    goals = slack_report.goals(result)
    assert [g["verdict"] for g in goals] == ["PASS", "PASS", "MISS"]
    assert "N=8: 3.00×" in goals[2]["measured"]


def test_an_identical_burst_misses_on_more_than_one_exec_per_node_or_an_unreachable_answer() -> None:
    result = _result({"settings": 0.4, "status": 1.3, "gpus": 0.14, "throughput": 2.3})
    result["bursts"][1]["identical"]["ssh_execs_per_node"] = 2.0
    assert _verdicts(result)[1] == "MISS"
    result = _result({"settings": 0.4, "status": 1.3, "gpus": 0.14, "throughput": 2.3})
    result["bursts"][0]["identical"]["unreachable"] = 1
    assert _verdicts(result)[1] == "MISS"


def test_client_cpu_misses_when_one_n_is_past_three_ms() -> None:
    result = _result({"settings": 0.4, "status": 1.3, "gpus": 0.14, "throughput": 2.3})
    result["client_cpu"].append({**result["client_cpu"][0], "nodes": 1, "cpu_ms_per_node_median": 12.0})
    assert _verdicts(result)[0] == "MISS"
