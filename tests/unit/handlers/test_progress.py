"""handlers/progress.py: one progress message per load (a notice), then edits paced across replicas (not notices).

On SQLite and a real PostgreSQL; two bot processes are two ``Store`` objects on one database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from config.models import BotConfig
from handlers.context import Context
from handlers.notify import RecordingNotifier
from handlers.progress import PROGRESS_MIN_INTERVAL_S, end_progress, show_progress
from services.cluster import Cluster
from services.models import Phase, ServiceState
from services.node.ssh import NodePool
from services.store.records import Follow
from services.store.store import Store

OPS, THREAD = "C0OPS", "1700000000.000100"
KEY = "kimi@gpu-a"
T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


@dataclass
class Bot:
    store: Store
    ctx: Context
    notifier: RecordingNotifier


@pytest.fixture
async def bots(url: str) -> AsyncIterator[tuple[Bot, Bot]]:
    config = BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": "127.0.0.2"}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service"}],
        "watch": {"enabled": False},
    })
    pool = NodePool()
    made = [Bot(s, Context(config=config, cluster=Cluster(config, pool), store=s), RecordingNotifier())
            for s in (Store(url), Store(url))]
    try:
        yield made[0], made[1]
    finally:
        for b in made:
            await b.store.close()
        await pool.close()


async def _follow(b: Bot) -> Follow:
    return await b.store.follows.upsert(KEY, "kimi", "gpu-a", "vllm-kimi.service", "inv-1", T0, "restart",
                                        thread_channel=OPS, thread_ts=THREAD)


def _state(phase: Phase = "loading_weights") -> ServiceState:
    return ServiceState(service="kimi", node="gpu-a", unit="vllm-kimi.service", state="loading", phase=phase)


async def test_the_progress_message_is_posted_once_in_the_thread(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    f = await _follow(a)
    now = T0 + timedelta(minutes=1)
    shown = await show_progress(a.ctx, f, _state(), a.notifier, now)
    assert [(p.channel, p.thread_ts) for p in a.notifier.posts] == [(OPS, THREAD)]
    ts = a.notifier.posts[0].ts
    assert a.notifier.texts()[0].startswith("kimi on gpu-a: ")
    assert shown.progress_message_ts == ts
    stored = await b.store.follows.get(KEY)
    assert stored is not None and stored.progress_message_ts == ts
    # Another replica that read the follow before the message existed finds it, and posts nothing.
    other = await show_progress(b.ctx, f, _state(), b.notifier, now)
    assert other.progress_message_ts == ts and b.notifier.posts == []


async def test_edits_are_paced_across_replicas_and_a_failed_edit_is_made_again(bots: tuple[Bot, Bot]) -> None:
    a, b = bots
    f = await show_progress(a.ctx, await _follow(a), _state(), a.notifier, T0)
    ts = f.progress_message_ts
    assert ts is not None
    soon = T0 + timedelta(seconds=PROGRESS_MIN_INTERVAL_S / 2)
    await show_progress(b.ctx, f, _state(), b.notifier, soon)  # same phase, too soon: no edit
    assert b.notifier.posts == []
    await show_progress(b.ctx, f, _state("compiling"), b.notifier, soon)  # a new phase is worth an edit
    assert [p.ts for p in b.notifier.posts] == [ts] and len(b.notifier.posts[0].updates) == 1
    later = soon + timedelta(seconds=PROGRESS_MIN_INTERVAL_S + 1)
    b.notifier.posts.clear()
    a.notifier.update = _failing_update  # type: ignore[method-assign]
    await show_progress(a.ctx, f, _state("compiling"), a.notifier, later)  # Slack refused the edit ...
    await show_progress(b.ctx, f, _state("compiling"), b.notifier, later)  # ... so the next poll edits
    assert [p.ts for p in b.notifier.posts] == [ts]


async def _failing_update(channel: str, ts: str, reply: object) -> None:
    raise ConnectionError("simulated outage")


async def test_the_last_edit_points_to_the_notice_without_its_words(bots: tuple[Bot, Bot]) -> None:
    a, _ = bots
    f = await show_progress(a.ctx, await _follow(a), _state(), a.notifier, T0)
    await end_progress(a.ctx, f, "ready", a.notifier, T0 + timedelta(minutes=29, seconds=14))
    text = a.notifier.posts[0].text
    assert text == "kimi on gpu-a: load finished after 29m 14s — see the notice"
    assert "✅" not in text and "is ready" not in text
