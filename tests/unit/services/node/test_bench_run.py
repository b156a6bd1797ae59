"""services/node/bench_run.py: the acceptance benchmark's words and the reading of what the node printed —
the previous run of the same settings only, failures said in a line, redacted."""

from __future__ import annotations

from services.node.bench_run import LABEL, BenchOutcome, LevelResult, num_prompts, summary_line, verdict
from services.sim.scenarios import KIMI_API_KEY

MODEL = "/shared/kimi-k2.5-int4"


def test_summary_line_matches_the_issue() -> None:
    out = BenchOutcome(ok=True,
                       single=LevelResult(concurrency=1, output_throughput=82.1, date="2026-03-01", previous=82.5,
                                          previous_date="2026-02-21"),
                       peak=LevelResult(concurrency=64, output_throughput=1540.0, date="2026-03-01", previous=1535.4,
                                        previous_date="2026-02-21"))
    assert summary_line(out) == "82.1 tok/s single-stream, \u22120.5 % vs 2026-02-21; 1,540 tok/s peak, +0.3 %"
    assert verdict(out, 5) == "ok" and verdict(out, 0.4) == "regression"
    first = BenchOutcome(ok=True, single=LevelResult(concurrency=1, output_throughput=80.0, date="2026-03-01"),
                         peak=LevelResult(concurrency=64, output_throughput=1500.0, date="2026-03-01"))
    assert summary_line(first) == ("80.0 tok/s single-stream, first run with these settings; "
                                   "1,500 tok/s peak (concurrency 64)")


def _bench_out(runs: list[tuple[int, int, str]], files: dict[str, str]) -> str:
    import base64

    out = []
    for conc, rc, err in runs:
        out.append(f"@@inferbot-bench@@ run c={conc} rc={rc} path=/b/{LABEL}-c{conc}-20260301-120000.json")
        out.append(base64.b64encode(err.encode()).decode())
    for path, extract in files.items():
        out.append(f"@@inferbot-bench@@ benchfile path={path}")
        out.append(extract)
    out.append("@@inferbot-bench@@ end")
    return "\n".join(out) + "\n"


def _extract(date: str, conc: int, tps: float, label: str = LABEL, model: str = MODEL) -> str:
    return "\n".join([f'"date": "{date}"', f'"label": "{label}"', f'"model_id": "{model}"',
                      f'"num_prompts": {num_prompts(conc)}', f'"max_concurrency": {conc}',
                      f'"completed": {num_prompts(conc)}', f'"output_throughput": {tps}'])


def test_parse_picks_the_previous_run_of_the_same_settings_only() -> None:
    from services.node.bench_run import BenchPlan, parse_bench_output
    from services.redact import Redactor

    plan = BenchPlan(vllm="vllm", url="http://127.0.0.1:8000", model=MODEL, served="kimi", bench_dir="/b", peak=64)
    files = {
        f"/b/{LABEL}-c1-20260301-120000.json": _extract("20260301-120000", 1, 82.1),
        f"/b/{LABEL}-c64-20260301-120000.json": _extract("20260301-120000", 64, 1540.0),
        f"/b/{LABEL}-c1-20260221-101530.json": _extract("20260221-101530", 1, 82.5),
        f"/b/{LABEL}-c64-20260221-101530.json": _extract("20260221-101530", 64, 1535.4),
        # Not the same settings: another label, another model, a newer run by hand.
        "/b/openai-c1.json": _extract("20260228-090000", 1, 10.0, label="openai"),
        "/b/other-c1.json": _extract("20260228-090000", 1, 10.0, model="/shared/other"),
    }
    out = parse_bench_output(_bench_out([(1, 0, ""), (64, 0, "")], files), plan, Redactor())
    assert out.ok and out.single is not None and out.peak is not None
    assert (out.single.previous, out.single.previous_date) == (82.5, "2026-02-21")
    assert summary_line(out) == "82.1 tok/s single-stream, \u22120.5 % vs 2026-02-21; 1,540 tok/s peak, +0.3 %"


def test_parse_failures_say_why_redacted() -> None:
    from services.node.bench_run import BenchPlan, parse_bench_output
    from services.redact import Redactor

    plan = BenchPlan(vllm="/opt/v/bin/vllm", url="http://127.0.0.1:8000", model=MODEL, served="kimi",
                     bench_dir="/b", peak=4)
    missing = parse_bench_output(_bench_out([(1, 127, "sh: 1: /opt/v/bin/vllm: not found")], {}), plan, Redactor())
    assert missing.error == ("vllm bench serve at concurrency 1 failed: /opt/v/bin/vllm: command not found on the "
                             "node (set [services.acceptance] vllm)")
    err = f"ValueError: Initial test run failed - Error: 401 Unauthorized for key {KIMI_API_KEY}"
    failed = parse_bench_output(_bench_out([(1, 1, "Traceback (most recent call last):\n" + err)], {}), plan,
                                Redactor([KIMI_API_KEY]))
    assert not failed.ok and failed.error.startswith("vllm bench serve at concurrency 1 failed: ValueError: Initial")
    assert KIMI_API_KEY not in failed.error
    assert parse_bench_output("", plan, Redactor()).error == "the benchmark did not run on the node (no answer)"
