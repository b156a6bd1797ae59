"""handlers/request_kinds.py: a kind registered here gets the whole flow, with no flow code of its own.

``Drill`` is a third kind made in this test: it says what it checks, shows and runs, and what settling
finds; the flow's ways in by id (a click, the expiry job, the settle job) do the rest — the compare-and-set
on every click, expiry, the two-person rule, the audit, settling after a stop, exactly once. It runs nothing
on a node, so the bot here is the real runtime, store and APScheduler without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.scheduler import BotScheduler
from config.models import BotConfig
from handlers.confirmable.flow import ask
from handlers.confirmable.kind import (
    CANCEL,
    CONFIRM,
    ActionOutcome,
    Asked,
    Confirmed,
    Ended,
    Interrupted,
    Later,
    Preview,
    Settling,
    Words,
)
from handlers.context import Asker, Context, Request
from handlers.notify import Notifier, RecordingNotifier
from handlers.reply import Reply, Section
from handlers.request_kinds import KINDS, Kinds, on_action
from services.access import StaticGroups
from services.cluster import Cluster
from services.mentions import plain
from services.node.ssh import NodePool
from services.store.records import REQUEST_KINDS, ConfirmableRequest
from services.store.store import Store

ALICE, BOB, CAROL, EVE = "U0ALICE", "U0BOB", "U0CAROL", "U0EVE"
OPS, SRE = "C0OPS", "S0SRE"
THREAD = "1700000000.000100"
LONG_AGO = datetime.now(UTC) - timedelta(hours=2)


@dataclass
class Drill:
    """A tiny kind: it counts what the flow asks of it, and settling finds what a test says."""

    name = "drill"
    prefix = "d-"
    words = Words(title="Drill", verb="drill", command="drill")
    runs: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    found: dict[str, Settling] = field(default_factory=dict)
    refuse_claim: str | None = None
    settling: list[str] = field(default_factory=list)  # the settle steps that started
    gate: asyncio.Event | None = None  # when set up: a settle step waits for it

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str:
        return Preview(sections=[Section(kind="text", text=f"drill {asked.service.name}")], data={"drill": True},
                       detail="asked to drill")

    async def claim(self, run: Confirmed) -> str | None:
        self.claims.append(run.req.id)
        return self.refuse_claim

    async def run(self, run: Confirmed) -> ActionOutcome:
        await asyncio.sleep(0.05)  # long enough for every other click to arrive meanwhile
        self.runs.append(run.req.id)
        await run.finish(True)
        await self.release(run.ctx, run.req)
        return ActionOutcome(message=run.message(f"{run.line} — drilled", "ok"), executed=True)

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        self.released.append(req.id)

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        self.settling.append(req.id)
        if self.gate is not None:
            await self.gate.wait()
        return self.found.get(req.id)


@pytest.fixture
def drill() -> Iterator[Drill]:
    kind = Drill()
    KINDS.register(kind)
    try:
        yield kind
    finally:
        KINDS.unregister(kind.name)


def config(tmp_path: Path, **access: Any) -> BotConfig:
    return BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.2"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "state": {"dir": str(tmp_path)}, "watch": {"enabled": False},
        "access": {"restart_users": [ALICE, BOB], "restart_usergroups": [SRE], "restart_channels": [OPS],
                   **access},
    })


@dataclass
class Bot:
    rt: Runtime
    notifier: RecordingNotifier
    scheduler: BotScheduler

    def ctx(self, user: str | None = ALICE, channel: str | None = OPS) -> Context:
        return self.rt.context(Asker(surface="slack", user_id=user, channel_id=channel, thread_ts=THREAD))

    async def ask(self, user: str = ALICE) -> Reply:
        service = self.rt.config.services[0]
        request = Request(intent="drill", services=[service], nodes=[self.rt.config.node(service.node)],
                          explicit_target=True)
        return await ask(self.ctx(user), KINDS.named("drill"), request)

    async def click(self, action: str, request_id: str, user: str = BOB) -> ActionOutcome:
        return await on_action(self.ctx(user), action, request_id)

    @property
    def store(self) -> Store:
        assert self.rt.store is not None
        return self.rt.store

    async def events(self) -> list[tuple[str | None, str]]:
        return [(e.request_id, e.event) for e in reversed(await self.store.audit.recent("kimi", 100))]


@contextlib.asynccontextmanager
async def bot(cfg: BotConfig) -> AsyncIterator[Bot]:
    """One bot process whose store also keeps requests of the kind ``drill``."""
    store = Store(cfg.state.database_url(), request_kinds=(*REQUEST_KINDS, "drill"))
    pool = NodePool()
    notifier = RecordingNotifier()
    scheduler = BotScheduler()
    rt = Runtime(config=cfg, pool=pool, cluster=Cluster(cfg, pool), store=store, notifier=notifier,
                 groups=StaticGroups({SRE: [CAROL]}), jobs=scheduler)
    await scheduler.start(rt, watch=False)
    try:
        yield Bot(rt, notifier, scheduler)
    finally:
        await scheduler.shutdown()
        await pool.close()
        await store.close()


async def until(pred: Callable[[], bool], within: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------------------------------------


async def test_a_new_kind_is_asked_clicked_and_run_once(drill: Drill, tmp_path: Path) -> None:
    async with bot(config(tmp_path, require_second_person=True)) as b:
        reply = await b.ask(ALICE)
        assert reply.ok and reply.intent == "drill" and reply.title == "Drill kimi on gpu-a?"
        assert [(a.action_id, a.text) for a in reply.actions] == [(CONFIRM, "Drill kimi"), (CANCEL, "Cancel")]
        rid = str(reply.data["request_id"])
        assert rid.startswith("d-") and reply.data["drill"] is True
        assert (await b.store.requests.get(rid)).kind == "drill"  # type: ignore[union-attr]
        assert "two-person rule" in str(reply.sections[-1].text)

        nope = await b.click(CONFIRM, rid, EVE)  # not allowed
        assert nope.ephemeral is not None and nope.ephemeral.startswith("not allowed") and nope.message is None
        own = await b.click(CONFIRM, rid, ALICE)  # the person who asked
        assert "two-person rule" in str(own.ephemeral) and not own.executed
        outs = await asyncio.gather(b.click(CONFIRM, rid, BOB), b.click(CONFIRM, rid, CAROL),
                                    b.click(CONFIRM, rid, BOB))  # Slack redelivers the first
        assert sum(o.executed for o in outs) == 1 and drill.runs == [rid] and drill.claims == [rid]
        assert all(str(o.ephemeral).startswith("refused") for o in outs if not o.executed), outs
        won = next(o for o in outs if o.executed)
        assert won.message is not None and "— drilled" in won.message.data["notice"]
        late = await b.click(CONFIRM, rid, ALICE)
        assert not late.executed and "refused: already confirmed by" in str(late.ephemeral)
        assert (await b.store.requests.get(rid)).state == "done"  # type: ignore[union-attr]
        events = await b.events()
        assert [e for _, e in events if e in ("drill.requested", "drill.confirmed")] == [
            "drill.requested", "drill.confirmed"]
        assert sum(e == "drill.click_refused" for _, e in events) == 2 + 3  # EVE, ALICE, the three losers


async def test_a_new_kind_is_cancelled_or_refused_at_its_claim(drill: Drill, tmp_path: Path) -> None:
    async with bot(config(tmp_path)) as b:
        rid = str((await b.ask()).data["request_id"])
        out = await b.click(CANCEL, rid, BOB)
        assert out.message is not None and plain(out.message.data["notice"]) == f"Cancelled by <@{BOB}>"
        assert out.message.title == "Cancelled"
        again = await b.click(CONFIRM, rid, ALICE)
        assert plain(str(again.ephemeral)) == f"refused: this request was cancelled by <@{BOB}>"
        drill.refuse_claim = "refused: the drill ground is busy"
        rid2 = str((await b.ask()).data["request_id"])
        out = await b.click(CONFIRM, rid2, BOB)
        assert out.ephemeral == "refused: the drill ground is busy" and not out.executed
        assert (await b.store.requests.get(rid2)).state == "failed"  # type: ignore[union-attr]
        assert drill.runs == [] and (rid2, "drill.refused") in await b.events()


async def test_a_new_kind_expires_by_its_job(drill: Drill, tmp_path: Path) -> None:
    async with bot(config(tmp_path, confirm_ttl="1s")) as b:
        rid = str((await b.ask()).data["request_id"])
        await b.store.requests.set_message(rid, OPS, "1700000000.000900")
        await until(lambda: any("Expired — ask again" in t for t in b.notifier.texts(OPS)), 20, "the expiry rewrite")
        assert (await b.store.requests.get(rid)).state == "expired"  # type: ignore[union-attr]
        out = await b.click(CONFIRM, rid, BOB)
        assert out.ephemeral == "refused: this request expired — ask again" and not out.executed
        assert (rid, "drill.expired") in await b.events() and drill.runs == []


async def _left_by_a_stopped_bot(cfg: BotConfig, states: dict[str, str]) -> None:
    """Requests a bot stopped in the middle of: confirmed or running, two hours ago."""
    store = Store(cfg.state.database_url(), request_kinds=(*REQUEST_KINDS, "drill"))
    try:
        for rid, state in states.items():
            await store.requests.create(rid, "kimi", "gpu-a", "vllm-kimi.service", ALICE, OPS, THREAD, LONG_AGO,
                                        LONG_AGO + timedelta(minutes=2), False, kind="drill")
            await store.requests.transition(rid, {"pending"}, "confirmed", BOB, LONG_AGO)
            if state == "running":
                await store.requests.transition(rid, {"confirmed"}, "running", BOB, LONG_AGO)
    finally:
        await store.close()


async def test_a_new_kind_left_confirmed_or_running_is_settled_once(drill: Drill, tmp_path: Path) -> None:
    cfg = config(tmp_path)
    await _left_by_a_stopped_bot(cfg, {"d-ended": "running", "d-failed": "running", "d-stuck": "confirmed",
                                       "d-going": "running"})
    drill.found = {"d-ended": Ended(ok=True), "d-failed": Ended(ok=False),
                   "d-stuck": Interrupted(60.0, "the drill never started"),
                   "d-going": Later(datetime.now(UTC) + timedelta(hours=1))}
    async with bot(cfg) as b:
        async def states() -> dict[str, str]:
            return {r.id: r.state for r in [await b.store.requests.get(i) for i in drill.found] if r is not None}

        deadline = time.monotonic() + 20
        while (await states()) != {"d-ended": "done", "d-failed": "failed", "d-stuck": "failed",
                                   "d-going": "running"}:
            assert time.monotonic() < deadline, await states()
            await asyncio.sleep(0.1)
        assert "drill:d-going" in b.scheduler.job_ids()  # looked at again when the kind said
        assert sorted(drill.released) == ["d-ended", "d-failed", "d-stuck"]
        assert [(r, e) for r, e in await b.events() if e == "drill.interrupted"] == [("d-stuck", "drill.interrupted")]
        stuck = next(e for e in await b.store.audit.recent("kimi", 50) if e.event == "drill.interrupted")
        assert stuck.detail == "the drill never started" and stuck.who == "inferbot"
    drill.found["d-stuck"] = Interrupted(0.0, "again")
    async with bot(cfg) as again:  # the next bot: nothing is settled twice
        await asyncio.sleep(2.5)
        assert [e for _, e in await again.events() if e == "drill.interrupted"] == ["drill.interrupted"]
        assert sorted(drill.released) == ["d-ended", "d-failed", "d-stuck"]


async def test_a_kind_this_bot_does_not_know_is_never_run(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    await _left_by_a_stopped_bot(cfg, {"d-left": "running"})
    async with bot(cfg) as b:  # "drill" is not registered here (a newer inferbot stored it)
        store = b.store
        await store.requests.create("d-new", "kimi", "gpu-a", "u", ALICE, OPS, None, datetime.now(UTC),
                                    datetime.now(UTC) + timedelta(minutes=5), False, kind="drill")
        out = await b.click(CONFIRM, "d-new", BOB)
        assert not out.executed and out.ephemeral == "refused: this inferbot does not know requests of kind 'drill'"
        assert (await store.requests.get("d-new")).state == "failed"  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while (left := await store.requests.get("d-left")) is not None and left.state != "failed":
            assert time.monotonic() < deadline, left.state
            await asyncio.sleep(0.1)
        assert ("d-left", "drill.interrupted") in await b.events()


async def test_unknown_ids_are_named_by_their_prefix(tmp_path: Path) -> None:
    async with bot(config(tmp_path)) as b:
        for rid, said in (("r-000000000000", "restart "), ("b-000000000000", "benchmark "), ("x-1", "")):
            assert (await b.click(CONFIRM, rid)).ephemeral == f"refused: I don't know this {said}request"


def test_each_kind_has_its_own_name_prefix_and_a_stored_name() -> None:
    assert set(KINDS.names()) == set(REQUEST_KINDS)  # the store keeps every kind the flow knows
    kinds = Kinds(Drill())
    with pytest.raises(ValueError, match="exists already"):
        kinds.register(Drill())
    other = Drill()
    other.name = "other"
    with pytest.raises(ValueError, match="prefix 'd-' is taken"):
        kinds.register(other)
    reserved = Drill()
    reserved.name, reserved.prefix = "follow", "f-"
    with pytest.raises(ValueError, match="names jobs of the scheduler"):  # a settle job's id would be follow:<id>
        kinds.register(reserved)


async def test_a_settle_step_in_flight_is_not_scheduled_a_second_time(drill: Drill, tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """While a settle step runs, its date job is gone from the store (APScheduler removed it when it started it):
    the leader's reconcile must not take that for a request nobody settles and add one more, which APScheduler
    would skip as a second instance (a warning each time) while the step schedules its next one itself."""
    cfg = config(tmp_path)
    await _left_by_a_stopped_bot(cfg, {"d-slow": "running"})
    drill.gate = asyncio.Event()
    drill.found = {"d-slow": Later(datetime.now(UTC) + timedelta(hours=1))}
    async with bot(cfg) as b:
        await until(lambda: drill.settling == ["d-slow"], 10, "the leader's settle step")
        with caplog.at_level(logging.WARNING, logger="apscheduler"):
            await b.scheduler.reconcile()
            await asyncio.sleep(0.5)
        assert "drill:d-slow" not in b.scheduler.job_ids() and drill.settling == ["d-slow"]
        assert not [r for r in caplog.records if "maximum number of running instances" in r.getMessage()]
        drill.gate.set()
        await until(lambda: "drill:d-slow" in b.scheduler.job_ids(), 10, "the next settle, scheduled by the step")
        assert drill.settling == ["d-slow"]
