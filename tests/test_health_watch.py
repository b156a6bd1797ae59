"""The deaths vLLM hides (issue 14): unhealthy after ready, engine death with exit 0, hung — and silences.

The simulated node behind the real sshd, the real store and scheduler (the harness of ``test_restart.py``);
the fake vLLM is changed while it runs (``SimNode.set_live``). Each notice is posted once per place, also
when the bot is restarted in between (what the watcher remembers is in the store).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from bot import jobs
from handlers.watcher import WATCH_PROBE
from services.mentions import plain
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_restart import (
    ALICE,
    EVE,
    NOTIFY,
    Bot,
    access,
    bot,
    kimi_cluster,
    notices,
    ready_in_both,
    request,
    set_profile,
    until,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SECRETS = ("hf_", "sk-kimi")


async def _cluster(make_cluster: MakeCluster, **watch: Any) -> SimCluster:
    return await kimi_cluster(make_cluster, watch={"hung_after": "1s", "unhealthy_polls": 2, **watch})


async def _seen_ready(b: Bot, within: float = 20.0) -> None:
    """Until the watcher has seen kimi ready in this start (its memo is in the store)."""
    deadline = time.monotonic() + within
    while True:
        memo = await b.rt.store.health_memos.get("kimi", "gpu-a")  # type: ignore[arg-type]
        if memo is not None and memo.ready_seen:
            return
        assert time.monotonic() < deadline, "the watcher never saw kimi ready"
        await asyncio.sleep(0.05)


async def _restart_with(cluster: SimCluster, **profile: Any) -> None:
    """Restart the unit (as if by hand, before any bot runs) so the fake vLLM starts with ``profile``."""
    sim = cluster.sims["gpu-a"]
    set_profile(sim, **profile)
    await sim.restart_unit(KIMI_UNIT)
    await sim.wait_for(KIMI_UNIT, "ready", 45)


def _post(b: Bot, word: str) -> Any:
    return next(p for p in b.notifier.posts if p.channel == NOTIFY and word in p.text)


def _no_secrets(b: Bot) -> None:
    for p in b.notifier.posts:
        for s in p.reply.sections:
            for secret in SECRETS:
                assert secret not in (s.text or ""), s.text


async def test_unhealthy_once_then_recovered_once_across_a_bot_restart(make_cluster: MakeCluster) -> None:
    cluster = await _cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)
        sim.set_live(KIMI_UNIT, health_status=503)
        await until(lambda: bool(notices(b, "is unhealthy", NOTIFY)), 20, "the ⚠️ unhealthy notice")
        warn = notices(b, "is unhealthy", NOTIFY)
        assert len(warn) == 1 and warn[0].startswith("⚠️ kimi on gpu-a is unhealthy — /health answered 503"), warn
        assert "the main process (PID " in warn[0] and "is alive" in warn[0]
        post = _post(b, "is unhealthy")
        assert any(s.title == "Last journal lines" and s.text for s in post.reply.sections)
        _no_secrets(b)
        await asyncio.sleep(1.0)  # more looks while still unhealthy: nothing new
        assert len(notices(b, "is unhealthy", NOTIFY)) == 1
        assert not notices(b, "restarted (not by inferbot)", NOTIFY)
    # A new bot process: it remembers the open episode (no second ⚠️) and posts the one ✅.
    async with bot(cluster.config, watch=True) as b2:
        await asyncio.sleep(1.0)
        assert not notices(b2, "is unhealthy", NOTIFY)
        sim.set_live(KIMI_UNIT, health_status=None)
        await until(lambda: bool(notices(b2, "is healthy again", NOTIFY)), 20, "the ✅ recovery notice")
        await asyncio.sleep(1.0)
        ok = notices(b2, "is healthy again", NOTIFY)
        assert len(ok) == 1 and ok[0].startswith("✅ kimi on gpu-a is healthy again — /health answers 200"), ok
        assert not notices(b2, "is unhealthy", NOTIFY)
        events = [e.event for e in await b2.rt.store.audit.recent("kimi")]  # type: ignore[union-attr]
        assert "health.unhealthy" in events and "health.recovered" in events


async def test_engine_death_with_exit_0_is_one_failure_not_silence(make_cluster: MakeCluster) -> None:
    cluster = await _cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    await _restart_with(cluster, engine_death_exit=0)
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)
        sim.set_live(KIMI_UNIT, die=True)
        await sim.wait_for(KIMI_UNIT, "stopped", 20)
        await until(lambda: bool(notices(b, "stopped unexpectedly", NOTIFY)), 20, "the ❌ notice")
        await asyncio.sleep(1.0)
        bad = notices(b, "stopped unexpectedly", NOTIFY)
        assert bad == ["❌ kimi on gpu-a stopped unexpectedly (exit 0 after EngineDeadError) — systemd will not "
                       "restart it with Restart=on-failure; consider Restart=always"], bad
        post = _post(b, "stopped unexpectedly")
        journal = next(s.text for s in post.reply.sections if s.title == "Last journal lines")
        assert journal and "EngineDeadError" in journal
        _no_secrets(b)
        snap = sim.state(KIMI_UNIT)
        assert snap.active == "inactive" and snap.result == "success"  # systemd really did not restart it
        assert b.restarts_run() == []
    async with bot(cluster.config, watch=True) as b2:  # a bot restart posts it no second time
        await asyncio.sleep(1.2)
        assert not notices(b2, "stopped unexpectedly", NOTIFY)


async def test_stop_by_hand_after_engine_error_is_not_a_death(make_cluster: MakeCluster) -> None:
    cluster = await _cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)
        sim.set_live(KIMI_UNIT, die=True)  # the engine dies, the API stays up (503) ...
        await until(lambda: bool(notices(b, "is unhealthy", NOTIFY)), 20, "the ⚠️ unhealthy notice")
        await sim.stop_unit(KIMI_UNIT)  # ... and someone stops the unit
        await asyncio.sleep(1.5)
        assert not notices(b, "stopped unexpectedly", NOTIFY)


async def test_hung_once_then_flowing_once(make_cluster: MakeCluster) -> None:
    cluster = await _cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    await _restart_with(cluster, traffic_tps=200.0, running=3, waiting=4)
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)
        await asyncio.sleep(1.2)  # tokens flow: no notice
        assert not notices(b, "possibly hung", NOTIFY)
        sim.set_live(KIMI_UNIT, hung=True)
        await until(lambda: bool(notices(b, "possibly hung", NOTIFY)), 20, "the ⚠️ hung notice")
        await asyncio.sleep(1.0)
        hung = notices(b, "possibly hung", NOTIFY)
        assert len(hung) == 1 and hung[0].startswith("⚠️ kimi on gpu-a is possibly hung — 3 running, 4 waiting "
                                                     "request(s) and no new tokens for "), hung
        sim.set_live(KIMI_UNIT, hung=False)
        await until(lambda: bool(notices(b, "generating again", NOTIFY)), 20, "the ✅ notice")
        await asyncio.sleep(1.0)
        assert len(notices(b, "generating again", NOTIFY)) == 1
        assert len(notices(b, "possibly hung", NOTIFY)) == 1


async def test_silence_holds_back_unplanned_unhealthy_and_hung(make_cluster: MakeCluster) -> None:
    cluster = await _cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    await _restart_with(cluster, traffic_tps=200.0, running=2, waiting=1)
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)
        refused = await b.ask("silence kimi 2h", user=EVE)
        assert not refused.ok and "not allowed" in str(refused.error)
        no_time = await b.ask("silence kimi")
        assert not no_time.ok and "for how long" in str(no_time.error)
        reply = await b.ask("silence kimi 2h restart of the NCCL driver, planned")
        assert reply.ok, reply.error
        assert reply.title.startswith("kimi on gpu-a silenced until ")
        assert "restart of the NCCL driver" in reply.title
        status = await b.ask("status kimi")
        assert any(s.title == "Silenced" and "silenced until" in (s.text or "") and f"<@{ALICE}>" in plain(s.text or "")
                   for s in status.sections)
        assert status.data["silences"][0]["reason"] == "restart of the NCCL driver, planned"
        # hung, unhealthy and a restart by hand: all held back, each one audited with the silence.
        sim.set_live(KIMI_UNIT, hung=True)
        await _until_audited(b, "possibly hung", 20)
        sim.set_live(KIMI_UNIT, hung=False, health_status=503)
        await asyncio.sleep(2.0)
        sim.set_live(KIMI_UNIT, health_status=None)
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        await asyncio.sleep(2.0)
        assert b.notifier.texts(NOTIFY) == [], b.notifier.texts(NOTIFY)
        lines = await _audit_lines(b)
        for word in ("possibly hung", "is unhealthy", "restarted (not by inferbot)"):
            line = next((x for x in lines if word in x and x.startswith("notice.suppressed")), None)
            assert line is not None and "silenced until" in line, (word, lines)
        # unsilence: the next restart by hand is news again.
        out = await b.ask("unsilence kimi")
        assert out.ok and "silence ended" in out.title
        assert "Silenced" not in [s.title for s in (await b.ask("status kimi")).sections]
        await sim.restart_unit(KIMI_UNIT)
        await until(lambda: bool(notices(b, "restarted (not by inferbot)", NOTIFY)), 30, "the ⚠️ notice")
        events = [e.event for e in await b.rt.store.audit.recent("kimi", limit=100)]  # type: ignore[union-attr]
        assert "silence.set" in events and "silence.cleared" in events


async def _audit_lines(b: Bot) -> list[str]:
    rows = await b.rt.store.audit.recent("kimi", limit=200)  # type: ignore[union-attr]
    return [f"{e.event}: {e.detail}" for e in rows]


async def _until_audited(b: Bot, word: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not any(word in line for line in await _audit_lines(b)):
        assert time.monotonic() < deadline, f"nothing audited about {word!r}"
        await asyncio.sleep(0.1)


async def test_a_restart_by_the_bot_seen_only_afterwards_is_not_news(make_cluster: MakeCluster) -> None:
    """The watcher's looks straddle the whole restart (no look while its lock is held): still not unplanned."""
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"), watch={"interval": "4s"})
    async with bot(cluster.config, watch=True) as b:
        store = b.rt.store
        assert store is not None
        deadline = time.monotonic() + 10
        while (base := await store.watches.get("kimi", "gpu-a")) is None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # Right after a look: the restart and its load fit before the next one.
        while (now := await store.watches.get("kimi", "gpu-a")) is not None and now.updated_at == base.updated_at:
            assert time.monotonic() < deadline + 10
            await asyncio.sleep(0.05)
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(ready_in_both(b), 45, "the ready notices")
        assert await store.locks.holder("restart:kimi@gpu-a", b.ctx().now()) is None
        looked = (await store.watches.get("kimi", "gpu-a")).updated_at  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        while (await store.watches.get("kimi", "gpu-a")).updated_at == looked:  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        texts = b.notifier.texts(NOTIFY)
        assert [t for t in texts if "is ready" in t] and not [t for t in texts if "not by inferbot" in t or
                                                             "failed" in t], texts


