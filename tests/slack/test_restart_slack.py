"""The restart flow through the real Bolt app and a fake Slack, on the simulated node behind real sshd.

Mention → a visible confirmation with two buttons → a signed click → the message rewritten → exactly one
✅ notice in the thread and one in the notify channel, even when Slack fails the final notice.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
from aiohttp import web
from conftest import SIGNING_SECRET, event_body, mention, sign
from fake_slack import FakeSlack
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import Runtime, runtime
from bot.scheduler import BotScheduler
from bot.slack.app import build_app, state_of
from bot.slack.client import retry_handlers
from bot.slack.groups import SlackGroups
from bot.slack.runtime import slack_runtime
from bot.slack.serve import start_http
from config.models import SlackSettings
from handlers.follow import reset_pacing
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

ALICE, BOB, EVE, CAROL = "U0ALICE", "U0BOB", "U0EVE", "U0CAROL"
OPS, NOTIFY = "C0OPS", "C0NOTIFY"
SRE = "S0SRE"
ASKED_AT = "1700000050.000100"


class OutageSlack(FakeSlack):
    """The fake Slack, answering 500 to the first ``failures`` posts whose text contains ``word``."""

    def __init__(self, word: str = "", failures: int = 0) -> None:
        super().__init__()
        self.word, self.left, self.failed = word, failures, 0
        self.delivered: list[dict[str, Any]] = []  # chat.postMessage bodies that Slack accepted

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if method == "chat.postMessage":
            body = await self._body(request)
            if self.left > 0 and self.word and self.word in str(body.get("text", "")):
                self.left -= 1
                self.failed += 1
                await self._record(method, body, request)
                return web.json_response({"ok": False, "error": "internal_error"}, status=500)
            self.delivered.append(body)
        return await super()._api(request)

    def texts(self, channel: str, thread_ts: str | None = None) -> list[str]:
        return [str(b.get("text", "")) for b in self.delivered
                if b.get("channel") == channel and (thread_ts is None or b.get("thread_ts") == thread_ts)]


async def until(pred: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class SlackBotUnderTest:
    def __init__(self, fs: OutageSlack, rt: Runtime, client: AsyncWebClient, url: str, session: Any,
                 scheduler: BotScheduler) -> None:
        self.fs, self.rt, self.client, self.url, self.session, self.scheduler = fs, rt, client, url, session, scheduler

    async def mention(self, text: str, user: str = ALICE, ts: str = ASKED_AT) -> None:
        raw = json.dumps(event_body(mention(text, user=user, channel=OPS, ts=ts)))
        async with self.session.post(self.url + "/slack/events", data=raw,
                                     headers={"Content-Type": "application/json", **sign(raw)}) as r:
            assert r.status == 200

    async def click(self, action_id: str, value: str, user: str, message_ts: str) -> None:
        payload = {"type": "block_actions", "user": {"id": user}, "team": {"id": "T0TEAM"}, "api_app_id": "A0APP",
                   "channel": {"id": OPS}, "container": {"type": "message", "message_ts": message_ts,
                                                          "channel_id": OPS, "thread_ts": ASKED_AT},
                   "response_url": self.fs.response_url("click"), "trigger_id": "1.2.3",
                   "actions": [{"action_id": action_id, "block_id": "b1", "type": "button", "value": value,
                                "action_ts": "1700000100.000000"}]}
        raw = urlencode({"payload": json.dumps(payload)})
        async with self.session.post(self.url + "/slack/events", data=raw, headers={
                "Content-Type": "application/x-www-form-urlencoded", **sign(raw)}) as r:
            assert r.status == 200


async def cluster_for_slack(make_cluster: MakeCluster) -> SimCluster:
    cluster = await make_cluster(
        {"gpu-a": kimi_node(fast=True, port=free_port())},
        access={"restart_users": [ALICE, BOB], "restart_usergroups": [SRE], "restart_channels": [OPS]},
        notify={"channel": NOTIFY},
        watch={"poll": "0.2s", "interval": "60s", "max_load": "60s"},
    )
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


class SlackBots:
    """Serving bots started for a test (the Bolt app over HTTP, the frozen Slack runtime, the scheduler without
    watchers) against a fake Slack, all stopped by :meth:`close`."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    async def start(self, fs: OutageSlack, cluster: SimCluster) -> SlackBotUnderTest:
        """A bot on ``cluster``'s config, posting to ``fs``."""
        import aiohttp

        made = self.made
        await fs.start()
        client = AsyncWebClient(token="xoxb-test-token", base_url=fs.api_url, retry_handlers=retry_handlers())
        cm = runtime(cluster.config)
        core = await cm.__aenter__()
        scheduler = BotScheduler()
        rt = slack_runtime(core, client, jobs=scheduler)
        app = build_app(rt, SlackSettings(), signing_secret=SIGNING_SECRET)
        await scheduler.start(rt, watch=False)
        runner = await start_http(app, "127.0.0.1", 0)
        host, port = runner.addresses[0][:2]
        session = aiohttp.ClientSession()
        made.append((fs, cm, app, scheduler, runner, session, client))
        return SlackBotUnderTest(fs, rt, client, f"http://{host}:{port}", session, scheduler)

    async def close(self) -> None:
        """Stop every bot started, in the order they were started."""
        made = self.made
        for fs, cm, app, scheduler, runner, session, client in made:
            await state_of(app).drain(5)
            await scheduler.shutdown()
            await session.close()
            await runner.cleanup()
            if client.session is not None:
                await client.session.close()
            await cm.__aexit__(None, None, None)
            await fs.stop()


