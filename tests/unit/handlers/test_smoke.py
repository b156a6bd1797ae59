"""handlers/smoke.py: the smoke completion before ✅ (issue 14): the simulated node behind a real sshd, the real
store and scheduler.

Every case restarts the Kimi unit through the guarded flow and checks the notices a person sees (one per
place), what went over SSH (the key never on a command line), and the store across a bot restart.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from handlers.notify import RecordingNotifier
from handlers.smoke import smoke_failure, smoke_gate, with_smoke
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_follow import FlakyNotifier
from tests.test_restart import NOTIFY, OPS, THREAD, access, bot, kimi, notices, request, set_profile, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

READY_RE = re.compile(r"^✅ kimi on gpu-a is ready — loaded in \S+( \S+)?( \(last time [^)]+\))?, "
                      r"first token in \d+\.\d\d s$")
KEY_ENV = "INFERBOT_TEST_KIMI_KEY"


async def smoke_cluster(make_cluster: MakeCluster, *, key: bool = True, readiness: dict[str, Any] | None = None,
                        monkeypatch: pytest.MonkeyPatch | None = None) -> SimCluster:
    svc: dict[str, Any] = {"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT}
    if key:
        assert monkeypatch is not None
        monkeypatch.setenv(KEY_ENV, KIMI_API_KEY)
        svc["api_key_env"] = KEY_ENV
    if readiness is not None:
        svc["readiness"] = readiness
    cluster = await make_cluster({"gpu-a": kimi()}, services=[svc], access=access(cooldown="0s"),
                                 notify={"channel": NOTIFY},
                                 watch={"poll": "0.2s", "interval": "0.3s", "safety_interval": "0.3s",
                                        "max_load": "60s"})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def completions_sent(commands: list[str]) -> list[str]:
    return [c for c in commands if "/v1/completions" in c]


def final(b: Any, word: str) -> tuple[list[str], list[str]]:
    return notices(b, word, OPS, THREAD), notices(b, word, NOTIFY)


async def test_ready_notice_waits_for_the_completion_and_says_first_token(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "is ready"):
            assert len(texts) == 1 and READY_RE.match(texts[0]), texts
        sent = completions_sent(b.commands)
        assert len(sent) == 1
        assert '"max_tokens": 1' in sent[0] and '"temperature": 0' in sent[0] and '"model": "kimi-k2.5"' in sent[0]
        assert all(KIMI_API_KEY not in c for c in b.commands)  # over stdin only
        load = await b.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None
        smoke = await b.rt.store.smoke_checks.get("kimi", "gpu-a", load.invocation_id)  # type: ignore[union-attr]
        assert smoke is not None and smoke.outcome == "ok" and smoke.ttft_s is not None


async def test_failing_completion_is_a_failure_with_vllms_error(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    set_profile(cluster.sims["gpu-a"], completion_fail=True)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "failed")), 45, "the failure notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "failed"):
            assert texts == ["❌ kimi on gpu-a failed — the smoke completion failed: HTTP 500 — "
                             "InternalServerError: CUDA error: an illegal memory access was encountered"], texts
        assert not any(final(b, "is ready"))
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "failed"
        load = await b.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None and load.outcome == "failed"


async def test_hanging_completion_times_out(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch, readiness={"smoke_timeout": "1s"})
    set_profile(cluster.sims["gpu-a"], completion_hang=True)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "failed")), 45, "the timeout notices")
        await asyncio.sleep(0.5)
        for texts in final(b, "failed"):
            assert texts == ["❌ kimi on gpu-a failed — the smoke completion timed out after 1 s"], texts


async def test_smoke_off_sends_no_completion(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch, readiness={"smoke": False})
    set_profile(cluster.sims["gpu-a"], completion_fail=True)  # would fail: it must not be asked
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        for texts in final(b, "is ready"):
            assert len(texts) == 1 and "first token" not in texts[0] and "smoke" not in texts[0], texts
        assert completions_sent(b.commands) == []


async def test_without_the_key_the_smoke_test_is_skipped_and_said(make_cluster: MakeCluster) -> None:
    cluster = await smoke_cluster(make_cluster, key=False)  # the unit runs with --api-key; the bot holds none
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: all(final(b, "is ready")), 45, "the ready notices")
        for texts in final(b, "is ready"):
            assert len(texts) == 1, texts
            assert texts[0].startswith("✅ kimi on gpu-a is ready — loaded in ")
            assert texts[0].endswith(", smoke test skipped: the server requires an API key and I hold none "
                                     "(set api_key_env)"), texts


async def test_bot_restart_between_completion_and_notice_posts_it_once(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    # One notifier stands for the Slack both processes post to; it is down for the first one.
    down = FlakyNotifier(fail_word="is ready", failures=10_000)
    async with bot(cluster.config, notifier=down) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: down.failures >= 2, 45, "a failed ready post")
        first_sent = completions_sent(first.commands)
        load = await first.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None and load.outcome == "ready"
        smoke = await first.rt.store.smoke_checks.get("kimi", "gpu-a", load.invocation_id)  # type: ignore[union-attr]
        assert smoke is not None and smoke.ttft_s is not None
        down_ttft = f"first token in {smoke.ttft_s:.2f} s"
    down.left = 0  # Slack is back
    shared = down
    async with bot(cluster.config, notifier=shared) as second:
        await until(lambda: len(notices_of(shared, "is ready")) >= 2, 30, "the ready notices from the second bot")
        await asyncio.sleep(0.5)
        assert len(notices_of_in(shared, OPS, THREAD)) == 1 and len(notices_of_in(shared, NOTIFY, None)) == 1
        for t in notices_of(shared, "is ready"):
            assert t.endswith(down_ttft), t  # the same completion, not a second one
        assert completions_sent(second.commands) == []
    assert len(first_sent) == 1


def notices_of(n: RecordingNotifier, word: str) -> list[str]:
    return [t for t in n.texts() if word in t]


def notices_of_in(n: RecordingNotifier, channel: str, thread: str | None) -> list[str]:
    return [p.text for p in n.posts if p.channel == channel and p.thread_ts == thread and "is ready" in p.text]


async def test_failed_completion_notice_survives_a_bot_restart_with_vllms_error(
        make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    set_profile(cluster.sims["gpu-a"], completion_fail=True)
    slack = FlakyNotifier(fail_word="failed —", failures=10_000)  # down for the first process
    async with bot(cluster.config, notifier=slack) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: slack.failures >= 2, 45, "a failed post of the ❌")
    slack.left = 0
    async with bot(cluster.config, notifier=slack) as second:
        await until(lambda: len([p for p in slack.posts if "failed —" in p.text]) >= 2, 30, "the ❌ notices")
        await asyncio.sleep(0.5)
        for channel, thread in ((OPS, THREAD), (NOTIFY, None)):
            posted = [p.text for p in slack.posts if p.channel == channel and p.thread_ts == thread
                      and "failed —" in p.text]
            assert posted == ["❌ kimi on gpu-a failed — the smoke completion failed: HTTP 500 — "
                              "InternalServerError: CUDA error: an illegal memory access was encountered"], posted
        assert completions_sent(second.commands) == []


async def test_key_variable_configured_but_unset_is_named(make_cluster: MakeCluster,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await smoke_cluster(make_cluster, monkeypatch=monkeypatch)
    monkeypatch.delenv(KEY_ENV)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 45, "the ready notice")
        assert notices(b, "is ready", NOTIFY)[0].endswith(
            f", smoke test skipped: the server requires an API key and ${KEY_ENV} is not set for the bot")


# ------------------------------------------------------------------------------------------------
# What was recorded decides, without the node


async def test_a_recorded_completion_is_reused_and_worded_without_asking_the_node(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from config.models import BotConfig
    from handlers.context import Context
    from handlers.notice_words import ready_notice
    from services.cluster import Cluster
    from services.models import ServiceState
    from services.node.ssh import NodePool
    from services.store.records import Follow
    from services.store.store import Store
    from tests.sshd import free_port

    t0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
    # Nobody listens on the node's port: a completion sent now would come back "unreachable" (None).
    cfg = BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.1", "port": free_port(), "timeout": "2s"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT},
                     {"name": "qwen", "node": "gpu-a", "unit": "vllm-qwen.service", "readiness": {"smoke": False}}],
        "state": {"dir": str(tmp_path)}})
    kimi_svc, qwen_svc = cfg.services
    st = ServiceState(service="kimi", node="gpu-a", unit=KIMI_UNIT, state="ready", api_url="http://127.0.0.1:9",
                      model="moonshotai/Kimi-K2.5")

    def follow(inv: str | None, service: str = "kimi") -> Follow:
        return Follow(key=f"{service}@gpu-a", service=service, node="gpu-a", unit=KIMI_UNIT, invocation_id=inv,
                      started_at=t0, reason="restart", updated_at=t0)

    store = Store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    pool = NodePool()
    try:
        ctx = Context(config=cfg, cluster=Cluster(cfg, pool), store=store, now=lambda: t0)
        await store.smoke_checks.record("kimi", "gpu-a", "inv-ok", "ok", 0.4123, "", t0)
        await store.smoke_checks.record("kimi", "gpu-a", "inv-bad", "failed", None,
                                        "the smoke completion failed: HTTP 500 — InternalServerError: boom", t0)
        await store.smoke_checks.record("kimi", "gpu-a", "inv-skip", "skipped", None,
                                        "the server requires an API key and I hold none (set api_key_env)", t0)
        assert await smoke_gate(ctx, kimi_svc, follow("inv-ok"), st) == ("ready", "")
        assert await smoke_gate(ctx, kimi_svc, follow("inv-bad"), st) == (
            "failed", "the smoke completion failed: HTTP 500 — InternalServerError: boom")
        assert await smoke_gate(ctx, kimi_svc, follow("inv-new"), st) is None  # not recorded: the node is asked
        assert await smoke_gate(ctx, qwen_svc, follow("inv-new", "qwen"), st) == ("ready", "")  # smoke = false
        assert await store.smoke_checks.get("kimi", "gpu-a", "inv-new") is None  # nothing recorded for "no answer"

        ok = await with_smoke(ctx, follow("inv-ok"), ready_notice(follow("inv-ok"), 1754, 1802))
        assert ok.data["notice"] == "✅ kimi on gpu-a is ready — loaded in 29m 14s (last time 30m 02s), first token " \
                                    "in 0.41 s"
        assert ok.data["smoke"] == {"outcome": "ok", "ttft_s": 0.4123, "detail": ""}
        skipped = await with_smoke(ctx, follow("inv-skip"), ready_notice(follow("inv-skip"), 95, None))
        assert skipped.title.endswith(", smoke test skipped: the server requires an API key and I hold none "
                                      "(set api_key_env)")
        plain = ready_notice(follow("inv-none"), 95, None)
        assert await with_smoke(ctx, follow("inv-none"), plain) == plain
        assert await smoke_failure(ctx, follow("inv-bad")) == (
            "the smoke completion failed: HTTP 500 — InternalServerError: boom")
        assert await smoke_failure(ctx, follow("inv-ok")) is None
    finally:
        await pool.close()
        await store.close()
