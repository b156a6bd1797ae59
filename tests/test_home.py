"""The App Home dashboard below Slack: the store's open views and pacing, and the watcher's change hook."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from handlers.home import read_dashboard
from handlers.notify import RecordingNotifier
from handlers.watcher import watch_node
from services.sim.scenarios import KIMI_UNIT
from services.store.store import Store
from tests.conftest import MakeCluster
from tests.test_restart import bot, kimi_cluster

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_open_views_and_pacing_are_shared_by_replicas(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    a, b = Store(url), Store(url)
    try:
        long_ago = T0 - timedelta(hours=12)
        assert await a.home_views.due(T0, 30, long_ago) == []
        await a.home_views.opened("U1", T0)
        await a.home_views.opened("U2", T0 - timedelta(days=2))  # opened long ago: not "open" any more
        assert await b.home_views.due(T0, 30, long_ago) == ["U1"]  # stale (never published), seen by the other
        # Two replicas claim the same publish at the same moment: exactly one wins.
        wins = await asyncio.gather(a.home_views.claim_publish("U1", T0, 30), b.home_views.claim_publish("U1", T0, 30))
        assert sorted(wins) == [False, True]
        assert await a.home_views.due(T0, 30, long_ago) == []  # published, not stale
        assert await a.home_views.mark_dirty(long_ago) == 1  # only U1 counts as open
        assert await a.home_views.due(T0 + timedelta(seconds=10), 30, long_ago) == []  # stale but paced
        assert not await b.home_views.claim_publish("U1", T0 + timedelta(seconds=10), 30)
        assert await b.home_views.claim_publish("U1", T0 + timedelta(seconds=10), 30, force=True)  # Refresh
        assert await a.home_views.due(T0 + timedelta(seconds=41), 30, long_ago) == []  # not stale any more
        await a.home_views.mark_dirty(long_ago)
        assert await a.home_views.due(T0 + timedelta(seconds=41), 30, long_ago) == ["U1"]
        await a.home_views.publish_failed("U1")
        assert await a.home_views.due(T0 + timedelta(seconds=11), 30, long_ago) == ["U1"]  # failed: due again
    finally:
        await a.close()
        await b.close()


class RecordingDashboards:
    def __init__(self) -> None:
        self.changes: list[str] = []

    async def changed(self, what: str) -> None:
        self.changes.append(what)


async def test_watcher_tells_the_dashboards_about_a_restart_by_hand(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config) as b:
        dashboards = RecordingDashboards()
        rt = b.rt.with_ports(notifier=b.rt.notifier, groups=b.rt.groups, dashboards=dashboards)
        ctx = rt.context()
        ctx.jobs = None  # no follow job: only the watcher speaks here
        assert ctx.dashboards is dashboards
        notifier = RecordingNotifier()
        await watch_node(ctx, "gpu-a", notifier)  # the baseline
        await watch_node(ctx, "gpu-a", notifier)  # nothing changed
        assert dashboards.changes == []
        await sim.restart_unit(KIMI_UNIT)  # someone ran systemctl restart over SSH
        for _ in range(100):
            await watch_node(ctx, "gpu-a", notifier)
            if dashboards.changes:
                break
            await asyncio.sleep(0.1)
        assert dashboards.changes and set(dashboards.changes) == {"kimi@gpu-a"}
        # The dashboard read now shows the load (trouble before ready in a real fleet).
        dash = await read_dashboard(ctx)
        [card] = dash.services
        assert card.state in ("starting", "loading", "ready") and card.service == "kimi"
        assert card.last_restart is not None and not card.last_restart.planned  # the audit's restart.unplanned
