"""handlers/notice_pipeline.py: each stage alone, then the whole pipeline, on SQLite and a real PostgreSQL.

Two bot processes are two ``Store`` objects on the same database (their own engines and connections), each
behind its own ``Context``; the notifier is the recording one, which fails on demand like a Slack outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from config.models import BotConfig
from handlers.context import Context
from handlers.notice_pipeline import (
    CLAIM_STALE_S,
    HELD_TS,
    Delivered,
    Delivery,
    Notice,
    Outcome,
    Where,
    already_done,
    claim,
    deliver,
    deliver_all,
    post,
    settle,
    silence,
    someone_to_post,
    to_notify,
    was_held,
)
from handlers.notify import RecordingNotifier
from handlers.reply import Reply, Section
from services.cluster import Cluster
from services.node.ssh import NodePool
from services.store.records import Silence
from services.store.store import Store

NOTIFY = "C0NOTIFY"
KEY = "health:kimi@gpu-a"
PLACE = "unhealthy:inv-1:2026-12-02T13:00:00+00:00"


def _config() -> BotConfig:
    return BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.2"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "notify": {"channel": NOTIFY},
        "watch": {"enabled": False},
    })


@dataclass
class Bot:
    """One bot process: its own store (engine, connections), context and notifier."""

    store: Store
    ctx: Context
    notifier: RecordingNotifier


@pytest.fixture
async def bots(url: str) -> AsyncIterator[tuple[Bot, Bot]]:
    config, pool = _config(), NodePool()
    made = []
    for _ in range(2):
        store = Store(url)
        made.append(Bot(store, Context(config=config, cluster=Cluster(config, pool), store=store), RecordingNotifier()))
    try:
        yield made[0], made[1]
    finally:
        for b in made:
            await b.store.close()
        await pool.close()


@pytest.fixture
def bot(bots: tuple[Bot, Bot]) -> Bot:
    return bots[0]


def _reply(kind: str, words: str) -> Reply:
    return Reply(intent="notice", title=words, status="warn",
                 data={"notice": f"⚠️ {words}", "kind": kind, "service": "kimi", "node": "gpu-a"})


UNHEALTHY = _reply("unhealthy", "kimi on gpu-a is unhealthy — /health answered 503")
FAILED = _reply("failed", "kimi on gpu-a failed — the unit is stopped")
READY = _reply("ready", "kimi on gpu-a is ready — loaded in 29m 14s")


def _notice(reply: Reply = UNHEALTHY, place: str = PLACE, closes_held: bool = False) -> Notice:
    return Notice(KEY, Where(place, NOTIFY), reply, "kimi", "gpu-a", closes_held=closes_held)


def _delivery(b: Bot, notice: Notice, now: datetime | None = None, notifier: bool = True) -> Delivery:
    assert b.ctx.store is not None
    return Delivery(b.ctx, b.ctx.store, b.notifier if notifier else None, notice,
                    now or datetime.now(UTC))


async def _silence(b: Bot, hours: float = 2.0) -> None:
    now = datetime.now(UTC)
    await b.store.silences.put(Silence(service="kimi", node="gpu-a", until=now + timedelta(hours=hours),
                                       reason="planned driver update", by="U0ALICE", at=now))


async def _suppressed(b: Bot) -> list[str]:
    return [e.detail for e in await b.store.audit.recent("kimi", limit=50) if e.event == "notice.suppressed"]


# -- each stage alone ---------------------------------------------------------------------------------


async def test_already_done_passes_a_new_notice_and_ends_a_posted_or_held_one(bot: Bot) -> None:
    assert await already_done(_delivery(bot, _notice())) is None
    assert await bot.store.notices.claim(KEY, PLACE)
    assert await already_done(_delivery(bot, _notice())) is None  # claimed, not posted: not done
    assert await bot.store.notices.mark_sent(KEY, PLACE, "171.5")
    assert await already_done(_delivery(bot, _notice())) == Delivered(Outcome.ALREADY_SENT, "171.5")
    assert await bot.store.notices.claim(KEY, "held")
    assert await bot.store.notices.mark_sent(KEY, "held", HELD_TS)
    assert await already_done(_delivery(bot, _notice(place="held"))) == Delivered(Outcome.HELD)


async def test_silence_holds_a_silenced_kind_once_and_audits_it_once(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    assert await silence(_delivery(a, _notice())) is None  # no silence: handed on, nothing written
    assert await a.store.notices.get(KEY, PLACE) is None
    await _silence(a)
    assert await silence(_delivery(a, _notice())) == Delivered(Outcome.HELD)
    assert await silence(_delivery(b, _notice())) == Delivered(Outcome.HELD)  # another replica, same notice
    assert await was_held(b.store.notices, KEY, PLACE)
    held = await _suppressed(a)
    assert len(held) == 1, held
    assert held[0].startswith("⚠️ kimi on gpu-a is unhealthy — /health answered 503 — not posted: silenced until ")
    assert "planned driver update" in held[0]


async def test_silence_never_holds_a_kind_that_may_not_be_silenced(bot: Bot) -> None:
    await _silence(bot)
    for reply in (FAILED, READY):
        assert await silence(_delivery(bot, _notice(reply, place=str(reply.data["kind"])))) is None
    assert await _suppressed(bot) == []


async def test_silence_holds_the_close_of_a_held_notice_even_after_the_silence_ended(bot: Bot) -> None:
    healthy = _reply("healthy", "kimi on gpu-a is healthy again")
    assert await silence(_delivery(bot, _notice(healthy, "healthy", closes_held=True))) == Delivered(Outcome.HELD)
    assert await was_held(bot.store.notices, KEY, "healthy")
    assert await _suppressed(bot) == []  # no silence to name: held quietly, as its ⚠️ was


async def test_someone_to_post(bot: Bot) -> None:
    assert await someone_to_post(_delivery(bot, _notice(), notifier=False)) == Delivered(Outcome.NOT_HERE)
    assert await someone_to_post(_delivery(bot, _notice())) is None


async def test_claim_is_once_and_takes_over_a_stale_claim(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    assert await claim(_delivery(a, _notice())) is None  # a holds it now
    assert await claim(_delivery(b, _notice())) == Delivered(Outcome.BUSY)
    later = datetime.now(UTC) + timedelta(seconds=CLAIM_STALE_S + 1)
    assert await claim(_delivery(b, _notice(), now=later)) is None  # a died mid-post: b takes over
    assert await claim(_delivery(a, _notice())) == Delivered(Outcome.BUSY)  # b's claim is fresh
    assert await b.store.notices.mark_sent(KEY, PLACE, "171.7")
    assert await claim(_delivery(a, _notice(), now=later)) == Delivered(Outcome.ALREADY_SENT, "171.7")


async def test_post_uses_the_notifier_and_notes_a_failure(bot: Bot) -> None:
    d = _delivery(bot, _notice())
    assert await post(d) is None and d.ts is not None and not d.failed
    assert bot.notifier.texts(NOTIFY) == ["⚠️ kimi on gpu-a is unhealthy — /health answered 503"]
    bot.notifier.fail_next = 1
    d = _delivery(bot, _notice())
    assert await post(d) is None and d.failed and d.ts is None
    assert len(bot.notifier.posts) == 1


async def test_post_builds_the_whole_message_only_when_it_posts(bot: Bot) -> None:
    built: list[str] = []

    async def details() -> Reply:
        built.append("probe")
        return UNHEALTHY.model_copy(update={"sections": [Section(kind="code", title="Last journal lines", text="x")]})

    notice = Notice(KEY, Where(PLACE, NOTIFY), UNHEALTHY, "kimi", "gpu-a", details=details)
    assert (await deliver(bot.ctx, bot.notifier, notice)).outcome is Outcome.SENT
    assert (await deliver(bot.ctx, bot.notifier, notice)).outcome is Outcome.ALREADY_SENT
    assert built == ["probe"]
    assert [s.title for s in bot.notifier.posts[0].reply.sections] == ["Last journal lines"]


async def test_settle_marks_sent_or_releases_for_a_retry(bot: Bot) -> None:
    assert await bot.store.notices.claim(KEY, PLACE)
    failed = _delivery(bot, _notice())
    failed.failed = True
    assert await settle(failed) == Delivered(Outcome.RETRY)
    assert await bot.store.notices.get(KEY, PLACE) is None  # free to claim again
    assert await bot.store.notices.claim(KEY, PLACE)
    ok = _delivery(bot, _notice())
    ok.ts = "171.8"
    assert await settle(ok) == Delivered(Outcome.SENT, "171.8")
    assert await bot.store.notices.sent(KEY, PLACE)


# -- the pipeline -------------------------------------------------------------------------------------


async def test_two_deliveries_at_once_post_once(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    outs = await asyncio.gather(*(deliver(x.ctx, x.notifier, _notice(FAILED)) for x in (a, b) * 4))
    assert len(a.notifier.posts) + len(b.notifier.posts) == 1
    assert [o.outcome for o in outs].count(Outcome.SENT) == 1
    assert {o.outcome for o in outs} <= {Outcome.SENT, Outcome.BUSY, Outcome.ALREADY_SENT}
    again = await deliver(b.ctx, b.notifier, _notice(FAILED))
    sent = next(o for o in outs if o.outcome is Outcome.SENT)
    assert again == Delivered(Outcome.ALREADY_SENT, sent.ts)


async def test_a_failed_post_releases_the_claim_and_the_next_try_posts(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    a.notifier.fail_next = 1
    assert await deliver(a.ctx, a.notifier, _notice(FAILED)) == Delivered(Outcome.RETRY)
    assert a.notifier.failures == 1 and a.notifier.posts == []
    out = await deliver(b.ctx, b.notifier, _notice(FAILED))  # the next poll, on another replica
    assert out.outcome is Outcome.SENT and out.ts == b.notifier.posts[0].ts
    assert (await deliver(a.ctx, a.notifier, _notice(FAILED))).outcome is Outcome.ALREADY_SENT
    assert a.notifier.texts() + b.notifier.texts() == ["⚠️ kimi on gpu-a failed — the unit is stopped"]


async def test_a_stale_claim_is_taken_over(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    assert await a.store.notices.claim(KEY, PLACE)  # a claimed, then died before posting
    assert await deliver(b.ctx, b.notifier, _notice(FAILED)) == Delivered(Outcome.BUSY)
    assert b.notifier.posts == []
    later = datetime.now(UTC) + timedelta(seconds=CLAIM_STALE_S + 1)
    assert (await deliver(b.ctx, b.notifier, _notice(FAILED), now=later)).outcome is Outcome.SENT
    assert len(b.notifier.posts) == 1


async def test_a_silenced_kind_is_held_and_audited_once(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    await _silence(a)
    for x in (a, b, a):
        assert await deliver(x.ctx, x.notifier, _notice()) == Delivered(Outcome.HELD)
    assert a.notifier.posts == [] and b.notifier.posts == []
    held = await _suppressed(a)
    assert len(held) == 1 and "is unhealthy" in held[0] and "silenced until" in held[0], held
    await a.store.silences.end("kimi", "gpu-a")
    assert await deliver(a.ctx, a.notifier, _notice()) == Delivered(Outcome.HELD)  # held stays held
    # ... and the next episode (another place) is news again.
    assert (await deliver(a.ctx, a.notifier, _notice(place="unhealthy:inv-1:later"))).outcome is Outcome.SENT


async def test_a_kind_that_may_not_be_silenced_is_never_held(bot: Bot) -> None:
    await _silence(bot)
    assert (await deliver(bot.ctx, bot.notifier, _notice(FAILED))).outcome is Outcome.SENT
    assert bot.notifier.texts(NOTIFY) == ["⚠️ kimi on gpu-a failed — the unit is stopped"]
    assert await _suppressed(bot) == []


async def test_a_notice_already_posted_is_not_held_by_a_later_silence(bot: Bot) -> None:
    first = await deliver(bot.ctx, bot.notifier, _notice())
    await _silence(bot)
    assert await deliver(bot.ctx, bot.notifier, _notice()) == Delivered(Outcome.ALREADY_SENT, first.ts)
    assert await _suppressed(bot) == []


async def test_without_a_notifier_nothing_is_claimed_and_a_bot_posts_it_later(bots: tuple[Bot, Bot]) -> None:
    terminal, serving = bots
    assert await deliver(terminal.ctx, None, _notice(READY, "thread")) == Delivered(Outcome.NOT_HERE)
    assert await terminal.store.notices.get(KEY, "thread") is None
    assert (await deliver(serving.ctx, serving.notifier, _notice(READY, "thread"))).outcome is Outcome.SENT
    assert (await deliver(terminal.ctx, None, _notice(READY, "thread"))).outcome is Outcome.ALREADY_SENT


async def test_deliver_all_goes_to_each_place_in_order(bot: Bot) -> None:
    places = [Where("thread", "C0OPS", "1700000000.000100"), *to_notify(bot.ctx, "notify")]
    outs = await deliver_all(bot.ctx, bot.notifier, [Notice(KEY, w, READY, "kimi", "gpu-a") for w in places])
    assert [o.outcome for o in outs] == [Outcome.SENT, Outcome.SENT]
    assert [(p.channel, p.thread_ts) for p in bot.notifier.posts] == [("C0OPS", "1700000000.000100"), (NOTIFY, None)]
    no_channel = Context(config=_config().model_copy(update={"notify": _config().notify.model_copy(
        update={"channel": None})}), cluster=bot.ctx.cluster, store=bot.store)
    assert to_notify(no_channel, "notify") == []
