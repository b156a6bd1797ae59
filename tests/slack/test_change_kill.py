"""The bot process is SIGKILLed in the middle of a settings change — once while the new settings load, once while
they are verified — and started again: the same change is finished exactly once (one restart, one kept notice
per place). Real processes: ``inferbot serve --http``, three in turn, against a fake Slack in this process and a
simulated node behind a real sshd; the change is asked and confirmed through signed HTTP requests.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from services.sim.scenarios import KIMI_UNIT, fast_profile, kimi_node, kimi_unit
from services.store.store import Store
from tests.conftest import MakeCluster, SimCluster
from tests.slack.conftest import event_body, mention, sign
from tests.slack.fake_slack import FakeSlack
from tests.slack.test_kill_mid_load import healthy, serve, texts, until
from tests.sshd import free_port
from tests.test_change_sim import proc_argv

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

ALICE, BOB = "U0ALICE", "U0BOB"
OPS, NOTIFY = "C0OPS", "C0NOTIFY"
ASKED_AT = "1700000700.000100"
KEPT = "✅ change #1 on kimi kept"


def toml(cluster: SimCluster) -> str:
    n = cluster.config.nodes[0]
    sim = cluster.sims["gpu-a"]
    return "\n".join([
        "[[nodes]]", f'name = "{n.name}"', f'host = "{n.host}"', f"port = {n.port}", f'user = "{n.user}"',
        f'key_file = "{n.key_file}"', f'known_hosts = "{n.known_hosts}"', "",
        "[[services]]", 'name = "kimi"', 'node = "gpu-a"', f'unit = "{KIMI_UNIT}"',
        "[services.changes]", "enabled = true", 'verify_window = "4s"',
        f'dropin = "{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf"', "",
        "[state]", f'dir = "{cluster.config.state.directory()}"',
        "[access]", f'restart_users = ["{ALICE}", "{BOB}"]', "cooldown = 0",
        "[notify]", f'channel = "{NOTIFY}"',
        "[watch]", 'poll = "0.3s"', 'interval = "30s"', 'max_load = "120s"', ""])


async def step_state(store: Store, change_id: str) -> str:
    ch = await store.changes.get(change_id)
    return ch.steps[0].state if ch is not None else "?"


async def until_state(store: Store, change_id: str, state: str, within: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while await step_state(store, change_id) != state:
        assert asyncio.get_running_loop().time() < deadline, f"never {state}: {await step_state(store, change_id)}"
        await asyncio.sleep(0.05)


def kill(p: subprocess.Popen[bytes]) -> None:
    p.send_signal(signal.SIGKILL)  # no goodbye: jobs, claims and the change's step stay as they were
    p.wait(10)


async def confirm(session: aiohttp.ClientSession, url: str, fake: FakeSlack) -> str:
    raw = json.dumps(event_body(mention("set max-num-seqs 256 on kimi", user=ALICE, channel=OPS, ts=ASKED_AT)))
    async with session.post(url + "/slack/events", data=raw,
                            headers={"Content-Type": "application/json", **sign(raw)}) as r:
        assert r.status == 200

    def preview() -> dict[str, Any] | None:
        return next((c.body for c in fake.calls_to("chat.postMessage")
                     if "restart_confirm" in json.dumps(c.body.get("blocks", []))), None)

    await until(lambda: preview() is not None, 30, "the preview")
    body = preview()
    assert body is not None
    rid = str(next(b for b in body["blocks"] if b["type"] == "actions")["elements"][0]["value"])
    payload = {"type": "block_actions", "user": {"id": BOB}, "team": {"id": "T0TEAM"}, "api_app_id": "A0APP",
               "channel": {"id": OPS}, "container": {"type": "message", "message_ts": "1700000701.000100",
                                                      "channel_id": OPS},
               "response_url": fake.response_url("click"), "trigger_id": "1.2.3",
               "actions": [{"action_id": "restart_confirm", "block_id": "b1", "type": "button", "value": rid,
                            "action_ts": "1700000702.000000"}]}
    form = urlencode({"payload": json.dumps(payload)})
    async with session.post(url + "/slack/events", data=form, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(form)}) as r:
        assert r.status == 200
    return rid


async def test_a_change_survives_two_kills_and_ends_once(make_cluster: MakeCluster, tmp_path: Path) -> None:
    scenario = kimi_node(fast=True, port=free_port())
    # About 5 s of weights: long enough to kill the bot while they load.
    scenario.units[0] = kimi_unit(fast=True, port=scenario.units[0].port, profile=fast_profile(seconds_per_shard=0.04))
    cluster = await make_cluster({"gpu-a": scenario})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    cfg = tmp_path / "inferbot.toml"
    cfg.write_text(toml(cluster))
    fake = await FakeSlack().start()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "bot.log"
    procs = [serve(cfg, port, fake, log)]
    store = Store(cluster.config.state.database_url())
    try:
        async with aiohttp.ClientSession() as session:
            await healthy(session, url)
            rid = await confirm(session, url, fake)
            await until_state(store, rid, "loading")
            await sim.wait_for(KIMI_UNIT, "loading", 30)
            kill(procs[-1])  # while the new settings load
            procs.append(serve(cfg, port, fake, log))
            await healthy(session, url)
            await until_state(store, rid, "verifying")
            kill(procs[-1])  # while they are verified
            procs.append(serve(cfg, port, fake, log))
            await healthy(session, url)
            await until(lambda: any(KEPT in t for t in texts(fake, NOTIFY))
                        and any(KEPT in t for t in texts(fake, OPS, ASKED_AT)), 90, "the kept notices")
            await asyncio.sleep(1.5)  # a few more ticks: nothing more may be posted
        assert sum(KEPT in t for t in texts(fake, NOTIFY)) == 1
        assert sum(KEPT in t for t in texts(fake, OPS, ASKED_AT)) == 1
        argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
        assert argv[argv.index("--max-num-seqs") + 1] == "256"
        assert sim.state(KIMI_UNIT).n_restarts == 0  # one restart, by the change: systemd restarted nothing
        audit = [e.event for e in await store.audit.recent("kimi", limit=200)]
        assert audit.count("change.applied") == 1 and audit.count("change.verified") == 1, audit
        req = await store.requests.get(rid)
        assert req is not None and req.state == "done"
    finally:
        await store.close()
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        await fake.stop()
