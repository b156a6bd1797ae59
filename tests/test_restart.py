"""Guarded restarts end to end: the simulated node behind a real sshd, the real store and scheduler.

A ``Bot`` here is one bot process: a runtime on the cluster's config, a recording notifier, and the
APScheduler scheduler on the shared SQLite file. Slack itself is covered in ``test_restart_slack.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime, runtime
from bot.dispatch import answer
from bot.render_text import render_text
from bot.scheduler import BotScheduler
from config.models import BotConfig, Node
from handlers.confirmable.kind import ActionOutcome
from handlers.context import Asker
from handlers.follow import reset_pacing
from handlers.notify import RecordingNotifier
from handlers.reply import Reply
from handlers.request_kinds import on_action
from services.access import StaticGroups
from services.mentions import plain
from services.models import CommandResult
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, NodeScenario, fast_profile, kimi_node, kimi_unit
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_burst import holding_channels, slow_tool

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

ALICE, BOB, CAROL, EVE = "U0ALICE", "U0BOB", "U0CAROL", "U0EVE"
OPS, OTHER, NOTIFY = "C0OPS", "C0OTHER", "C0NOTIFY"
SRE = "S0SRE"
THREAD = "1700000000.000100"
RESTART_CMD = "sudo -n systemctl restart -- vllm-kimi-k25-int4.service"  # issue 10: "--" before the unit


def kimi(**unit: Any) -> NodeScenario:
    """The Kimi node, fast load, on a free port; ``unit`` goes to ``kimi_unit``."""
    scenario = kimi_node(fast=True, port=free_port())
    if unit:
        scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, **unit)
    return scenario


def set_profile(sim: SimNode, **changes: Any) -> None:
    """Change how the *next* load of the fake vLLM behaves (it reads its profile at each start)."""
    path = sim.root / "var/lib/inferbot-sim" / f"{KIMI_UNIT}.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def access(**extra: Any) -> dict[str, Any]:
    return {"restart_users": [ALICE, BOB], "restart_usergroups": [SRE], "restart_channels": [OPS],
            "cooldown": "10m", **extra}


async def kimi_cluster(make_cluster: MakeCluster, *, scenario: NodeScenario | None = None,
                       access_: dict[str, Any] | None = None, watch: dict[str, Any] | None = None,
                       ready: bool = True) -> SimCluster:
    cluster = await make_cluster(
        {"gpu-a": scenario or kimi()},
        access=access_ or access(),
        notify={"channel": NOTIFY},
        watch={"poll": "0.2s", "interval": "0.3s", "safety_interval": "0.3s", "max_load": "60s",
               **(watch or {})},
    )
    if ready:
        await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


@dataclass
class Bot:
    """One bot process on the cluster's config and state database."""

    rt: Runtime
    notifier: RecordingNotifier
    scheduler: BotScheduler
    commands: list[str] = field(default_factory=list)

    def ctx(self, user: str | None = ALICE, channel: str | None = OPS, thread: str | None = THREAD) -> Any:
        return self.rt.context(Asker(surface="slack", user_id=user, channel_id=channel, thread_ts=thread))

    async def ask(self, text: str, user: str = ALICE, channel: str = OPS) -> Reply:
        return await answer(text, self.ctx(user, channel))

    async def click(self, action: str, request_id: str, user: str = BOB, channel: str = OPS) -> ActionOutcome:
        return await on_action(self.ctx(user, channel, None), action, request_id)

    def restarts_run(self) -> list[str]:
        return [c for c in self.commands if "systemctl restart" in c]


@contextlib.asynccontextmanager
async def bot(config: BotConfig, *, watch: bool = False,
              notifier: RecordingNotifier | None = None) -> AsyncIterator[Bot]:
    """Start one bot (runtime + scheduler); stop it on exit (its jobs stay in the database)."""
    reset_pacing()
    async with runtime(config) as core:
        rec = notifier or RecordingNotifier()
        scheduler = BotScheduler()
        rt = core.with_ports(notifier=rec, groups=StaticGroups({SRE: [CAROL]}), jobs=scheduler)
        b = Bot(rt=rt, notifier=rec, scheduler=scheduler)
        real_run = rt.pool.run

        async def recording_run(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                                wait_s: float | None = None, read_only: bool = False) -> CommandResult:
            b.commands.append(command)
            return await real_run(node, command, limit_s=limit_s, stdin=stdin, wait_s=wait_s, read_only=read_only)

        rt.pool.run = recording_run  # type: ignore[method-assign]
        await b.scheduler.start(rt, watch=watch)
        try:
            yield b
        finally:
            await b.scheduler.shutdown()


