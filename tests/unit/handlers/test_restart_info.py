"""handlers/restart_info.py: "why did kimi restart?", "who can restart kimi?" — answered, never a restart.

On a node nobody listens on (a closed loopback port): who may restart and how come from the config, the
restart events from the audit log, so they are answered while the node is down; the node's reason is said once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.app import runtime
from bot.dispatch import answer
from config.loader import parse_config
from config.models import AccessPolicy, Service
from handlers.context import Asker
from handlers.restart_info import how_to, who_may
from services import mentions
from tests.sshd import free_port

CFG = """
[[nodes]]
name = "gpu-a"
host = "127.0.0.1"
port = {port}
timeout = "2s"
[[nodes]]
name = "gpu-b"
host = "127.0.0.1"
port = {port}
timeout = "2s"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
[[services]]
name = "qwen"
node = "gpu-a"
unit = "vllm-qwen.service"
[[services]]
name = "qwen"
node = "gpu-b"
unit = "vllm-qwen.service"
[access]
restart_users = ["U0ALICE"]
[state]
dir = "{dir}"
"""


def test_who_may_restart_in_one_sentence() -> None:
    assert who_may(AccessPolicy()).startswith("nobody in Slack yet — restarts are off until the config lists who may")
    policy = AccessPolicy(restart_users=["U0ALICE", "U0BOB"], restart_usergroups=["S0OPS"],
                          restart_channels=["C0OPS"], require_second_person=True)
    assert who_may(policy) == (f"{mentions.user('U0ALICE')}, {mentions.user('U0BOB')}, {mentions.usergroup('S0OPS')}"
                               f" — only in {mentions.channel('C0OPS')}; someone other than the requester must confirm")


def test_how_to_names_the_node_only_when_the_name_is_not_enough() -> None:
    kimi = Service(name="kimi", node="gpu-a", unit="vllm-kimi.service")
    assert how_to(kimi, several_nodes=False) == (
        "in Slack `@inferbot restart kimi` (or `/inferbot restart kimi`), then an allowed person confirms with the "
        "button; on the bot's host `inferbot restart kimi` (you type the name back; `--wait` follows the load)")
    assert "`@inferbot restart kimi on gpu-a`" in how_to(kimi, True) and "`inferbot restart kimi@gpu-a`" in how_to(
        kimi, True)


async def test_a_negation_is_a_promise_and_restarts_nothing(tmp_path: Path) -> None:
    config = parse_config(CFG.format(port=free_port(), dir=tmp_path))
    async with runtime(config) as rt:
        reply = await answer("don't restart kimi", rt.context(Asker(surface="slack", user_id="U0ALICE",
                                                                   channel_id="C1")))
        assert await rt.store.audit.recent() == []  # nothing was requested
    assert (reply.intent, reply.title) == ("restarts", "I won't restart anything")
    assert (reply.data["negated"], reply.data["restarted"]) == (True, False)


async def test_the_audit_log_and_the_access_answer_while_the_node_is_down(tmp_path: Path) -> None:
    config = parse_config(CFG.format(port=free_port(), dir=tmp_path))
    now = datetime.now(UTC)
    async with runtime(config) as rt:
        audit = rt.store.audit
        await audit.record("restart.executed", "U0ALICE", "C1", "kimi", "gpu-a", "systemctl restart",
                           at=now - timedelta(hours=2))
        await audit.record("restart.unplanned", None, None, "kimi", "gpu-a", "NRestarts 3 → 4",
                           at=now - timedelta(hours=1))
        await audit.record("silence.set", "U0ALICE", "C1", "kimi", "gpu-a", "until 15:00 UTC", at=now)  # not a restart
        await audit.record("restart.executed", "U0ALICE", "C1", "qwen", "gpu-a", "systemctl restart", at=now)
        stranger = await answer("why did kimi restart?", rt.context(Asker(surface="slack", user_id="U0EVE",
                                                                          channel_id="C1")))
        both = await answer("who can restart qwen?", rt.context(Asker(surface="cli")))
    assert stranger.ok and stranger.intent == "restarts"
    [kimi] = stranger.data["services"]
    assert [e["event"] for e in kimi["restarts"]] == ["restart.unplanned", "restart.executed"]  # newest first
    assert kimi["state"] == "unreachable" and kimi["n_restarts"] is None
    assert kimi["access"]["users"] == ["U0ALICE"] and kimi["access"]["asker_allowed"] is False
    fields = dict(next(s for s in stranger.sections if s.kind == "fields").fields or [])
    assert fields["node"] == "gpu-a unreachable (above)" and fields["you"].startswith("may not — ")
    table = next(s for s in stranger.sections if s.kind == "table")
    assert [row[1] for row in table.rows or []] == ["unplanned", "executed"]
    # qwen runs on two nodes: each card says how to name the one meant; the terminal may restart from its shell.
    assert [s["node"] for s in both.data["services"]] == ["gpu-a", "gpu-b"]
    assert all("`inferbot restart qwen@" in s["how"] for s in both.data["services"])
    you = [dict(s.fields or [])["you"] for s in both.sections if s.kind == "fields"]
    assert you == ["may restart it from this shell: `inferbot restart qwen@gpu-a`",
                   "may restart it from this shell: `inferbot restart qwen@gpu-b`"]
    assert sum(1 for s in both.sections if s.kind == "header" and s.title == "gpu-a unreachable") == 1
