"""Following loads: failures, timeouts, a bot killed mid-load, a Slack outage, restarts made by hand.

Same harness as ``test_restart.py``: the simulated node behind a real sshd, the real store and scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from config.models import Service
from handlers.context import Context
from handlers.notify import Posted, RecordingNotifier
from handlers.reply import Reply
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_restart import (
    NOTIFY,
    OPS,
    THREAD,
    access,
    bot,
    kimi,
    kimi_cluster,
    notices,
    ready_in_both,
    request,
    set_profile,
    until,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_load_that_fails_posts_one_failure_notice(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, scenario=kimi(restart="no"), access_=access(cooldown="0s"))
    set_profile(cluster.sims["gpu-a"], fail_at="oom", fail_shard=20)
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notices(b, "failed", NOTIFY)) and bool(notices(b, "failed", OPS, THREAD)), 45,
                    "the failure notices")
        await asyncio.sleep(0.5)
        for where in ((OPS, THREAD), (NOTIFY, None)):
            texts = notices(b, "failed", *where)
            assert len(texts) == 1 and texts[0].startswith("❌ kimi on gpu-a failed — "), texts
        post = next(p for p in b.notifier.posts if p.channel == NOTIFY and "failed" in p.text)
        assert any(s.title == "Last journal lines" and s.text for s in post.reply.sections)
        assert any(s.title == "What to try" for s in post.reply.sections)
        for s in post.reply.sections:
            assert "hf_" not in (s.text or "") and "sk-kimi" not in (s.text or "")
        req = await b.rt.store.requests.get(rid)  # type: ignore[union-attr]
        assert req is not None and req.state == "failed"


async def test_load_that_times_out(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"), watch={"max_load": "1s"})
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.05)  # ~6 s of weights: longer than max_load
    async with bot(cluster.config) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notices(b, "failed", NOTIFY)), 30, "the timeout notice")
        text = notices(b, "failed", NOTIFY)[0]
        assert text.startswith("❌ kimi on gpu-a failed — timed out") and "1s" in text
        load = await b.rt.store.loads.last("kimi", "gpu-a")  # type: ignore[union-attr]
        assert load is not None and load.outcome == "timeout"


async def test_bot_killed_mid_load_and_started_again_one_ready_notice(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.05)  # ~6 s of weights: time to see it mid-load
    notifier = RecordingNotifier()  # stands for the Slack channel both processes post to
    async with bot(cluster.config, notifier=notifier) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: bool(progress_posts(notifier)), 45, "progress")
    # The first process is gone mid-load (its jobs stay in the database).
    assert not notices_in(notifier, "is ready")
    async with bot(cluster.config, notifier=notifier) as second:
        assert "follow:kimi@gpu-a" in second.scheduler.job_ids()
        await until(lambda: len(notices_in(notifier, "is ready")) >= 2, 45, "ready after the restart")
        await asyncio.sleep(0.5)
    async with bot(cluster.config, notifier=notifier):  # a third start finds nothing left to say
        await asyncio.sleep(0.5)
    assert len([t for t in notifier.texts(OPS, THREAD) if "is ready" in t]) == 1
    assert len([t for t in notifier.texts(NOTIFY) if "is ready" in t]) == 1
    assert len(progress_posts(notifier)) == 1


def notices_in(n: RecordingNotifier, word: str) -> list[str]:
    return [t for t in n.texts() if word in t]


async def test_notice_outage_is_retried_and_still_exactly_once(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    flaky = FlakyNotifier(fail_word="is ready", failures=3)
    async with bot(cluster.config, notifier=flaky) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(ready_in_both(b), 45, "ready after the outage")
        await asyncio.sleep(0.5)
        assert flaky.failures == 3
        assert len(notices(b, "is ready", OPS, THREAD)) == 1
        assert len(notices(b, "is ready", NOTIFY)) == 1


class FlakyNotifier(RecordingNotifier):
    """Fails the first ``failures`` posts whose text contains ``fail_word`` (an outage at the worst moment)."""

    def __init__(self, fail_word: str, failures: int) -> None:
        super().__init__()
        self.fail_word, self.left = fail_word, failures

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        if self.left > 0 and self.fail_word in str(reply.data.get("notice", reply.title)):
            self.left -= 1
            self.failures += 1
            raise ConnectionError("Slack is down")
        return await super().post(channel, thread_ts, reply)


async def test_restart_by_hand_is_noticed_and_followed(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config, watch=True) as b:
        # The watcher's first look only sets the baseline.
        deadline = time.monotonic() + 5
        while await b.rt.store.watches.get("kimi", "gpu-a") is None:  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert b.notifier.posts == []
        await sim.restart_unit(KIMI_UNIT)  # someone ran systemctl restart over SSH
        await until(lambda: bool(notices(b, "restarted (not by inferbot)", NOTIFY)), 30, "the ⚠️ notice")
        warn = notices(b, "restarted (not by inferbot)", NOTIFY)
        assert len(warn) == 1 and warn[0].startswith("⚠️ kimi on gpu-a restarted (not by inferbot) at ")
        await until(lambda: bool(notices(b, "is ready", NOTIFY)), 45, "the ready notice")
        await asyncio.sleep(0.8)  # more watch rounds: the same restart is not reported again
        assert len(notices(b, "restarted (not by inferbot)", NOTIFY)) == 1
        assert len(notices(b, "is ready", NOTIFY)) == 1
        assert b.restarts_run() == []


@dataclass
class AwaitingStart:
    """A ready Kimi node and its follow recorded just before a restart command (``before:<the running
    start>``, not scheduled): what a confirming replica leaves on record before it runs the command."""

    sim: SimNode
    ctx: Context
    service: Service
    started: datetime
    old: str
    notifier: RecordingNotifier


@contextlib.asynccontextmanager
async def awaiting_start(make_cluster: MakeCluster) -> AsyncIterator[AwaitingStart]:
    from bot.app import runtime
    from handlers.context import Asker
    from handlers.follow import BEFORE, start_follow

    cluster = await kimi_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    old = sim.state(KIMI_UNIT).invocation_id
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="slack", user_id="U0ALICE", channel_id=OPS))
        service = cluster.config.services[0]
        started = ctx.now()
        await start_follow(ctx, service, "restart", started, invocation_id=BEFORE + old, thread_channel=OPS,
                           thread_ts=THREAD, schedule=False)
        yield AwaitingStart(sim, ctx, service, started, old, RecordingNotifier())


def progress_posts(n: RecordingNotifier) -> list[Posted]:
    """The progress messages posted (not their edits)."""
    return [p for p in n.posts if p.reply.data.get("kind") == "progress"]


async def test_follow_recorded_before_a_restart_that_never_ran(make_cluster: MakeCluster) -> None:
    """A bot that died between recording the follow and running the command: the old run is not news."""
    from handlers.follow import RESTART_TAKES_EFFECT_S, poll_follow

    async with awaiting_start(make_cluster) as w:
        status = await poll_follow(w.ctx, "kimi@gpu-a", w.notifier)
        assert not status.finished and not notices_in(w.notifier, "is ready")  # the old run is still up
        w.ctx.now = lambda: w.started + timedelta(seconds=RESTART_TAKES_EFFECT_S + 5)
        status = await poll_follow(w.ctx, "kimi@gpu-a", w.notifier)
    assert status.finished
    failed = [t for t in w.notifier.texts(OPS, THREAD) if "failed" in t]
    assert len(failed) == 1 and "the restart did not take effect" in failed[0]
    assert not notices_in(w.notifier, "is ready")


async def test_the_restart_result_naming_the_new_start_keeps_the_one_progress_message(
        make_cluster: MakeCluster) -> None:
    """The follow is on record before the command runs, so a leader may poll (and post the progress message)
    while another replica still runs the restart; the command's result then names the new start. One load,
    one progress message: the next poll edits it instead of posting a second one."""
    from handlers.follow import poll_follow, start_follow

    async with awaiting_start(make_cluster) as w:
        await poll_follow(w.ctx, "kimi@gpu-a", w.notifier)  # the leader, while the command runs elsewhere
        assert len(progress_posts(w.notifier)) == 1
        await w.sim.restart_unit(KIMI_UNIT)
        new = w.sim.state(KIMI_UNIT).invocation_id
        assert new and new != w.old
        # What the confirming replica records once the command returned: the new start, no message known.
        await start_follow(w.ctx, w.service, "restart", w.started, invocation_id=new, thread_channel=OPS,
                           thread_ts=THREAD, schedule=False)
        for _ in range(3):
            status = await poll_follow(w.ctx, "kimi@gpu-a", w.notifier)
            assert not status.finished
    progress = progress_posts(w.notifier)
    assert len(progress) == 1, [p.text for p in progress]


class SlowNotifier(RecordingNotifier):
    """Slack takes its time with the ready notice: ``posting`` is set while such a post is in flight."""

    def __init__(self, slow_word: str, delay_s: float) -> None:
        super().__init__()
        self.slow_word, self.delay_s = slow_word, delay_s
        self.posting = asyncio.Event()

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        if self.slow_word in str(reply.data.get("notice", reply.title)):
            self.posting.set()
            await asyncio.sleep(self.delay_s)
        return await super().post(channel, thread_ts, reply)


async def test_bot_stopped_while_posting_a_notice_finishes_it_once(make_cluster: MakeCluster) -> None:
    """A graceful stop (a rolling upgrade) lets the post in flight finish: the notice is out at once, not held
    for minutes by a claim the stopped process never recorded as sent, and the next process adds nothing."""
    cluster = await kimi_cluster(make_cluster)
    slow = SlowNotifier(slow_word="is ready", delay_s=1.5)
    async with bot(cluster.config, notifier=slow) as first:
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await asyncio.wait_for(slow.posting.wait(), 45)
    # Stopped while Slack was still taking the first ready notice.
    assert len(notices_in(slow, "is ready")) >= 1
    async with bot(cluster.config, notifier=slow):
        await until(ready_in_both_places(slow), 10, "both ready notices")
        await asyncio.sleep(0.5)
    assert len([t for t in slow.texts(OPS, THREAD) if "is ready" in t]) == 1
    assert len([t for t in slow.texts(NOTIFY) if "is ready" in t]) == 1


def ready_in_both_places(n: RecordingNotifier) -> Callable[[], bool]:
    return lambda: bool([t for t in n.texts(OPS, THREAD) if "is ready" in t]) and \
        bool([t for t in n.texts(NOTIFY) if "is ready" in t])