async def until(pred: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def notices(b: Bot, word: str, channel: str | None = None, thread: str | None = None) -> list[str]:
    return [t for t in b.notifier.texts(channel, thread) if word in t]


def ready_in_both(b: Bot) -> Callable[[], bool]:
    return lambda: bool(notices(b, "is ready", OPS, THREAD)) and bool(notices(b, "is ready", NOTIFY))


async def request(b: Bot, text: str = "restart kimi", user: str = ALICE) -> str:
    reply = await b.ask(text, user)
    assert reply.ok, reply.title + " " + str(reply.error)
    assert [a.action_id for a in reply.actions] == ["restart_confirm", "restart_cancel"]
    rid = str(reply.data["request_id"])
    assert all(a.value == rid for a in reply.actions)
    return rid


# ------------------------------------------------------------------------------------------------


async def test_request_confirm_restart_ready_exactly_once(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    old_pid = sim.state(KIMI_UNIT).main_pid
    async with bot(cluster.config) as b:
        reply = await b.ask("restart kimi")
        # Impact shown before anyone confirms.
        facts = dict(next(s.fields for s in reply.sections if s.kind == "fields"))
        assert facts["node"] == "gpu-a" and facts["unit"] == KIMI_UNIT
        assert "ready" in facts["current state"]
        assert "running" in facts["requests"] and "waiting" in facts["requests"]
        assert "unavailable" in reply.data["unavailable"]
        rid = str(reply.data["request_id"])
        out = await b.click("restart_confirm", rid, user=BOB)
        assert out.executed and out.message is not None
        assert plain(out.message.data["notice"]).startswith(f"Restart confirmed by <@{BOB}> at ")
        assert "restarting" in out.message.data["notice"]
        await until(ready_in_both(b), 45, "the ready notices")
        assert sim.state(KIMI_UNIT).main_pid != old_pid
        await asyncio.sleep(0.6)  # a few more polls: nothing else may be posted
        for where in ((OPS, THREAD), (NOTIFY, None)):
            texts = notices(b, "is ready", *where)
            assert len(texts) == 1, texts
            assert texts[0].startswith("✅ kimi on gpu-a is ready — loaded in ")
        assert b.restarts_run() == [RESTART_CMD]
        # One progress message, in the thread, edited (not re-posted).
        progress = [p for p in b.notifier.posts if p.reply.data.get("kind") == "progress"]
        assert len(progress) == 1 and progress[0].thread_ts == THREAD
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "done" and req.confirmed_by == BOB
        assert await b.rt.store.locks.holder("restart:kimi@gpu-a", b.ctx().now()) is None  # type: ignore[union-attr]
        events = [e.event for e in await b.rt.store.audit.recent("kimi")]  # type: ignore[union-attr]
        for ev in ("restart.requested", "restart.confirmed", "restart.executed", "load.ready"):
            assert ev in events
        assert "follow:kimi@gpu-a" not in b.scheduler.job_ids()
        history = await b.ask("history kimi")
        assert any("restart.executed" in row for row in history.sections[0].rows)


async def test_refused_user_channel_and_default_policy(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, ready=False)
    async with bot(cluster.config) as b:
        r = await b.ask("restart kimi", user=EVE)
        assert not r.ok and r.title.startswith("Restart of kimi not allowed")
        assert "not allowed" in str(r.error) and EVE in str(r.error)
        r = await b.ask("restart kimi", user=ALICE, channel=OTHER)
        assert not r.ok and "not allowed" in str(r.error) and OTHER in str(r.error)
        r = await b.ask("restart kimi", user=CAROL)  # in the SRE user group
        assert r.ok and r.actions
        refused = [e for e in await b.rt.store.audit.recent("kimi") if e.event == "restart.refused"]  # type: ignore[union-attr]
        assert {e.who for e in refused} == {EVE, ALICE}
    default = cluster.config.model_copy(update={"access": cluster.config.access.model_copy(
        update={"restart_users": [], "restart_usergroups": []})})
    async with bot(default) as b:
        r = await b.ask("restart kimi", user=ALICE)
        assert not r.ok and "nobody may restart" in str(r.error)
        assert any(f'restart_users = ["{ALICE}"]' in (s.text or "") for s in r.sections)
    assert cluster.sims["gpu-a"].state(KIMI_UNIT).n_restarts == 0


async def test_click_by_someone_not_allowed_changes_nothing(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, ready=False)
    async with bot(cluster.config) as b:
        rid = await request(b)
        out = await b.click("restart_confirm", rid, user=EVE)
        assert out.message is None and out.ephemeral is not None and out.ephemeral.startswith("not allowed")
        out = await b.click("restart_cancel", rid, user=EVE)
        assert out.message is None and "not allowed" in str(out.ephemeral)
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "pending"
        assert b.restarts_run() == []


async def test_two_person_rule(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(require_second_person=True))
    async with bot(cluster.config) as b:
        rid = await request(b, user=ALICE)
        out = await b.click("restart_confirm", rid, user=ALICE)
        assert out.message is None and "two-person rule" in str(out.ephemeral) and "not allowed" in str(out.ephemeral)
        assert b.restarts_run() == []
        out = await b.click("restart_confirm", rid, user=BOB)
        assert out.executed
        await until(ready_in_both(b), 45, "ready")
        assert b.restarts_run() == [RESTART_CMD]


async def test_two_people_click_at_once_and_two_replicas_one_restart(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    pid = sim.state(KIMI_UNIT).main_pid
    async with bot(cluster.config) as a:
        async with runtime(cluster.config) as core:  # a second replica on the same database
            other = core.with_ports(groups=StaticGroups({SRE: [CAROL]}))
            ran: list[str] = []
            real = other.pool.run

            async def rec(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                          wait_s: float | None = None, read_only: bool = False) -> CommandResult:
                ran.append(command)
                return await real(node, command, limit_s=limit_s, stdin=stdin, wait_s=wait_s, read_only=read_only)

            other.pool.run = rec  # type: ignore[method-assign]
            rid = await request(a)
            clicks = [a.click("restart_confirm", rid, user=BOB), a.click("restart_confirm", rid, user=CAROL),
                      on_action(other.context(Asker(surface="slack", user_id=ALICE, channel_id=OPS)),
                                "restart_confirm", rid),
                      a.click("restart_confirm", rid, user=BOB)]  # Slack redelivers a click
            outs = await asyncio.gather(*clicks)
            assert sum(o.executed for o in outs) == 1
            losers = [o for o in outs if not o.executed]
            assert all("refused" in str(o.ephemeral) for o in losers), [o.ephemeral for o in losers]
            assert len(a.restarts_run() + [c for c in ran if "systemctl restart" in c]) == 1
            await until(ready_in_both(a), 45, "ready")
            assert sim.state(KIMI_UNIT).main_pid != pid
            # A replay after the fact is refused too, and names who confirmed.
            late = await a.click("restart_confirm", rid, user=BOB)
            assert not late.executed and "refused: already confirmed by" in str(late.ephemeral)
            assert len(notices(a, "is ready", NOTIFY)) == 1


async def test_expired_cancelled_and_replayed_clicks(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(confirm_ttl="1s"), ready=False)
    async with bot(cluster.config) as b:
        # Expiry by the scheduled job rewrites the posted message.
        rid = await request(b)
        await b.rt.store.requests.set_message(rid, OPS, "1700000000.000900")  # type: ignore[union-attr]
        await until(lambda: any("Expired" in t for t in b.notifier.texts(OPS)), 20, "the expiry rewrite")
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "expired"
        out = await b.click("restart_confirm", rid)
        assert not out.executed and "expired" in str(out.ephemeral)
        assert out.message is not None and "Expired — ask again" in out.message.data["notice"]
        # A click after the deadline, before the job ran, expires it too.
        rid2 = await request(b)
        await asyncio.sleep(1.05)
        out = await b.click("restart_confirm", rid2)
        assert not out.executed and "expired" in str(out.ephemeral).lower()
        # Cancel, then confirm the cancelled request.
        rid3 = await request(b)
        out = await b.click("restart_cancel", rid3, user=BOB)
        assert out.message is not None and plain(out.message.data["notice"]) == f"Cancelled by <@{BOB}>"
        out = await b.click("restart_confirm", rid3, user=ALICE)
        assert not out.executed and "cancelled" in str(out.ephemeral)
        assert b.restarts_run() == []
        events = [e.event for e in await b.rt.store.audit.recent("kimi")]  # type: ignore[union-attr]
        assert "restart.expired" in events and "restart.cancelled" in events


async def test_cooldown_and_force(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    async with bot(cluster.config) as b:
        await b.rt.store.restarts.record("kimi", "gpu-a", b.ctx().now(), ALICE, False)  # type: ignore[union-attr]
        r = await b.ask("restart kimi")
        assert not r.ok and "refused: cooldown" in str(r.error) and "force" in str(r.error)
        rid = await request(b, "restart kimi force")
        out = await b.click("restart_confirm", rid)
        assert out.executed
        await until(ready_in_both(b), 45, "ready")
        last = await b.rt.store.restarts.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert last is not None and last.forced and last.by == BOB
        executed = [e for e in await b.rt.store.audit.recent("kimi") if e.event == "restart.executed"]  # type: ignore[union-attr]
        assert len(executed) == 1 and "forced" in executed[0].detail


async def test_in_flight_lock_refuses_a_second_request(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, ready=False)
    async with bot(cluster.config) as b:
        await b.rt.store.locks.acquire("restart:kimi@gpu-a", "r-other", 60, b.ctx().now())  # type: ignore[union-attr]
        r = await b.ask("restart kimi")
        assert not r.ok and "in flight" in str(r.error) and str(r.error).startswith("refused")


async def test_message_text_never_reaches_the_remote_command(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"))
    async with bot(cluster.config) as b:
        rid = await request(b, "restart kimi; rm -rf / $(touch /tmp/pwned) `id`")
        out = await b.click("restart_confirm", rid)
        assert out.executed
        assert b.restarts_run() == [RESTART_CMD]
        for c in b.commands:
            assert "rm -rf" not in c and "pwned" not in c and "`id`" not in c
        await until(ready_in_both(b), 45, "ready")


async def test_start_limit_hit_reported_with_fix_and_not_retried(make_cluster: MakeCluster) -> None:
    scenario = kimi(start_limit_burst=1, start_limit_interval_s=600)
    cluster = await kimi_cluster(make_cluster, scenario=scenario, access_=access(cooldown="0s"))
    async with bot(cluster.config) as b:
        rid = await request(b)
        out = await b.click("restart_confirm", rid)
        assert out.executed and out.message is not None
        text = out.message.data["notice"]
        assert "start-limit-hit" in text and "failed" in text
        assert any("reset-failed" in (s.text or "") for s in out.message.sections)
        assert b.restarts_run() == [RESTART_CMD]
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "failed"
        assert await b.rt.store.locks.holder("restart:kimi@gpu-a", b.ctx().now()) is None  # type: ignore[union-attr]


async def test_terminal_restart_typed_name_and_wait(make_cluster: MakeCluster, tmp_path: Path) -> None:
    import io

    from bot.restart_cli import run_restart

    cluster = await kimi_cluster(make_cluster, access_={"cooldown": "0s"})  # default policy: nobody in Slack
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=False, confirm="qwen", out=out) == 1
    assert "refused: you typed 'qwen'" in out.getvalue() and "nothing was restarted" in out.getvalue()
    out = io.StringIO()
    assert await run_restart(cluster.config, "nope", force=False, wait=False, confirm=None, out=out) == 2
    assert "known: kimi@gpu-a" in out.getvalue()
    pid = cluster.sims["gpu-a"].state(KIMI_UNIT).main_pid
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=True, confirm="kimi", out=out) == 0
    text = out.getvalue()
    assert "the service will be unavailable" in text and "Restart confirmed by terminal" in text
    assert "✅ kimi on gpu-a is ready — loaded in" in text
    assert cluster.sims["gpu-a"].state(KIMI_UNIT).main_pid != pid


def test_fast_profile_is_fast() -> None:
    assert fast_profile().total_load_s() < 2.5


async def test_audit_is_mirrored_and_listed(tmp_path: Path) -> None:
    from handlers.audit import handle as audit_handle
    from handlers.audit import record
    from handlers.context import Context, Request
    from services.cluster import Cluster
    from services.node.ssh import NodePool
    from services.store.store import Store

    config = BotConfig.model_validate({"audit": {"channel": "C0AUDIT"}})
    store = Store(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    rec = RecordingNotifier()
    ctx = Context(config=config, cluster=Cluster(config, NodePool()), store=store,
                  asker=Asker(surface="slack", user_id=ALICE, channel_id=OPS), notifier=rec)
    await record(ctx, "restart.refused", "kimi", "gpu-a", "not allowed: nobody may restart services yet")
    await record(ctx, "restart.requested", "qwen", "gpu-b", "asked to restart")
    mirrored = rec.texts("C0AUDIT")
    assert len(mirrored) == 2 and f"<@{ALICE}>" in plain(mirrored[0]) and "restart.refused" in mirrored[0]
    reply = await audit_handle(ctx, Request(intent="audit", services=[], nodes=[]))
    table = reply.sections[0]
    assert table.headers == ["when (UTC)", "who", "where", "what", "service", "detail"]
    assert [r[3] for r in table.rows] == ["restart.requested", "restart.refused"]
    await store.close()


# ---- issue 10: a restart lock never outlives its restart


async def test_terminal_restart_without_wait_does_not_block_the_next_one(make_cluster: MakeCluster) -> None:
    import getpass
    import io

    from bot.restart_cli import run_restart

    cluster = await kimi_cluster(make_cluster, access_={"cooldown": "0s"})
    sim = cluster.sims["gpu-a"]
    first = sim.state(KIMI_UNIT).main_pid
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=False, confirm="kimi", out=out) == 0
    await until(lambda: sim.state(KIMI_UNIT).main_pid != first, 30, "the new start")
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    # No bot is running: nobody followed that load. The next restart sees it is over and goes ahead.
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=True, confirm="kimi", out=out) == 0, \
        out.getvalue()
    assert "in flight" not in out.getvalue() and "✅ kimi on gpu-a is ready" in out.getvalue()
    async with runtime(cluster.config) as rt:
        store = rt.store
        assert store is not None
        audit = await store.audit.recent("kimi", limit=50)
        executed = [e for e in audit if e.event == "restart.executed"]
        assert len(executed) == 2
        assert all(e.who == f"terminal:{getpass.getuser()}" for e in executed), [e.who for e in executed]
        assert any(e.event == "restart.lock_released" for e in audit)
        assert await store.locks.get("restart:kimi@gpu-a", rt.context().now()) is None
    # The terminal could not post the notify-channel notice: a bot started later posts it, once.
    async with bot(cluster.config) as b:
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 20, "the ready notice from the bot")
        await asyncio.sleep(0.6)
        assert len(notices(b, "is ready", NOTIFY)) == 1


async def test_ctrl_c_during_wait_leaves_no_lock_behind(make_cluster: MakeCluster) -> None:
    import io

    from bot.restart_cli import run_restart

    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"))
    sim = cluster.sims["gpu-a"]
    first = sim.state(KIMI_UNIT).main_pid
    out = io.StringIO()
    task = asyncio.create_task(run_restart(cluster.config, "kimi", force=False, wait=True, confirm="kimi", out=out))
    await until(lambda: "restarting" in out.getvalue(), 30, "the restart to run")
    task.cancel()  # what Ctrl-C does to asyncio.run's main task
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "Stopped following" in out.getvalue()
    await until(lambda: sim.state(KIMI_UNIT).main_pid != first, 30, "the new start")
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    async with bot(cluster.config) as b:  # a Slack restart now: not refused as "in flight"
        rid = await request(b, "restart kimi")
        outcome = await b.click("restart_confirm", rid)
        assert outcome.executed, outcome.ephemeral
        await until(ready_in_both(b), 45, "ready")


async def test_stale_lock_is_shown_and_cleared_by_hand(make_cluster: MakeCluster) -> None:
    import io

    from bot.restart_cli import run_restart

    cluster = await kimi_cluster(make_cluster, access_={"cooldown": "0s"})
    async with runtime(cluster.config) as rt:
        assert rt.store is not None
        await rt.store.locks.acquire("restart:kimi@gpu-a", "r-gone", 3600, rt.context().now())
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=True, wait=False, confirm="kimi", out=out) == 1
    said = out.getvalue()
    assert "another restart of kimi on gpu-a is in flight (request r-gone, " in said
    assert "--clear-lock" in said
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=False, confirm=None, out=out, clear=True) == 0
    assert "cleared the restart lock of kimi on gpu-a (request r-gone" in out.getvalue()
    out = io.StringIO()
    assert await run_restart(cluster.config, "kimi", force=False, wait=False, confirm=None, out=out, clear=True) == 0
    assert "nothing to clear" in out.getvalue()
    async with runtime(cluster.config) as rt:
        assert rt.store is not None
        cleared = [e for e in await rt.store.audit.recent("kimi") if e.event == "restart.lock_cleared"]
        assert len(cleared) == 1 and cleared[0].who.startswith("terminal:") and cleared[0].request_id == "r-gone"