@pytest.fixture
async def slack_bot(make_cluster: MakeCluster) -> AsyncIterator[Any]:
    bots = SlackBots()

    async def start(fs: OutageSlack) -> SlackBotUnderTest:
        reset_pacing()
        return await bots.start(fs, await cluster_for_slack(make_cluster))

    yield start
    await bots.close()


async def confirmation(b: SlackBotUnderTest) -> tuple[str, str]:
    """The request id and message ts of the confirmation the bot posted."""
    await until(lambda: any(c.get("blocks") and "restart_confirm" in json.dumps(c["blocks"])
                            for c in b.fs.delivered), 10, "the confirmation")
    body = next(c for c in b.fs.delivered if "restart_confirm" in json.dumps(c.get("blocks", [])))
    assert body["channel"] == OPS and body["thread_ts"] == ASKED_AT  # visible, in the thread
    actions = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == ["restart_confirm", "restart_cancel"]
    rid = actions[0]["value"]
    assert b.rt.store is not None
    # Fake Slack has the message before the bot has its ts back (and stored it): wait for the store, as a
    # person's click does (and a click that still beats it carries the ts: bot/slack/restart_actions.py records it).
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        req = await b.rt.store.requests.get(rid)
        if (req is not None and req.message_ts) or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.02)
    assert req is not None and req.message_ts and req.message_channel == OPS
    return rid, req.message_ts


async def test_slack_restart_confirmed_ready_once_despite_outage(slack_bot: Any) -> None:
    fs = OutageSlack(word="is ready", failures=4)  # more than slack_sdk's own retries of one call
    b = await slack_bot(fs)
    await b.mention("restart kimi")
    rid, ts = await confirmation(b)
    assert not fs.calls_to("chat.postEphemeral")
    # Someone not allowed clicks: told so, privately; nothing changes.
    await b.click("restart_confirm", rid, EVE, ts)
    await fs.wait_for("chat.postEphemeral", 1)
    assert "not allowed" in fs.calls_to("chat.postEphemeral")[0].body["text"]
    assert not fs.calls_to("chat.update")
    # Two allowed people click at once (and Slack redelivers one of the clicks).
    await asyncio.gather(b.click("restart_confirm", rid, BOB, ts), b.click("restart_confirm", rid, ALICE, ts),
                         b.click("restart_confirm", rid, BOB, ts))
    await until(lambda: any("Restart confirmed by" in json.dumps(c.body) for c in fs.calls_to("chat.update")), 30,
                "the rewrite")
    rewrite = next(c for c in fs.calls_to("chat.update") if "Restart confirmed by" in json.dumps(c.body))
    assert rewrite.body["ts"] == ts and "<@U0" in json.dumps(rewrite.body["blocks"])  # a real mention
    await until(lambda: len(fs.texts(OPS, ASKED_AT)) >= 1 and any("is ready" in t for t in fs.texts(NOTIFY)),
                45, "the ready notices")
    await asyncio.sleep(0.6)
    thread_ready = [t for t in fs.texts(OPS, ASKED_AT) if "is ready" in t]
    channel_ready = [t for t in fs.texts(NOTIFY) if "is ready" in t]
    assert len(thread_ready) == 1 and len(channel_ready) == 1, (thread_ready, channel_ready)
    assert thread_ready[0].startswith("✅ kimi on gpu-a is ready — loaded in")
    assert fs.failed == 4
    refusals = [c.body["text"] for c in fs.calls_to("chat.postEphemeral")]
    assert any("refused: already confirmed by" in t for t in refusals), refusals
    assert b.rt.store is not None
    executed = [e for e in await b.rt.store.audit.recent("kimi") if e.event == "restart.executed"]
    assert len(executed) == 1


async def test_slack_group_lookup_is_cached(fake_slack: FakeSlack, web_client: AsyncWebClient) -> None:
    fake_slack.fail_once("usergroups.users.list", status=200, body={"ok": True, "users": [CAROL]})
    groups = SlackGroups(web_client)
    assert await groups.members(SRE) == frozenset({CAROL})
    assert await groups.members(SRE) == frozenset({CAROL})
    assert len(fake_slack.calls_to("usergroups.users.list")) == 1
