"""handlers/acceptance.py: the acceptance benchmark (issue 14): after ✅ and on demand, on the simulated node
behind a real sshd.

The simulated node's ``vllm bench serve`` really sends the requests to the fake server and saves a result
file in vLLM's format; the bot compares it with the previous result of the same settings in bench_dir.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.render_text import render_text
from handlers.request_kinds import on_action as bench_action
from services.mentions import plain
from services.node.bench_run import LABEL, BenchOutcome, LevelResult, num_prompts
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import login_user
from tests.test_follow import FlakyNotifier
from tests.test_restart import ALICE, BOB, EVE, NOTIFY, OPS, THREAD, access, bot, kimi, notices, request, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

KEY_ENV = "INFERBOT_TEST_KIMI_KEY"
MODEL = "/shared/kimi-k2.5-int4"
PEAK = 4
NUMBERS = r"[\d,.]+ tok/s single-stream"


async def bench_cluster(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch, *, bench: bool = True,
                        **acceptance: Any) -> SimCluster:
    monkeypatch.setenv(KEY_ENV, KIMI_API_KEY)
    scenario = kimi()
    cluster = await make_cluster({"gpu-a": scenario}, services=[{
        "name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT, "api_key_env": KEY_ENV, "bench_dir": "BENCH",
        "acceptance": {"bench": bench, "peak_concurrency": PEAK, **acceptance}}],
        access=access(cooldown="0s"), notify={"channel": NOTIFY},
        watch={"poll": "0.2s", "interval": "0.3s", "safety_interval": "0.3s", "max_load": "60s"})
    sim = cluster.sims["gpu-a"]
    bench_dir = Path(sim.bench_dir)
    own_bench_dir(bench_dir)
    data = cluster.config.model_dump()
    data["services"][0]["bench_dir"] = str(bench_dir)
    cluster.config = type(cluster.config).model_validate(data)
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def own_bench_dir(bench_dir: Path) -> None:
    bench_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # the SSH login is the unprivileged test user: its bench_dir is its own
        shutil.chown(bench_dir, login_user())


def saved_results(cluster: SimCluster) -> list[str]:
    return sorted(p.name for p in Path(cluster.sims["gpu-a"].bench_dir).glob(f"{LABEL}-c*.json"))


def previous_result(cluster: SimCluster, concurrency: int, tps: float, date: str = "20260221-101530") -> None:
    """An earlier acceptance run of the same settings, as vLLM saved it."""
    path = Path(cluster.sims["gpu-a"].bench_dir) / f"{LABEL}-c{concurrency}-{date}.json"
    path.write_text(json.dumps({
        "date": date, "backend": "vllm", "label": LABEL, "model_id": MODEL, "num_prompts": num_prompts(concurrency),
        "max_concurrency": concurrency, "completed": num_prompts(concurrency), "output_throughput": tps}))


def bench_notices(b: Any, channel: str, thread: str | None = None) -> list[str]:
    return [t for t in b.notifier.texts(channel, thread) if "benchmark" in t]


async def test_after_ready_benchmark_is_posted_once_per_place_against_the_previous_run(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch)
    previous_result(cluster, 1, 1.0)  # far slower: this run is up by a lot, no regression
    previous_result(cluster, PEAK, 1.0)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(bench_notices(b, NOTIFY)) and bool(bench_notices(b, OPS, THREAD)), 90,
                    "the benchmark notices")
        await asyncio.sleep(0.6)
        for where in ((OPS, THREAD), (NOTIFY, None)):
            texts = bench_notices(b, *where)
            assert len(texts) == 1, texts
            assert re.fullmatch(r"✅ kimi on gpu-a benchmark: [\d,.]+ tok/s single-stream, \+[\d,.]+ % vs 2026-02-21; "
                                r"[\d,.]+ tok/s peak, \+[\d,.]+ %", texts[0]), texts[0]
            ready = [t for t in b.notifier.texts(*where) if "is ready" in t]
            assert len(ready) == 1
            # ✅ first, then the benchmark
            order = b.notifier.texts(*where)
            assert order.index(ready[0]) < order.index(texts[0])
        runs = [c for c in b.commands if "bench serve" in c]
        assert len(runs) == 1 and all(KIMI_API_KEY not in c for c in b.commands)
        assert len(saved_results(cluster)) == 4  # the two earlier ones and this run's two
        audit = [e.event for e in await b.rt.store.audit.recent("kimi", 50)]  # type: ignore[union-attr]
        assert "bench.started" in audit and "bench.ok" in audit


async def test_regression_is_flagged(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, regression_pct=5)
    previous_result(cluster, 1, 1e9)  # impossibly fast before: far more than 5 % down now
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(bench_notices(b, NOTIFY)), 90, "the benchmark notice")
        text = bench_notices(b, NOTIFY)[0]
        assert text.startswith("⚠️ kimi on gpu-a benchmark regression: ") and "\u2212" in text, text
        assert text.endswith("(more than 5 % down)") and f"(concurrency {PEAK})" in text, text


async def test_benchmark_notice_survives_a_bot_restart(make_cluster: MakeCluster,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch)
    slack = FlakyNotifier(fail_word="benchmark", failures=10_000)  # down for the first process
    async with bot(cluster.config, notifier=slack) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: slack.failures >= 2, 90, "a failed benchmark post")
        first_runs = [c for c in first.commands if "bench serve" in c]
    slack.left = 0
    async with bot(cluster.config, notifier=slack) as second:
        await until(lambda: len([p for p in slack.posts if "benchmark" in p.text]) >= 2, 30, "the benchmark notices")
        await asyncio.sleep(0.6)
        for channel, thread in ((OPS, THREAD), (NOTIFY, None)):
            posted = [p.text for p in slack.posts if p.channel == channel and p.thread_ts == thread
                      and "benchmark" in p.text]
            assert len(posted) == 1 and posted[0].startswith("✅ kimi on gpu-a benchmark: "), posted
        assert [c for c in second.commands if "bench serve" in c] == []  # not run again
    assert len(first_runs) == 1


async def test_bench_off_by_default(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 45, "the ready notice")
        await asyncio.sleep(0.6)
        assert bench_notices(b, NOTIFY) == [] and [c for c in b.commands if "bench serve" in c] == []


async def test_bench_on_demand_is_guarded_and_confirmed(make_cluster: MakeCluster,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    previous_result(cluster, 1, 1.0)
    async with bot(cluster.config) as b:
        refused = await b.ask("bench kimi", user=EVE)
        assert not refused.ok and "not allowed" in refused.title.lower() + str(refused.error)
        reply = await b.ask("bench kimi", user=ALICE)
        assert reply.ok and reply.intent == "bench", reply.title
        assert [a.action_id for a in reply.actions] == ["restart_confirm", "restart_cancel"]
        rid = str(reply.data["request_id"])
        assert rid.startswith("b-")
        assert "8 prompts at concurrency 1, then 8 at 4" in " ".join(s.text or "" for s in reply.sections)
        nope = await bench_action(b.ctx(EVE, OPS, None), "restart_confirm", rid)
        assert nope.ephemeral and nope.ephemeral.startswith("not allowed")
        done = await bench_action(b.ctx(BOB, OPS, None), "restart_confirm", rid)
        assert done.executed and done.message is not None
        assert "Benchmark confirmed by <@U0BOB>" in plain(str(done.message.data["notice"]))
        again = await bench_action(b.ctx(ALICE, OPS, None), "restart_confirm", rid)
        assert again.ephemeral and "already" in again.ephemeral and not again.executed
        texts = bench_notices(b, OPS, THREAD)
        assert len(texts) == 1 and re.match(r"✅ kimi on gpu-a benchmark: [\d,.]+ tok/s single-stream, \+", texts[0])
        assert len([c for c in b.commands if "bench serve" in c]) == 1
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "done"
        events = [e.event for e in await b.rt.store.audit.recent("kimi", 50)]  # type: ignore[union-attr]
        assert {"bench.requested", "bench.confirmed", "bench.ok"} <= set(events)
        assert "bench.refused" in events and "bench.click_refused" in events


# ------------------------------------------------------------------------------------------------
async def test_bench_request_cancelled_or_expired_runs_nothing(make_cluster: MakeCluster,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from handlers.request_kinds import expire_request as expire_bench_request

    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    async with bot(cluster.config) as b:
        first = await b.ask("bench kimi", user=ALICE)
        rid = str(first.data["request_id"])
        cancelled = await bench_action(b.ctx(BOB, OPS, None), "restart_cancel", rid)
        assert cancelled.message is not None and cancelled.message.title == "Cancelled"
        assert "Cancelled by <@U0BOB>" in plain(str(cancelled.message.data["notice"]))
        late = await bench_action(b.ctx(BOB, OPS, None), "restart_confirm", rid)
        assert late.ephemeral == "refused: this request is cancelled" and not late.executed
        second = await b.ask("bench kimi", user=ALICE)
        rid2 = str(second.data["request_id"])
        assert await expire_bench_request(b.ctx(None, None, None), rid2, b.notifier)
        expired = await bench_action(b.ctx(BOB, OPS, None), "restart_confirm", rid2)
        assert expired.ephemeral == "refused: this request is expired"
        assert [c for c in b.commands if "bench serve" in c] == []
        events = [e.event for e in await b.rt.store.audit.recent("kimi", 50)]  # type: ignore[union-attr]
        assert "bench.cancelled" in events and "bench.expired" in events
        # "bench" names no service: no request for everyone — it asks which one (issue 23: an order names its target).
        everyone = await b.ask("bench", user=ALICE)
        assert "request_id" not in everyone.data and everyone.data["understood"]["asked"] is True
        assert "`bench SERVICE` (services: kimi)" in render_text(everyone)


async def test_bench_left_by_a_stopped_bot_is_finished_once(make_cluster: MakeCluster,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A bot that stopped mid-benchmark: the next one posts the result it had, or says it was interrupted."""
    from datetime import UTC, datetime, timedelta

    from config.models import BotConfig
    from services.store.store import Store

    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    store = Store(BotConfig.model_validate(cluster.config.model_dump()).state.database_url())
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    done_text = "✅ kimi on gpu-a benchmark: 80.0 tok/s single-stream, first run with these settings; " \
                "1,500 tok/s peak (concurrency 4)"
    for rid, finished in (("b-000000000001", False), ("b-000000000002", True)):
        await store.requests.create(rid, "kimi", "gpu-a", KIMI_UNIT, ALICE, OPS, THREAD, long_ago,
                                    long_ago + timedelta(minutes=2), False, kind="bench")
        await store.requests.transition(rid, {"pending"}, "confirmed", BOB, long_ago)
        await store.requests.transition(rid, {"confirmed"}, "running", BOB, long_ago)
        await store.bench_runs.claim(rid, "kimi", "gpu-a", long_ago)
        if finished:  # it ended, but the process stopped before posting
            await store.bench_runs.finish(rid, "done", done_text, "ok", {"verdict": "ok"}, long_ago)
    await store.close()
    async with bot(cluster.config) as b:
        await until(lambda: len(bench_notices(b, NOTIFY)) >= 2, 20, "the two settled benchmarks")
        await asyncio.sleep(0.5)
        assert sorted(bench_notices(b, NOTIFY)) == sorted([
            done_text, "❌ kimi on gpu-a benchmark interrupted — the bot stopped while it ran"])
        assert len(bench_notices(b, OPS, THREAD)) == 2
        states = {rid: (await b.rt.store.requests.get(rid)).state  # type: ignore[union-attr]
                  for rid in ("b-000000000001", "b-000000000002")}
        assert states == {"b-000000000001": "failed", "b-000000000002": "done"}
        assert [c for c in b.commands if "bench serve" in c] == []
    async with bot(cluster.config) as again:  # nothing left to do: nothing posted twice
        await asyncio.sleep(1.0)
        assert bench_notices(again, NOTIFY) == []


