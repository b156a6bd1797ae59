"""Health notices and silences through the real Bolt app and the fake Slack, on the simulated node (issue 14).

The watcher's looks are driven by the test (the job function itself, with the app's Slack notifier), so
every look is deterministic; the fake vLLM is changed while it runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import HttpApp, all_text
from test_restart_slack import (
    ALICE,
    ASKED_AT,
    NOTIFY,
    OPS,
    OutageSlack,
    SlackBots,
    SlackBotUnderTest,
    cluster_for_slack,
    until,
)
from test_slack_home import home_opened, published

from handlers.context import Asker
from handlers.follow import reset_pacing
from handlers.health_watch import watch
from services.sim.scenarios import KIMI_UNIT

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def health_now(b: Any, status: int) -> None:
    """Wait until kimi's fake vLLM itself answers ``/health`` with ``status``: ``set_live`` takes effect at the
    server's next tick, and a look made before that reads the old health (seen in full runs, where the looks
    came faster than the tick)."""
    url = b.node.api_url(KIMI_UNIT) + "/health"

    async def answers() -> bool:
        async with b.session.get(url) as r:
            return r.status == status

    for _ in range(200):
        if await answers():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{url} never answered {status}")


async def looks(b: Any, n: int) -> None:
    """``n`` looks of the watcher, as its job makes them (posting through the app's Slack notifier)."""
    ctx = b.rt.context(Asker(surface="json"))
    for _ in range(n):
        await watch(ctx, "gpu-a", b.rt.notifier)
        await asyncio.sleep(0.1)


@pytest.fixture
async def health_bot(make_cluster: Any) -> AsyncIterator[Any]:
    """The Bolt app over HTTP against a fake Slack, on the Kimi node behind real sshd (no scheduled watcher)."""
    bots = SlackBots()

    async def start(fs: OutageSlack) -> SlackBotUnderTest:
        reset_pacing()
        cluster = await cluster_for_slack(make_cluster)
        b = await bots.start(fs, cluster)
        b.node = cluster.sims["gpu-a"]  # type: ignore[attr-defined]
        return b

    yield start
    await bots.close()


async def test_unhealthy_once_through_a_slack_outage_then_healthy_once(health_bot: Any) -> None:
    fs = OutageSlack(word="is unhealthy", failures=4)  # more than slack_sdk's own retries of one call
    b = await health_bot(fs)
    await looks(b, 1)  # the baseline: kimi is ready in this start
    node = b.node
    node.set_live(KIMI_UNIT, health_status=503)
    await health_now(b, 503)
    for _ in range(8):
        await looks(b, 1)
        if fs.texts(NOTIFY):
            break
    await looks(b, 3)
    warn = [t for t in fs.texts(NOTIFY) if "is unhealthy" in t]
    assert len(warn) == 1 and warn[0].startswith("⚠️ kimi on gpu-a is unhealthy — /health answered 503"), warn
    assert fs.failed == 4
    body = next(c for c in fs.delivered if "is unhealthy" in str(c.get("text")))
    blocks = all_text(body["blocks"])
    assert "Last journal lines" in blocks and "hf_" not in blocks and "sk-kimi" not in blocks
    node.set_live(KIMI_UNIT, health_status=None)
    await health_now(b, 200)
    await looks(b, 3)
    ok = [t for t in fs.texts(NOTIFY) if "is healthy again" in t]
    assert len(ok) == 1 and ok[0].startswith("✅ kimi on gpu-a is healthy again"), ok


async def test_silence_from_slack_holds_back_notices_and_shows_on_home(health_bot: Any) -> None:
    fs = OutageSlack()
    b = await health_bot(fs)
    await looks(b, 1)
    await b.mention("silence kimi 2h planned <!channel> NCCL upgrade")
    await until(lambda: any("silenced until" in t for t in fs.texts(OPS, ASKED_AT)), 20, "the silence reply")
    said = next(t for t in fs.texts(OPS, ASKED_AT) if "silenced until" in t)
    assert said.startswith("✅ kimi on gpu-a silenced until ") and "planned NCCL upgrade" in said
    assert "<!channel>" not in json.dumps(fs.delivered)  # the reason is repeated without its markup
    # The App Home tab shows it.
    http = HttpApp(b.url, b.session)
    await http.post_event(home_opened(ALICE))
    await until(lambda: bool(published(fs, ALICE)), 30, "the Home view")
    assert "silenced until" in all_text(published(fs, ALICE)[-1]["blocks"])
    # Unhealthy while silenced: nothing posted, the audit line names the silence.
    node = b.node
    node.set_live(KIMI_UNIT, health_status=503)
    await health_now(b, 503)
    await looks(b, 4)
    assert fs.texts(NOTIFY) == []
    entries = await b.rt.store.audit.recent("kimi", limit=50)
    held = [e.detail for e in entries if e.event == "notice.suppressed"]
    assert any("is unhealthy" in d and "silenced until" in d and "planned NCCL upgrade" in d for d in held), held
    assert any(e.event == "silence.set" and e.who == ALICE for e in entries)
    await b.mention("unsilence kimi", ts="1700000060.000100")
    await until(lambda: any("silence ended" in t for t in fs.texts(OPS, "1700000060.000100")), 20, "the reply")
    # The silence is over and the server is still unhealthy: now it is said, once; then its recovery, once.
    await looks(b, 3)
    warn = [t for t in fs.texts(NOTIFY) if "is unhealthy" in t]
    assert len(warn) == 1, fs.texts(NOTIFY)
    node.set_live(KIMI_UNIT, health_status=None)
    await health_now(b, 200)
    await looks(b, 2)
    assert len([t for t in fs.texts(NOTIFY) if "is healthy again" in t]) == 1, fs.texts(NOTIFY)


async def test_slack_confirmation_shows_what_the_restart_applies(health_bot: Any) -> None:
    fs = OutageSlack()
    b = await health_bot(fs)
    node = b.node
    unit_file = next((node.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    node.edit_unit(KIMI_UNIT, unit_file.read_text().replace("--max-model-len 131072", "--max-model-len 65536"))
    await b.mention("restart kimi")
    await until(lambda: any("restart_confirm" in json.dumps(c.get("blocks", [])) for c in fs.delivered), 20,
                "the confirmation")
    body = next(c for c in fs.delivered if "restart_confirm" in json.dumps(c.get("blocks", [])))
    text = all_text(body["blocks"])
    assert "this restart applies" in text and "--max-model-len 131072 → 65536" in text
    assert "changed without daemon-reload" in text and "sudo -n systemctl daemon-reload" in text
