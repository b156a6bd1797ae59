"""A settings change through the real Bolt app and a fake Slack, on the simulated node behind a real sshd (issue 25).

A mention → the preview in the thread (the difference, each preflight step, the command line and the drop-in,
redacted) with the restart's two buttons → a signed click → the message rewritten → the load's notices and the
change's own: kept, or failed and rolled back, each once in the thread and once in the notify channel. A value
typed with Slack's markup characters (``*``, ``_``, ``:x:``, ``&``, ``<``) reaches the process byte for byte.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_restart_slack import (
    ALICE,
    ASKED_AT,
    BOB,
    EVE,
    NOTIFY,
    OPS,
    OutageSlack,
    SlackBots,
    SlackBotUnderTest,
    confirmation,
)
from test_restart_slack import until as until_

from config.models import BotConfig
from handlers.follow import reset_pacing
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_change_sim import proc_argv

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

TEMPLATE = "a *b* _c_ :x: & <d> ~e~ `f`"  # Slack's markup characters, in a value


async def changes_cluster(make_cluster: MakeCluster) -> SimCluster:
    cluster = await make_cluster(
        {"gpu-a": kimi_node(fast=True, port=free_port())},
        access={"restart_users": [ALICE, BOB], "restart_channels": [OPS], "cooldown": "0s"},
        notify={"channel": NOTIFY},
        watch={"poll": "0.2s", "interval": "60s", "max_load": "60s"},
    )
    data = cluster.config.model_dump()
    sim = cluster.sims["gpu-a"]
    data["services"][0]["changes"] = {"enabled": True, "verify_window": "1s",
                                      "dropin": f"{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf"}
    cluster.config = BotConfig.model_validate(data)
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    return cluster


@pytest.fixture
async def change_bot(make_cluster: MakeCluster) -> AsyncIterator[Any]:
    bots = SlackBots()

    async def start(fs: OutageSlack) -> tuple[SlackBotUnderTest, SimCluster]:
        reset_pacing()
        cluster = await changes_cluster(make_cluster)
        b = await bots.start(fs, cluster)
        return b, cluster

    yield start
    await bots.close()


def everything(fs: OutageSlack) -> str:
    return json.dumps([c.body for c in fs.calls], ensure_ascii=False)


async def test_preview_buttons_and_every_notice_through_slack(change_bot: Any) -> None:
    fs = OutageSlack(word="kept", failures=2)  # Slack fails the kept notice twice: it is still posted once
    b, cluster = await change_bot(fs)
    sim = cluster.sims["gpu-a"]
    # Slack escapes &, < and > in what it delivers; the person typed the value in single quotes.
    await b.mention(html.escape(f"set --chat-template '{TEMPLATE}' on kimi", quote=False))
    rid, ts = await confirmation(b)
    preview = next(c for c in fs.delivered if "restart_confirm" in json.dumps(c.get("blocks", [])))
    shown = json.dumps(preview["blocks"], ensure_ascii=False)
    for word in ("change #1", "What changes", "Preflight", "allowed", "secrets", "flags", "parser", "changes",
                 "The new command line (redacted)", "90-inferbot.conf", "a restart:", "Change kimi", "Cancel"):
        assert word in shown, word
    assert "[redacted]" in shown and KIMI_API_KEY not in everything(fs)
    # Someone not allowed clicks: told so, privately; nothing is applied.
    await b.click("restart_confirm", rid, EVE, ts)
    await fs.wait_for("chat.postEphemeral", 1)
    assert "not allowed" in fs.calls_to("chat.postEphemeral")[0].body["text"]
    await b.click("restart_confirm", rid, BOB, ts)
    await until_(lambda: any("Change confirmed by" in json.dumps(c.body) for c in fs.calls_to("chat.update")), 30,
                 "the rewrite")
    kept = "✅ change #1 on kimi kept — verified for"
    await until_(lambda: any(kept in t for t in fs.texts(NOTIFY)) and any(kept in t for t in fs.texts(OPS, ASKED_AT)),
                 60, "the kept notices")
    argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
    assert argv[argv.index("--chat-template") + 1] == TEMPLATE  # byte for byte, through Slack
    assert sum(kept in t for t in fs.texts(NOTIFY)) == 1 and sum(kept in t for t in fs.texts(OPS, ASKED_AT)) == 1
    assert any("is ready — loaded in" in t for t in fs.texts(OPS, ASKED_AT))  # the load's own ✅, as a restart's
    assert fs.failed == 2
    # A value this vLLM refuses at start-up (its parser cannot be loaded here): the ❌ and the ✅ of the rollback.
    for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()
    fs.delivered.clear()
    await b.mention("set --max-model-len auto on kimi", ts="1700000060.000100")
    await until_(lambda: any("change #2" in json.dumps(c.get("blocks", [])) for c in fs.delivered), 20, "preview 2")
    body = next(c for c in fs.delivered if "change #2" in json.dumps(c.get("blocks", [])))
    rid2 = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"][0]["value"]
    await b.click("restart_confirm", rid2, BOB, "1700000061.000100")
    back = "✅ kimi is back on its previous settings — loaded in"
    await until_(lambda: any(back in t for t in fs.texts(NOTIFY)), 60, "the rollback")
    failed = [t for t in fs.texts(NOTIFY) if t.startswith("❌ change #2 on kimi failed:")]
    assert len(failed) == 1 and "↩️ rolling back to the settings of" in failed[0]
    assert sum(back in t for t in fs.texts(NOTIFY)) == 1
    assert KIMI_API_KEY not in everything(fs)


async def test_a_failed_rollback_and_the_revert_after_it_through_slack(change_bot: Any) -> None:
    b, cluster = await change_bot(OutageSlack(word="never-fails", failures=0))
    sim = cluster.sims["gpu-a"]
    for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()  # this node's vLLM parser cannot be loaded: "auto" passes inferbot's table, vLLM refuses it
    await b.mention("set --max-model-len auto on kimi")
    rid, ts = await confirmation(b)
    await b.click("restart_confirm", rid, BOB, ts)
    store = b.rt.store
    assert store is not None

    async def loading() -> bool:
        ch = await store.changes.get(rid)
        return ch is not None and ch.steps[0].state == "loading"

    deadline = asyncio.get_running_loop().time() + 30
    while not await loading():
        assert asyncio.get_running_loop().time() < deadline, "the change never reached loading"
        await asyncio.sleep(0.05)
    sim.set_sudo_allowed(False)  # the drop-in can no longer be removed: the rollback fails
    failed = "❌ change #1 on kimi: rolling back failed"
    await until_(lambda: any(failed in t for t in b.fs.texts(NOTIFY)), 60, "the failed rollback")
    dropin = f"{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf"
    for where in ((NOTIFY,), (OPS, ASKED_AT)):
        said = [html.unescape(t) for t in b.fs.texts(*where) if failed in t]  # as Slack shows the text
        assert len(said) == 1, (where, said)
        # The commands as one code span: copied whole, and nothing in a path read as Slack markup.
        assert f"`sudo rm -f {dropin} && sudo systemctl daemon-reload && sudo systemctl reset-failed {KIMI_UNIT} " \
               f"&& sudo systemctl restart {KIMI_UNIT}`" in said[0], said[0]
    posted = [c.body for c in b.fs.calls_to("chat.postMessage") if failed in json.dumps(c.body, ensure_ascii=False)]
    assert len(posted) == 2 and "<http" not in json.dumps(posted) and "<!" not in json.dumps(posted)
    # The change is decided: a revert is accepted, clears the start limit and puts the operator's unit back.
    sim.set_sudo_allowed(True)
    b.fs.delivered.clear()
    await b.mention("revert kimi", ts="1700000060.000100")
    await until_(lambda: any("change #2" in json.dumps(c.get("blocks", [])) for c in b.fs.delivered), 20,
                 "the revert's preview")
    body = next(c for c in b.fs.delivered if "change #2" in json.dumps(c.get("blocks", [])))
    rid2 = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"][0]["value"]
    await b.click("restart_confirm", rid2, BOB, "1700000061.000100")
    back = "✅ kimi is back on the operator's unit (change #2: inferbot's drop-in removed)"
    await until_(lambda: any(back in t for t in b.fs.texts(NOTIFY)), 60, "the revert")
    assert not any(t.startswith("❌ change #2") for t in b.fs.texts(NOTIFY))
    argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
    assert argv[argv.index("--max-model-len") + 1] != "auto" and not await asyncio.to_thread(Path(dropin).exists)