async def test_unlock_handler_needs_restart_rights_and_clears(make_cluster: MakeCluster) -> None:
    from handlers.context import Request
    from handlers.restart import handle_unlock

    cluster = await kimi_cluster(make_cluster, ready=False)
    async with bot(cluster.config) as b:
        store = b.rt.store
        assert store is not None
        await store.locks.acquire("restart:kimi@gpu-a", "r-gone", 3600, b.ctx().now())
        req = Request(intent="unlock", services=list(cluster.config.services), nodes=[], explicit_target=True)
        refused = await handle_unlock(b.ctx(EVE), req)
        assert not refused.ok and "not allowed" in str(refused.error)
        assert await store.locks.get("restart:kimi@gpu-a", b.ctx().now()) is not None
        done = await handle_unlock(b.ctx(ALICE), req)
        assert done.ok and done.data["cleared"] is True and done.data["request_id"] == "r-gone"
        assert await store.locks.get("restart:kimi@gpu-a", b.ctx().now()) is None
        events = [(e.event, e.who) for e in await store.audit.recent("kimi")]
        assert ("restart.lock_cleared", ALICE) in events and ("restart.unlock_refused", EVE) in events


async def test_unlock_in_slack_words_clears_a_stale_lock(make_cluster: MakeCluster) -> None:
    """"unlock kimi" as typed in Slack reaches the same guarded handler through the command table."""
    cluster = await kimi_cluster(make_cluster, ready=False)
    async with bot(cluster.config) as b:
        store = b.rt.store
        assert store is not None
        await store.locks.acquire("restart:kimi@gpu-a", "r-stale", 3600, b.ctx().now())
        refused = await b.ask("unlock kimi", user=EVE)
        assert refused.intent == "unlock" and not refused.ok and not refused.actions
        assert await store.locks.get("restart:kimi@gpu-a", b.ctx().now()) is not None
        done = await b.ask("clear the restart lock on kimi")
        assert done.intent == "unlock" and done.ok and done.data["request_id"] == "r-stale"
        assert await store.locks.get("restart:kimi@gpu-a", b.ctx().now()) is None
        assert b.restarts_run() == []  # clearing a lock restarts nothing