# -- the notice's words ----------------------------------------------------------------------------------------


def test_the_notice_says_ok_regression_or_failed_in_the_issues_words() -> None:
    from config.models import Service
    from handlers.acceptance import bench_reply, what_runs

    svc = Service.model_validate({"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT, "bench_dir": "/b",
                                  "acceptance": {"bench": True, "regression_pct": 5}})
    assert what_runs(svc) == f"{num_prompts(1)} prompts at concurrency 1, then {num_prompts(64)} at 64"
    single = LevelResult(concurrency=1, output_throughput=82.1, date="2026-03-01", previous=82.5,
                         previous_date="2026-02-21")
    ok = bench_reply(svc, BenchOutcome(ok=True, single=single, peak=LevelResult(
        concurrency=64, output_throughput=1540.0, date="2026-03-01", previous=1535.4, previous_date="2026-02-21")))
    assert ok.data["notice"] == ("✅ kimi on gpu-a benchmark: 82.1 tok/s single-stream, \u22120.5 % vs 2026-02-21; "
                                 "1,540 tok/s peak, +0.3 %")
    assert (ok.status, ok.data["kind"], ok.data["peak"]["change_pct"]) == ("ok", "bench.ok", 0.3)
    assert ok.sections[0].text == f"vllm bench serve: {what_runs(svc)}, results saved in /b"
    slow = bench_reply(svc, BenchOutcome(ok=True, single=single, peak=LevelResult(
        concurrency=64, output_throughput=1300.0, date="2026-03-01", previous=1535.4, previous_date="2026-02-21")))
    assert slow.data["notice"].startswith("⚠️ kimi on gpu-a benchmark regression: 82.1 tok/s single-stream")
    assert slow.data["notice"].endswith("(more than 5 % down)") and slow.status == "warn"
    failed = bench_reply(svc, BenchOutcome(ok=False, error="the server is not ready (loading)"))
    assert failed.data["notice"] == "❌ kimi on gpu-a benchmark failed — the server is not ready (loading)"
    assert (failed.status, failed.data["kind"]) == ("error", "bench.failed")
