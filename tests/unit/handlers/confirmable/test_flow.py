"""handlers/confirmable/flow.py: a restart and a benchmark go through the same flow, with the same guarantees.

The same clicks on a ``restart kimi`` and on a ``bench kimi`` request, on the simulated node behind a real
sshd with the real store and scheduler: two clicks at once (and one Slack redelivers) run the request once;
a click by someone not allowed, by the person who asked (two-person rule), on a cancelled request or on an
expired one runs nothing. A third kind gets the same (tests/unit/handlers/test_request_kinds.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from config.models import BotConfig
from handlers.confirmable.kind import CANCEL, CONFIRM
from services.mentions import plain
from tests.conftest import MakeCluster
from tests.test_restart import ALICE, BOB, CAROL, EVE, OPS, bot, until
from tests.unit.handlers.test_acceptance import bench_cluster

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

KINDS = {"restart": ("restart kimi", "systemctl restart", "Restart"),
         "bench": ("bench kimi", "bench serve", "Benchmark")}


def with_access(config: BotConfig, **changes: Any) -> BotConfig:
    return config.model_copy(update={"access": config.access.model_copy(update=changes)})


async def asked(b: Any, kind: str, user: str = ALICE) -> str:
    reply = await b.ask(KINDS[kind][0], user)
    assert reply.ok and reply.intent == kind, reply.title + " " + str(reply.error)
    assert [a.action_id for a in reply.actions] == [CONFIRM, CANCEL]
    return str(reply.data["request_id"])


def runs(b: Any, kind: str) -> int:
    return sum(KINDS[kind][1] in c for c in b.commands)


async def state(b: Any, rid: str) -> str:
    req = await b.rt.store.requests.get(rid)
    return str(req.state) if req is not None else "missing"


async def events(b: Any, kind: str, rid: str) -> list[str]:
    return [e.event for e in reversed(await b.rt.store.audit.recent("kimi", 100)) if e.request_id == rid]


@pytest.mark.parametrize("kind", ["restart", "bench"])
async def test_clicks_at_once_run_the_request_once(kind: str, make_cluster: MakeCluster,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    async with bot(cluster.config) as b:
        rid = await asked(b, kind)
        outs = await asyncio.gather(b.click(CONFIRM, rid, BOB), b.click(CONFIRM, rid, CAROL),
                                    b.click(CONFIRM, rid, BOB))  # Slack redelivers the first click
        assert sum(o.executed for o in outs) == 1
        assert all(str(o.ephemeral).startswith("refused") for o in outs if not o.executed), outs
        won = next(o for o in outs if o.executed)
        assert won.message is not None and plain(won.message.data["notice"]).startswith(
            f"{KINDS[kind][2]} confirmed by <@")
        late = await b.click(CONFIRM, rid, ALICE)
        assert not late.executed and "refused: already confirmed by" in str(late.ephemeral)
        await until(lambda: runs(b, kind) >= 1, 30, "the run")
        await asyncio.sleep(0.3)
        assert runs(b, kind) == 1
        said = await events(b, kind, rid)
        assert said.count(f"{kind}.requested") == 1 and said.count(f"{kind}.confirmed") == 1
        assert said.count(f"{kind}.click_refused") == 3


@pytest.mark.parametrize("kind", ["restart", "bench"])
async def test_refused_cancelled_and_expired_clicks_run_nothing(kind: str, make_cluster: MakeCluster,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, bench=False)
    async with bot(with_access(cluster.config, require_second_person=True)) as b:
        rid = await asked(b, kind)
        for user, action in ((EVE, CONFIRM), (EVE, CANCEL)):
            out = await b.click(action, rid, user)
            assert out.message is None and str(out.ephemeral).startswith("not allowed"), out
        own = await b.click(CONFIRM, rid, ALICE)
        assert own.message is None and "two-person rule" in str(own.ephemeral)
        assert await state(b, rid) == "pending"
        out = await b.click(CANCEL, rid, BOB)
        assert out.message is not None and out.message.title == "Cancelled"
        assert plain(out.message.data["notice"]) == f"Cancelled by <@{BOB}>"
        out = await b.click(CONFIRM, rid, CAROL)
        assert not out.executed and "cancelled" in str(out.ephemeral)
        assert (await events(b, kind, rid)).count(f"{kind}.click_refused") == 4
    async with bot(with_access(cluster.config, confirm_ttl=1.0)) as b:
        rid = await asked(b, kind)
        assert b.rt.store is not None
        await b.rt.store.requests.set_message(rid, OPS, "1700000000.000900")
        await until(lambda: any("Expired — ask again" in t for t in b.notifier.texts(OPS)), 20, "the expiry job")
        out = await b.click(CONFIRM, rid, BOB)
        assert not out.executed and "expired" in str(out.ephemeral)
        rid2 = await asked(b, kind)
        await asyncio.sleep(1.05)  # past the deadline, before the job ran: the click expires it
        out = await b.click(CONFIRM, rid2, BOB)
        assert not out.executed and "expired" in str(out.ephemeral)  # (or the job was first)
        assert out.message is not None and out.message.data["notice"] == "Expired — ask again"
        for r in (rid, rid2):
            assert await state(b, r) == "expired"
            assert (await events(b, kind, r)).count(f"{kind}.expired") == 1
        assert runs(b, kind) == 0
