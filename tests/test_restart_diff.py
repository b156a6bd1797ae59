"""What a restart will change, before anyone confirms (issue 14): settings, daemon-reload, leftovers.

The simulated node behind the real sshd; the unit is edited on disk the way people do it (without
``daemon-reload``), and a crash leaves vLLM workers holding GPU memory outside the unit.
"""

from __future__ import annotations

import re

import pytest

from services.sim.scenarios import KIMI_UNIT, NodeScenario
from tests.conftest import MakeCluster
from tests.test_restart import (
    NOTIFY,
    RESTART_CMD,
    access,
    bot,
    kimi,
    kimi_cluster,
    notices,
    ready_in_both,
    request,
    until,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

RELOAD_CMD = "sudo -n systemctl daemon-reload"


def _fields(reply: object) -> dict[str, str]:
    return dict(next(s.fields for s in reply.sections if s.kind == "fields"))  # type: ignore[attr-defined]


async def test_unchanged_unit_says_no_setting_changes(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster)
    async with bot(cluster.config) as b:
        reply = await b.ask("restart kimi")
        assert reply.ok, reply.error
        facts = _fields(reply)
        assert facts["this restart applies"] == "no setting changes"
        assert "unit on disk" not in facts
        assert reply.data["applies"] == [] and reply.data["reload_first"] is False
        assert reply.data["leftovers"] == []
        assert not any(s.title == "Leftover GPU processes" for s in reply.sections)


async def test_edited_unit_shows_the_difference_and_the_restart_reloads_first(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, access_=access(cooldown="0s"))
    sim = cluster.sims["gpu-a"]
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    text = unit_file.read_text().replace("--max-model-len 131072", "--max-model-len 65536")
    sim.edit_unit(KIMI_UNIT, text.replace("NCCL_PROTO=LL", "NCCL_PROTO=Simple"))
    async with bot(cluster.config) as b:
        reply = await b.ask("restart kimi")
        assert reply.ok, reply.error
        facts = _fields(reply)
        assert facts["this restart applies"] == "--max-model-len 131072 → 65536; NCCL_PROTO LL → Simple"
        assert "changed without daemon-reload" in facts["unit on disk"] and RELOAD_CMD in facts["unit on disk"]
        assert reply.data["reload_first"] is True and reply.data["reload_command"] == RELOAD_CMD
        rid = str(reply.data["request_id"])
        out = await b.click("restart_confirm", rid)
        assert out.executed
        await until(ready_in_both(b), 45, "the ready notices")
        # The reload ran, once, before the one restart.
        assert b.commands.count(RELOAD_CMD) == 1
        assert b.commands.index(RELOAD_CMD) < b.commands.index(RESTART_CMD)
        assert b.restarts_run() == [RESTART_CMD]
        assert not sim.state(KIMI_UNIT).need_daemon_reload
        # What runs now is what is on disk: nothing left to apply.
        again = await b.ask("restart kimi")
        assert _fields(again)["this restart applies"] == "no setting changes"
        assert "unit on disk" not in _fields(again)
        audit = await b.rt.store.audit.recent("kimi")  # type: ignore[union-attr]
        executed = next(e for e in audit if e.event == "restart.executed")
        assert executed.detail.startswith(f"`{RELOAD_CMD}` first")


def _kimi_without_gpu_wait() -> NodeScenario:
    """The Kimi node with Restart=no and without its ExecStartPre that waits for free GPU memory."""
    scenario = kimi(restart="no")
    unit = scenario.units[0]
    unit.text = re.sub(r"ExecStartPre=.*?exit 1'\n", "", unit.text, flags=re.DOTALL)
    return scenario


async def test_leftovers_are_listed_before_the_restart_and_named_in_the_oom_failure(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, scenario=_kimi_without_gpu_wait(), access_=access(cooldown="0s"))
    sim = cluster.sims["gpu-a"]
    await sim.crash(KIMI_UNIT, leave_workers=True)  # like an OOM kill: the workers keep their GPU memory
    await sim.wait_for(KIMI_UNIT, "failed", 5)
    await until(lambda: bool(sim.leftover_pids()), 5, "the leftover workers")
    left = set(sim.leftover_pids())
    try:
        async with bot(cluster.config) as b:
            rid = await request(b)
            reply = await b.ask("restart kimi")  # a second look: the same facts (the first request expires)
            section = next(s for s in reply.sections if s.title == "Leftover GPU processes")
            assert "may run out of memory" in (section.text or "")
            listed = {int(p) for p in re.findall(r"PID (\d+) \(VLLM::", section.text or "")}
            assert listed and listed <= left, (listed, left)
            assert re.search(r"PID \d+ \(VLLM::Worker_TP\d\) on GPU \d: [\d,]+ MiB", section.text or "")
            rows = reply.data["leftovers"]
            assert {r["pid"] for r in rows} == listed and all(r["mib"] > 0 and r["gpu"] is not None for r in rows)
            out = await b.click("restart_confirm", rid)
            assert out.executed
            await until(lambda: bool(notices(b, "failed", NOTIFY)), 45, "the failure notice")
            post = next(p for p in b.notifier.posts if p.channel == NOTIFY and "failed" in p.text)
            named = next(s for s in post.reply.sections if s.title == "Leftover GPU processes")
            assert "Out of memory while vLLM processes outside" in (named.text or "")
            assert {int(p) for p in re.findall(r"PID (\d+) \(", named.text or "")} & left
    finally:
        sim.kill_leftovers()
