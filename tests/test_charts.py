"""Charts end to end: a followed restart's phases in ``chart loads``, the watcher's metrics filter keeping what
the samples need, matplotlib staying out of the other commands, and chart questions routed with their window.

The parts have their own tests: the samples (tests/unit/services/store/test_samples.py), taking them
(tests/unit/handlers/test_samples.py), the charts' series and pictures (tests/unit/handlers/test_charts.py),
the demo's chart (tests/unit/bot/test_demo.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MakeCluster
from tests.unit.handlers.test_charts import offline_config

ROOT = Path(__file__).resolve().parents[1]


# -- matplotlib stays out of everything but drawing --------------------------------------------------------

def test_cli_and_a_settings_answer_do_not_import_matplotlib(tmp_path: Path) -> None:
    code = """
import asyncio, sys
import bot.cli
from bot.app import runtime
from bot.dispatch import answer
from config.models import BotConfig, StateSettings
from handlers.context import Asker

async def go():
    cfg = BotConfig(state=StateSettings(dir=sys.argv[1]))
    async with runtime(cfg) as rt:
        reply = await answer("what are current settings?", rt.context(Asker(surface="cli")))
    return reply.intent

intent = asyncio.run(go())
print(intent, sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"))
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=60, check=True).stdout.split()
    assert out == ["settings", "[]"]


# -- routing and the follow's phase record -----------------------------------------------------------------

def test_chart_questions_route_to_the_charts_with_their_window(tmp_path: Path) -> None:
    from bot.router import route

    cfg = offline_config(tmp_path)
    cases = {
        "chart throughput kimi": ("chart_throughput", None),
        "throughput kimi chart last 6h": ("chart_throughput", 6 * 3600),
        "chart throughput kimi 24h": ("chart_throughput", 24 * 3600),
        "@inferbot chart throughput kimi last 7d": ("chart_throughput", 7 * 86400),
        "graph of kimi's throughput for the last 90 min": ("chart_throughput", 90 * 60),
        "chart loads kimi": ("chart_loads", None),
        "chart bench kimi": ("chart_bench", None),
        "benchmark chart for kimi": ("chart_bench", None),
        "throughput kimi": ("throughput", None),  # no chart asked: the live numbers, as before
        "bench kimi": ("bench", None),  # issue 14 makes `bench kimi` run the benchmark (was: throughput)
        "benchmark kimi": ("bench", None),  # the understanding corpus: "benchmark kimi pls" is the order too
        "benchmark results for kimi": ("throughput", None),
    }
    for text, (name, window) in cases.items():
        intent = route(text, cfg)
        assert (intent.command.name, intent.args.window_s) == (name, window), text
        assert [s.name for s in intent.services] == ["kimi"], text


async def test_a_followed_restart_records_its_phases_for_chart_loads(make_cluster: MakeCluster) -> None:
    from tests.test_restart import BOB, bot, kimi_cluster, ready_in_both, request, set_profile, until

    cluster = await kimi_cluster(make_cluster)
    # ~4 s of weights: long enough for the follow's 0.2 s polls to see the phase on a loaded machine.
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.035)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid, user=BOB)).executed
        await until(ready_in_both(b), 45, "the ready notices")
        reply = await b.ask("chart loads kimi")
    assert reply.chart is not None
    [load] = reply.data["loads"]
    assert load["outcome"] == "ready"
    split = load["phases_s"]
    assert "loading_weights" in split and "unknown" not in split, split
    assert sum(split.values()) == pytest.approx(load["duration_s"], abs=0.5)
    assert list(split) == [p for p in ("waiting_for_gpu", "loading_weights", "kv_cache", "compiling",
                                       "starting_api") if p in split]  # in the order they happened


