"""The App Home dashboard below Slack: the watcher's change hook (the store's open views and pacing:
tests/unit/services/store/test_home_views.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from handlers.home import read_dashboard
from handlers.notify import RecordingNotifier
from handlers.watcher import watch_node
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_restart import bot, kimi_cluster

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


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
