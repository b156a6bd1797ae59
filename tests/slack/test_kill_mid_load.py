"""The bot process is SIGKILLed in the middle of a load and started again: exactly one ready notice per place.

Real processes: ``inferbot serve --http`` twice, against a fake Slack in this process and a simulated
node behind a real sshd; the restart is asked and confirmed through signed HTTP requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

from services.sim.scenarios import KIMI_UNIT, fast_profile, kimi_node, kimi_unit
from tests.conftest import MakeCluster, SimCluster
from tests.slack.conftest import SIGNING_SECRET, event_body, mention, sign
from tests.slack.fake_slack import FakeSlack
from tests.sshd import free_port
from tests.test_e2e_faults import _toml

ALICE = "U0ALICE"
OPS = "C0OPS"
NOTIFY = "C0NOTIFY"
ASKED_AT = "1700000500.000100"


def serve(cfg: Path, port: int, fake: FakeSlack, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-kill-test", "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "INFERBOT_SLACK_API_URL": fake.api_url, "INFERBOT_LOG_LEVEL": "INFO"}
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--http", "--host", "127.0.0.1", "--port", str(port),
         "--config", str(cfg)],
        env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,  # the child keeps writing to it
    )


async def until(pred: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def healthy(session: aiohttp.ClientSession, url: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            async with session.get(url + "/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the bot did not start serving")


def texts(fake: FakeSlack, channel: str, thread_ts: str | None = None) -> list[str]:
    out = []
    for c in fake.calls_to("chat.postMessage"):
        if c.body.get("channel") == channel and (thread_ts is None or c.body.get("thread_ts") == thread_ts):
            out.append(str(c.body.get("text", "")))
    return out


def _confirmation(fake: FakeSlack) -> dict[str, Any] | None:
    for c in fake.calls_to("chat.postMessage"):
        if "restart_confirm" in json.dumps(c.body.get("blocks", [])):
            return c.body
    return None


async def _ask_and_confirm_the_restart(session: aiohttp.ClientSession, url: str, fake: FakeSlack) -> None:
    """Alice asks for the restart in a signed event and clicks Confirm on the card the bot posted."""
    raw = json.dumps(event_body(mention("restart kimi", user=ALICE, channel=OPS, ts=ASKED_AT)))
    async with session.post(url + "/slack/events", data=raw,
                            headers={"Content-Type": "application/json", **sign(raw)}) as r:
        assert r.status == 200
    await until(lambda: _confirmation(fake) is not None, 30, "the confirmation")
    body = _confirmation(fake)
    assert body is not None
    rid = next(b for b in body["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    payload = {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": "T0TEAM"},
               "api_app_id": "A0APP", "channel": {"id": OPS},
               "container": {"type": "message", "message_ts": "1700000501.000100", "channel_id": OPS},
               "response_url": fake.response_url("click"), "trigger_id": "1.2.3",
               "actions": [{"action_id": "restart_confirm", "block_id": "b1", "type": "button",
                            "value": rid, "action_ts": "1700000502.000000"}]}
    form = urlencode({"payload": json.dumps(payload)})
    async with session.post(url + "/slack/events", data=form, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(form)}) as r:
        assert r.status == 200


async def test_bot_killed_mid_load_gives_exactly_one_ready_notice(make_cluster: MakeCluster, tmp_path: Path) -> None:
    scenario = kimi_node(fast=True, port=free_port())
    # About 5 s of weights: long enough to kill the bot in the middle of the load.
    scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, profile=fast_profile(seconds_per_shard=0.04))
    cluster: SimCluster = await make_cluster(
        {"gpu-a": scenario},
        access={"restart_users": [ALICE], "cooldown": 0},
        notify={"channel": NOTIFY},
        watch={"poll": "0.3s", "interval": "30s", "max_load": "120s"},
    )
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    pid_before = cluster.sims["gpu-a"].state(KIMI_UNIT).main_pid
    cfg = tmp_path / "inferbot.toml"
    cfg.write_text(_toml(cluster) + f'\n[access]\nrestart_users = ["{ALICE}"]\ncooldown = 0\n'
                   f'[notify]\nchannel = "{NOTIFY}"\n[watch]\npoll = "0.3s"\ninterval = "30s"\nmax_load = "120s"\n')
    fake = await FakeSlack().start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "bot.log"
    first = serve(cfg, port, fake, log)
    second: subprocess.Popen[bytes] | None = None
    try:
        async with aiohttp.ClientSession() as session:
            await healthy(session, url)
            await _ask_and_confirm_the_restart(session, url, fake)
            sim = cluster.sims["gpu-a"]
            await until(lambda: sim.state(KIMI_UNIT).main_pid not in (0, pid_before), 30, "the restart")
            await sim.wait_for(KIMI_UNIT, "loading", 30)
            assert not any("is ready" in t for t in texts(fake, NOTIFY))
            first.send_signal(signal.SIGKILL)  # no goodbye: jobs and claims stay as they were
            first.wait(10)
            second = serve(cfg, port, fake, log)
            await healthy(session, url)
            await until(lambda: any("is ready" in t for t in texts(fake, NOTIFY))
                        and any("is ready" in t for t in texts(fake, OPS, ASKED_AT)), 60, "the ready notices")
            await asyncio.sleep(1.5)  # a few more polls: nothing more may be posted
        thread_ready = [t for t in texts(fake, OPS, ASKED_AT) if "is ready" in t]
        channel_ready = [t for t in texts(fake, NOTIFY) if "is ready" in t]
        assert len(thread_ready) == 1 and len(channel_ready) == 1, (thread_ready, channel_ready)
        assert thread_ready[0].startswith("✅ kimi on gpu-a is ready — loaded in")
        assert cluster.sims["gpu-a"].state(KIMI_UNIT).n_restarts == 0
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        await fake.stop()