async def test_lock_of_a_finished_request_is_released_at_the_next_request(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"))
    async with bot(cluster.config) as b:
        store = b.rt.store
        assert store is not None
        now = b.ctx().now()
        from datetime import timedelta

        await store.requests.create("r-old", "kimi", "gpu-a", KIMI_UNIT, ALICE, OPS, None, now,
                                    now + timedelta(minutes=2), False, kind="restart")
        await store.requests.transition("r-old", {"pending"}, "cancelled", ALICE, now)
        await store.locks.acquire("restart:kimi@gpu-a", "r-old", 3600, now)
        reply = await b.ask("restart kimi")
        assert reply.ok, reply.error


async def test_a_restart_during_a_burst_waits_for_a_channel_and_is_not_refused(make_cluster: MakeCluster) -> None:
    """Every channel of the node is taken by slow questions for longer than its timeout: a question asked then
    says the bot is busy (not that the node is unreachable); a restart waits for a channel and runs."""
    cluster = await kimi_cluster(make_cluster)
    node = cluster.config.nodes[0].model_copy(update={"timeout": 2.0})
    config = cluster.config.model_copy(update={"nodes": [node]})
    slow_tool(cluster.sims["gpu-a"], "nvidia-smi", 0.8)  # the restart's first look at the node takes ~1 s
    old_pid = cluster.sims["gpu-a"].state(KIMI_UNIT).main_pid
    async with bot(config) as b:
        b.rt.pool.wait_s = 0.5  # a question gives up waiting inside the bot after its own limit (2 s)
        async with holding_channels(b.rt.pool, node, 5.0):
            rid = await request(b)  # waits for a channel: not refused
        async with holding_channels(b.rt.pool, node, 5.0):
            status = render_text(await b.ask("status kimi"))
            assert "inferbot is busy" in status and "unreachable" not in status, status
            out = await b.click("restart_confirm", rid, user=BOB)
        assert out.executed and out.message is not None, out
        assert "restarting" in out.message.data["notice"]
        assert b.restarts_run() == [RESTART_CMD]
        await until(ready_in_both(b), 45, "the ready notices")
    assert cluster.sims["gpu-a"].state(KIMI_UNIT).main_pid != old_pid