async def _probed_state(b: Bot) -> str:
    """kimi's state as one probe (not the watcher's look) sees it now."""
    ctx = b.ctx()
    _report, states, _raw = await ctx.cluster.probe_node(ctx.config.node("gpu-a"), ctx.config.services_on("gpu-a"),
                                                         WATCH_PROBE, keep_raw=False)
    return states[0].state


async def test_unhealthy_right_after_a_ready_no_look_of_the_watcher_saw(make_cluster: MakeCluster) -> None:
    """The watcher looks every ``[watch] interval``; a server that fails between its ready (the follow saw it) and
    the watcher's next look was still ready in this start: its 503s are an unhealthy server, not a load."""
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"),
                                 watch={"unhealthy_polls": 2, "interval": "1h", "safety_interval": "1h", "push": False})
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config, watch=True) as b:
        await _seen_ready(b)  # the watcher's one look (at start), at the start before the restart
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(ready_in_both(b), 45, "the ready notices")
        sim.set_live(KIMI_UNIT, health_status=503)
        deadline = time.monotonic() + 10
        while await _probed_state(b) != "unhealthy":
            assert time.monotonic() < deadline, "the fake vLLM never answered 503"
            await asyncio.sleep(0.1)
        live = jobs.current()
        assert live is not None
        for _ in range(3):  # the watcher's next looks, as its job (or a journal line) asks them
            await live.looks.watch("gpu-a")
        warn = notices(b, "is unhealthy", NOTIFY)
        assert len(warn) == 1 and warn[0].startswith("⚠️ kimi on gpu-a is unhealthy — /health answered 503"), warn
