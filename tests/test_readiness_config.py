"""Issue 14's config keys and words: ``[services.readiness]``, ``[services.acceptance]``, and ``bench kimi``."""

from __future__ import annotations

import pytest

from bot.router import route
from config.loader import ConfigError, parse_config

NODE = "[[nodes]]\nname='a'\nhost='h'\n"
SVC = NODE + "[[services]]\nname='kimi'\nnode='a'\nunit='x.service'\n"


def test_defaults_smoke_on_bench_off() -> None:
    cfg = parse_config(SVC, "ok.toml")
    s = cfg.services[0]
    assert s.readiness.smoke is True and s.readiness.smoke_timeout == 30.0
    assert s.acceptance.bench is False and s.acceptance.regression_pct == 5.0 and s.acceptance.peak_concurrency == 64


def test_keys_as_written() -> None:
    text = SVC + ("bench_dir='/var/lib/vllm/bench'\n[services.readiness]\nsmoke=false\nsmoke_timeout='10s'\n"
                  "[services.acceptance]\nbench=true\npeak_concurrency=32\nregression_pct=2.5\n"
                  "vllm='/opt/vllm/.venv/bin/vllm'\n")
    s = parse_config(text, "ok.toml").services[0]
    assert s.readiness.smoke is False and s.readiness.smoke_timeout == 10.0
    assert (s.acceptance.bench, s.acceptance.peak_concurrency, s.acceptance.regression_pct) == (True, 32, 2.5)
    assert s.acceptance.vllm == "/opt/vllm/.venv/bin/vllm"


@pytest.mark.parametrize(("extra", "key"), [
    ("[services.readiness]\nsmoke='maybe'\n", "readiness → smoke"),
    ("[services.readiness]\nsmok=false\n", "readiness → smok"),
    ("[services.readiness]\nsmoke_timeout='soon'\n", "readiness → smoke_timeout"),
    ("bench_dir='/b'\n[services.acceptance]\nbench=true\npeak_concurrency=1\n", "acceptance → peak_concurrency"),
    ("bench_dir='/b'\n[services.acceptance]\nbench=true\nregression_pct=0\n", "acceptance → regression_pct"),
    ("bench_dir='/b'\n[services.acceptance]\nvllm='vllm; rm -rf /'\n", "acceptance → vllm"),
])
def test_bad_values_name_their_key(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(SVC + extra, "bad.toml")
    assert f"[[services]] #1 ('kimi') → {key}" in str(e.value), str(e.value)
    assert "\n" not in str(e.value).strip()


def test_bench_needs_a_bench_dir() -> None:
    with pytest.raises(ConfigError, match=r"bench = true needs bench_dir"):
        parse_config(SVC + "[services.acceptance]\nbench=true\n", "bad.toml")


@pytest.mark.parametrize(("text", "intent"), [
    ("bench kimi", "bench"), ("run a benchmark on kimi", "bench"), ("please bench kimi", "bench"),
    ("benchmark kimi", "bench"), ("benchmark results for kimi", "throughput"), ("chart bench kimi", "chart_bench"),
    ("what did the last bench say for kimi", "throughput"), ("bench kimi?", "throughput"),
    ("how fast is kimi", "throughput"),
])
def test_bench_is_an_imperative(text: str, intent: str) -> None:
    cfg = parse_config(SVC, "ok.toml")
    assert route(text, cfg).command.name == intent
