"""One answer for the same question asked at once (issue 26, goal 5): bot/shared_answers.py.

Real sshd and the simulated Kimi node. That an answer was made once is seen in the replies themselves: a
handler makes new section objects each time it runs, so askers holding the very same section objects got
one answer; askers whose answers depend on who they are (help, "who can restart") get their own.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from bot.router import route
from bot.shared_answers import SharedAnswers, share_key
from config.models import AccessPolicy
from handlers.context import Asker
from handlers.reply import Reply, Section
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_burst import execs
from tests.test_e2e_settings import kimi

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

PEOPLE = 30
ALICE, BOB = "UALICE0001", "UBOB000002"


def slack(user: str) -> Asker:
    return Asker(surface="slack", user_id=user, channel_id="C0OPS", thread_ts="1700000000.000100")


async def test_identical_questions_asked_at_once_get_one_answer_each_their_own(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    sshd = cluster.sshds["gpu-a"]
    async with runtime(cluster.config) as rt:
        before = execs(sshd)
        replies = await asyncio.gather(*(
            answer("status kimi", rt.context(slack(f"U{i:09d}"), service_data=False), rt.shared)
            for i in range(PEOPLE)))
        probes = execs(sshd) - before
    first = replies[0]
    assert all(r.ok and r.intent == "status" for r in replies)
    assert "kimi on gpu-a" in render_text(first) and "ready" in render_text(first)
    # Made once: every asker holds the same section objects ...
    assert all(len(r.sections) == len(first.sections) for r in replies)
    assert all(a is b for r in replies[1:] for a, b in zip(r.sections, first.sections, strict=True))
    assert probes == 1
    # ... in lists and data of their own: what one asker's front end adds is not in another's answer.
    assert len({id(r.sections) for r in replies}) == PEOPLE and len({id(r.data) for r in replies}) == PEOPLE
    replies[1].sections.append(Section(kind="context", text="only for the second asker"))
    replies[1].data["mine"] = True
    assert "only for the second asker" not in render_text(first) and "mine" not in replies[2].data


async def test_the_same_question_asked_after_its_answer_is_answered_again(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        one = await answer("status kimi", rt.context(slack(ALICE), service_data=False), rt.shared)
        two = await answer("status kimi", rt.context(slack(ALICE), service_data=False), rt.shared)
    assert one.ok and two.ok and one.sections[0] is not two.sections[0]


async def test_different_arguments_or_surfaces_are_different_questions(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        ten, twenty, json_ten = await asyncio.gather(
            answer("logs kimi 10", rt.context(slack(ALICE), service_data=False), rt.shared),
            answer("logs kimi 20", rt.context(slack(BOB), service_data=False), rt.shared),
            answer("logs kimi 10", rt.context(Asker(surface="json")), rt.shared))
    assert ten.ok and twenty.ok and json_ten.ok
    assert not {id(s) for s in ten.sections} & {id(s) for s in twenty.sections}
    assert not {id(s) for s in ten.sections} & {id(s) for s in json_ten.sections}


async def test_answers_that_depend_on_who_asks_are_each_their_own(make_cluster: MakeCluster) -> None:
    """Help hides restart from who may not restart; "who can restart kimi?" says whether you may."""
    cluster = await make_cluster({"gpu-a": kimi()}, access=AccessPolicy(restart_users=[ALICE]))
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    async with runtime(cluster.config) as rt:
        helps = await asyncio.gather(*(answer("help", rt.context(slack(u), service_data=False), rt.shared)
                                       for u in (ALICE, BOB, ALICE, BOB)))
        who = await asyncio.gather(*(answer("who can restart kimi?", rt.context(slack(u), service_data=False),
                                            rt.shared) for u in (ALICE, BOB)))
    def lists_restart(r: Reply) -> bool:
        return any(line.split()[:1] == ["restart"] for line in render_text(r).splitlines())

    assert [lists_restart(r) for r in helps] == [True, False, True, False]
    assert [r.data["services"][0]["access"]["asker_allowed"] for r in who] == [True, False]
    assert "you may" in render_text(who[0]).lower() or render_text(who[0]) != render_text(who[1])


def test_which_questions_are_the_same() -> None:
    """The rule: commands that act or depend on the asker never share; the rest share by command, targets
    and typed arguments, per surface and kind of reply."""
    from config.models import BotConfig, Node, Service

    config = BotConfig(nodes=[Node(name="gpu-a", host="127.0.0.1")],
                       services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service"),
                                 Service(name="qwen", node="gpu-a", unit="vllm-qwen.service")])

    class Ctx:
        def __init__(self, surface: str = "slack", service_data: bool = False) -> None:
            self.asker = Asker(surface=surface, user_id=ALICE)  # type: ignore[arg-type]
            self.service_data = service_data

    def key(text: str, ctx: Ctx | None = None) -> object:
        return share_key(route(text, config), ctx or Ctx())  # type: ignore[arg-type]

    assert key("status kimi") == key("is kimi up?") == key("kimi status")
    assert key("status kimi") != key("status qwen") != key("status")
    assert key("logs kimi 10") != key("logs kimi 20")
    assert key("status kimi") != key("status kimi", Ctx("json", True))
    for personal in ("help", "restart kimi", "who can restart kimi?", "silence kimi 2h driver update",
                     "unlock kimi", "thanks!", "status of llama"):
        assert key(personal) is None, personal


async def test_a_failed_or_called_off_answer_reaches_everyone_who_waited() -> None:
    shared = SharedAnswers()
    key = share_key(route("status kimi", _config()), _ctx())
    assert key is not None
    started = asyncio.Event()

    async def fails() -> tuple[Reply, str]:
        started.set()
        await asyncio.sleep(0.05)
        raise RuntimeError("the handler failed")

    results = await asyncio.gather(*(shared.answer(key, fails) for _ in range(3)), return_exceptions=True)
    assert [type(r) for r in results] == [RuntimeError] * 3

    async def slow(text: str) -> tuple[Reply, str]:
        await asyncio.sleep(0.2)
        return Reply(intent="status", title=text), "ok"

    owner = asyncio.create_task(shared.answer(key, lambda: slow("owner's")))
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(shared.answer(key, lambda: slow("asked again")))
    await asyncio.sleep(0.01)
    owner.cancel()
    reply, _, made = await waiter
    assert reply.title == "asked again" and made  # the owner was called off: the waiter asked for itself


def _config():  # type: ignore[no-untyped-def]
    from config.models import BotConfig, Node, Service

    return BotConfig(nodes=[Node(name="gpu-a", host="127.0.0.1")],
                     services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service")])


def _ctx():  # type: ignore[no-untyped-def]
    class Ctx:
        asker = Asker(surface="slack", user_id=ALICE)
        service_data = False

    return Ctx()
