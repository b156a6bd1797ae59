"""A settings change through the whole conversation, on the simulated node behind a real sshd, with the real store
and scheduler (issue 25): asked in words, a preflight and a preview before anyone confirms, the restart's guard,
the apply (inferbot's drop-in, written through the real remote templates, loaded by the simulated systemd), the
verification, the automatic rollback, the revert, the history, and a bot killed in the middle.

The truth is the node: the simulated process's ``/proc/<pid>/cmdline`` and ``environ`` and the files on disk. A
``Bot`` here is one bot process (``tests/test_restart.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bot import jobs
from bot.render_text import render_text
from config.models import BotConfig
from handlers.change.kind import CHANGE
from handlers.confirmable.flow import run_confirmed
from handlers.confirmable.kind import Confirmed
from handlers.reply import Reply
from services.mentions import plain
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_API_KEY, KIMI_HF_TOKEN, KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.systemd.helpers import state_bytes
from tests.test_change_sim import proc_argv, proc_env
from tests.test_restart import ALICE, BOB, EVE, NOTIFY, OPS, THREAD, Bot, access, bot, kimi, notices, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

KEPT = "✅ change #{n} on kimi kept — verified for"


async def change_cluster(make_cluster: MakeCluster, *, changes: dict[str, Any] | None = None,
                         access_: dict[str, Any] | None = None, nodes: tuple[str, ...] = ("gpu-a",)) -> SimCluster:
    """Kimi on the given simulated nodes, changes enabled with a short verify window, drop-ins under each root."""
    cluster = await make_cluster({n: kimi() for n in nodes}, access=access_ or access(cooldown="0s"),
                                 notify={"channel": NOTIFY},
                                 watch={"poll": "0.2s", "interval": "0.3s", "max_load": "60s", "unhealthy_polls": 2})
    data = cluster.config.model_dump()
    for svc in data["services"]:
        sim = cluster.sims[svc["node"]]
        svc["changes"] = {"enabled": True, "dropin": f"{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf",
                          "verify_window": "1s", **(changes or {})}
    cluster.config = BotConfig.model_validate(data)
    for n in nodes:
        await cluster.sims[n].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def dropin(cluster: SimCluster, node: str = "gpu-a") -> Path:
    return Path(cluster.config.service("kimi", node).dropin_path())  # type: ignore[union-attr]


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def argv_of(sim: SimNode) -> list[str]:
    return proc_argv(sim.state(KIMI_UNIT).main_pid)


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


async def ask_change(b: Bot, text: str, user: str = ALICE) -> Reply:
    reply = await b.ask(text, user)
    assert reply.ok, (reply.title, reply.error, [s.text for s in reply.sections])
    assert [a.action_id for a in reply.actions] == ["restart_confirm", "restart_cancel"]
    return reply


def events(rows: list[Any]) -> list[str]:
    return [e.event for e in rows]


async def test_a_change_is_previewed_applied_verified_and_kept(make_cluster: MakeCluster,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cluster = await change_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    operator_argv = argv_of(sim)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 256 on kimi")
        preview = render_text(reply) + json.dumps(reply.data)
        change = reply.data["change"]
        assert reply.intent == "change" and change["id"] == 1 and change["state"] == "pending"
        assert change["diff"] == [{"kind": "flag", "key": "max-num-seqs", "old": None, "new": "256"}]
        assert [s["name"] for s in change["preflight"]] == ["allowed", "secrets", "flags", "unit", "parser", "gpus",
                                                           "port", "changes"]
        text = "\n".join(plain(s.text or "") + " " + " ".join(" ".join(r) for r in s.rows) for s in reply.sections)
        assert "change #1" in text and "a restart:" in text and "vLLM 0.20.1's own parser on gpu-a" in \
            " ".join(s.title or "" for s in reply.sections)
        assert any(s.kind == "code" and "--max-num-seqs 256" in (s.text or "") for s in reply.sections)
        assert any(s.kind == "code" and str(dropin(cluster)) in (s.title or "") for s in reply.sections)
        assert not dropin(cluster).exists()  # nothing is written before a confirmation
        out = await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        assert out.executed and out.message is not None and "drop-in is written" in out.message.data["notice"]
        # While it runs, the next change, a revert or a restart of kimi waits for it.
        for text in ("set max-num-seqs 128 on kimi", "revert kimi", "restart kimi"):
            busy = await b.ask(text)
            assert not busy.ok and "change #1 of kimi is in flight" in str(busy.error), (text, busy.error)
        await until(lambda: bool(notices(b, KEPT.format(n=1), NOTIFY)), 60, "the kept notice")
        assert len(notices(b, KEPT.format(n=1), OPS, THREAD)) == 1
        assert flag(argv_of(sim), "--max-num-seqs") == "256"
        assert dropin(cluster).exists() and "inferbot-delta" in dropin(cluster).read_text()
        store = b.rt.store
        assert store is not None
        ch = await store.changes.get(str(reply.data["request_id"]))
        assert ch is not None and ch.state == "kept" and [s.state for s in ch.steps] == ["kept"]
        audit = events(await store.audit.recent("kimi", limit=100))
        for ev in ("change.requested", "change.confirmed", "change.applied", "change.verified"):
            assert ev in audit, audit
        await until(lambda: False if store is None else True, 1)
        # The history lists it: who asked, who confirmed, the difference, the outcome.
        history = await b.ask("what changed on kimi?")
        settings = history.data["settings_changes"]
        assert settings[0]["id"] == 1 and settings[0]["requested_by"] == ALICE and settings[0]["confirmed_by"] == BOB
        assert settings[0]["state"] == "kept" and settings[0]["diff"] == change["diff"]
        # Revert: back to the operator's unit, guarded the same way.
        reply = await ask_change(b, "revert kimi")
        assert reply.intent == "revert" and reply.data["change"]["op"] == "revert"
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "kimi is back on the operator's unit", NOTIFY)), 60, "the revert")
        assert not dropin(cluster).exists() and argv_of(sim) == operator_argv
        assert "change.reverted" in events(await store.audit.recent("kimi", limit=100))
    # The unit's own secrets (its API key, its HF token) are in the command line and the drop-in inferbot wrote on
    # the node, and nowhere else: not in the state database, the replies, the notices or the logs.
    seen = state_bytes(cluster.config.state.directory()) + json.dumps(
        [p.reply.model_dump(mode="json") for p in b.notifier.posts]).encode() + caplog.text.encode()
    seen += preview.encode() + json.dumps(history.data, default=str).encode()
    for secret in (KIMI_API_KEY, KIMI_HF_TOKEN):
        assert secret.encode() not in seen


async def test_a_value_the_simulated_vllm_refuses_rolls_back(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    # This node's vLLM parser cannot be loaded: the preflight checks with inferbot's table only, which lets
    # "auto" through; the (simulated) vLLM refuses it at start-up.
    for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()
    operator_argv = argv_of(sim)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set --max-model-len auto on kimi")
        steps = {s["name"]: s["status"] for s in reply.data["change"]["preflight"]}
        assert steps["parser"] == "skipped"
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        failed = "❌ change #1 on kimi failed: the load failed"
        await until(lambda: bool(notices(b, "kimi is back on its previous settings", NOTIFY)), 60, "the rollback")
        said = notices(b, failed, NOTIFY)
        assert len(said) == 1 and "— ↩️ rolling back to the settings of " in said[0], b.notifier.texts(NOTIFY)
        assert notices(b, "✅ kimi is back on its previous settings — loaded in", OPS, THREAD)
        assert argv_of(sim) == operator_argv and not dropin(cluster).exists()
        store = b.rt.store
        assert store is not None
        audit = events(await store.audit.recent("kimi", limit=100))
        assert "change.failed" in audit and "change.rolled_back" in audit
        ch = await store.changes.get(str(reply.data["request_id"]))
        assert ch is not None and ch.state == "rolled_back"
        # The next change is accepted now.
        again = await ask_change(b, "set max-num-seqs 128 on kimi")
        assert again.data["change"]["id"] == 2


async def test_a_typo_and_a_secret_are_refused_before_anything_is_written(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster)
    async with bot(cluster.config) as b:
        r = await b.ask("set max-num-seq 256 on kimi")
        assert not r.ok and not r.actions and "did you mean --max-num-seqs" in str(r.error)
        r = await b.ask("set --api-key sk-live-abcdef0123456789 on kimi")
        assert not r.ok and "set secrets on the node, not in chat" in str(r.error)
        assert "sk-live-abcdef0123456789" not in json.dumps(r.data) + str(r.error) + str(r.sections)
        r = await b.ask("set env HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345 on kimi")
        assert not r.ok and "set secrets on the node, not in chat" in str(r.error)
        r = await b.ask("set max-num-seqs 256 on kimi", user=EVE)
        assert not r.ok and "not allowed" in str(r.error)
        assert not dropin(cluster).exists()
        store = b.rt.store
        assert store is not None
        refused = [e for e in await store.audit.recent("kimi", limit=100) if e.event == "change.refused"]
        assert len(refused) == 4
        everything = json.dumps([e.model_dump(mode="json") for e in await store.audit.recent(limit=200)])
        everything += json.dumps([c.model_dump(mode="json") for c in await store.changes.recent()])
        assert "sk-live-abcdef0123456789" not in everything and "hf_abcdefghijklmnopqrstuvwxyz012345" not in everything


async def step_state(b: Bot, change_id: str, node: str = "gpu-a") -> str:
    store = b.rt.store
    assert store is not None
    ch = await store.changes.get(change_id)
    assert ch is not None
    return next(s.state for s in ch.steps if s.node == node)


async def until_step(b: Bot, change_id: str, state: str, within: float = 60.0) -> None:
    seen: list[str] = []

    async def check() -> bool:
        seen.append(await step_state(b, change_id))
        return seen[-1] == state

    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"wanted {state}, saw {seen[-5:]}"
        await asyncio.sleep(0.05)


HARD = {  # what a naive quoter gets wrong: spaces, both quotes, %, $, ${X}, backslashes, nested JSON
    "--chat-template": 'it\'s "quoted" 100% $HOME ${PORT} back\\slash',
    "--hf-overrides": '{"rope_scaling": {"type": "yarn", "note": "50% of $X and \\"q\\""}}',
}
HARD_ENV = ("WEIRD", 'a  b "c" 100% $X ${Y} \\back')


def hard_message() -> str:
    """The change as a person types it in chat, each value quoted shell-style."""
    def q(v: str) -> str:
        return "'" + v.replace("'", "'\"'\"'") + "'"

    return ("set " + " ".join(f"{k} {q(v)}" for k, v in HARD.items()) + f" env {HARD_ENV[0]}={q(HARD_ENV[1])}"
            " on kimi")


async def test_hard_values_reach_the_process_and_the_operators_dropin_survives(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, changes={"verify_window": "3s"})
    sim = cluster.sims["gpu-a"]
    operator = "[Service]\nEnvironment=OPERATOR=kept \"SPACED=x y\"\n"
    sim.edit_unit(KIMI_UNIT, operator, drop_in="10-operator.conf")
    await sim.daemon_reload()
    operator_file = Path(f"{sim.unit_dir}/{KIMI_UNIT}.d/10-operator.conf")
    written = file_bytes(operator_file)
    async with bot(cluster.config, watch=True) as b:
        reply = await ask_change(b, hard_message())
        rid = str(reply.data["request_id"])
        await b.click("restart_confirm", rid, user=BOB)
        await until_step(b, rid, "verifying")
        argv, env = argv_of(sim), proc_env(sim.state(KIMI_UNIT).main_pid)
        assert {k: flag(argv, k) for k in HARD} == HARD
        assert not any(v in c for c in b.commands for v in (*HARD.values(), HARD_ENV[1]))  # content on stdin only
        assert env[HARD_ENV[0]] == HARD_ENV[1]
        assert env["OPERATOR"] == "kept" and env["SPACED"] == "x y"  # the operator's drop-in still applies
        # A crash inside the verify window: the change is rolled back, the operator's drop-in untouched.
        await sim.crash(KIMI_UNIT)
        await until(lambda: bool(notices(b, "kimi is back on its previous settings", NOTIFY)), 60, "the rollback")
        failed = notices(b, "❌ change #1 on kimi failed:", NOTIFY)
        assert len(failed) == 1 and "within the verify window" in failed[0] and "↩️ rolling back" in failed[0]
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        env = proc_env(sim.state(KIMI_UNIT).main_pid)
        assert HARD_ENV[0] not in env and env["OPERATOR"] == "kept"
        assert "--chat-template" not in argv_of(sim) and not dropin(cluster).exists()
        assert file_bytes(operator_file) == written
        await asyncio.sleep(1.0)  # a few more ticks and polls: nothing is posted twice
        assert len(notices(b, "❌ change #1 on kimi failed:", NOTIFY)) == 1
        assert len(notices(b, "kimi is back on its previous settings", NOTIFY)) == 1
        # A second change, then a revert: the operator's drop-in is still there, byte for byte.
        reply = await ask_change(b, "set max-num-seqs 128 on kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, KEPT.format(n=2), NOTIFY)), 60, "change #2 kept")
        reply = await ask_change(b, "revert kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "kimi is back on the operator's unit", NOTIFY)), 60, "the revert")
        assert not dropin(cluster).exists() and file_bytes(operator_file) == written
        assert proc_env(sim.state(KIMI_UNIT).main_pid)["OPERATOR"] == "kept"


async def test_the_two_person_rule_and_a_click_by_someone_not_allowed(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, access_=access(cooldown="0s", require_second_person=True))
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 256 on kimi")
        rid = str(reply.data["request_id"])
        out = await b.click("restart_confirm", rid, user=ALICE)
        assert not out.executed and "two-person rule" in str(out.ephemeral)
        out = await b.click("restart_confirm", rid, user=EVE)
        assert not out.executed and str(out.ephemeral).startswith("not allowed")
        assert not dropin(cluster).exists() and b.restarts_run() == []
        assert await step_state(b, rid) == "waiting"
        out = await b.click("restart_confirm", rid, user=BOB)
        assert out.executed
        await until(lambda: bool(notices(b, KEPT.format(n=1), NOTIFY)), 60, "kept")
        assert len(b.restarts_run()) == 1


async def test_a_bot_stopped_mid_change_is_finished_by_the_next_once(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, changes={"verify_window": "2s"})
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config) as first:
        reply = await ask_change(first, "set max-num-seqs 256 on kimi")
        rid = str(reply.data["request_id"])
        await first.click("restart_confirm", rid, user=BOB)
        await until_step(first, rid, "verifying")
    # The first bot is gone mid-verification; the next one carries the same change on to its end, once.
    async with bot(cluster.config) as second:
        await until(lambda: bool(notices(second, KEPT.format(n=1), NOTIFY)), 60, "kept by the second bot")
        await asyncio.sleep(1.0)
        kept = notices(first, KEPT.format(n=1)) + notices(second, KEPT.format(n=1))
        assert len(kept) == 2, kept  # the thread and the notify channel, once each
        assert first.restarts_run() and not second.restarts_run()
        assert flag(argv_of(sim), "--max-num-seqs") == "256"
        store = second.rt.store
        assert store is not None
        req = await store.requests.get(rid)
        assert req is not None and req.state == "done"
        verified = [e for e in await store.audit.recent("kimi", limit=100) if e.event == "change.verified"]
        assert len(verified) == 1


async def test_a_settle_between_the_confirmation_and_the_claim_carries_the_change_on(make_cluster: MakeCluster) -> None:
    """The leader settles every confirmed request it has no job for (its process may have stopped): one it settles
    while the confirming process is still claiming it must not put the change's next tick off until the change
    would have been given up (it would sit applied, never verified or kept)."""
    cluster = await change_cluster(make_cluster)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 64 on kimi")
        rid = str(reply.data["request_id"])
        store = b.rt.store
        assert store is not None
        ctx = b.ctx(BOB, OPS, None)
        at = ctx.now()
        assert await store.requests.transition(rid, {"pending"}, "confirmed", BOB, at)  # the click's first half
        await asyncio.create_task(jobs.settle_request_job(rid))  # the leader's settle, right then (a job step)
        req = await store.requests.get(rid)
        service = cluster.config.service("kimi", "gpu-a")
        assert req is not None and service is not None
        out = await run_confirmed(Confirmed(ctx, CHANGE, req, service, BOB, at))  # the click's second half
        assert out.executed
        await until(lambda: bool(notices(b, KEPT.format(n=1), NOTIFY)), 60, "kept")
        assert flag(argv_of(cluster.sims["gpu-a"]), "--max-num-seqs") == "64"


async def test_rollback_off_and_a_write_the_node_refuses(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, changes={"rollback": False})
    sim = cluster.sims["gpu-a"]
    for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set --max-model-len auto on kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "❌ change #1 on kimi failed:", NOTIFY)), 60, "the failure")
        said = notices(b, "❌ change #1 on kimi failed:", NOTIFY)[0]
        assert "rollback is off" in said and "rolling back" not in said
        assert dropin(cluster).exists()  # left as it is, as configured
    # Without sudo nothing can be written: nothing is restarted, and it says so.
    cluster2 = await change_cluster(make_cluster)
    sim2 = cluster2.sims["gpu-a"]
    pid = sim2.state(KIMI_UNIT).main_pid
    async with bot(cluster2.config) as b:
        reply = await ask_change(b, "set max-num-seqs 256 on kimi")
        sim2.set_sudo_allowed(False)
        out = await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        assert out.message is not None and "failed: writing the change failed" in out.message.data["notice"]
        await until(lambda: bool(notices(b, "nothing was restarted", NOTIFY)), 30, "the notice")
        assert b.restarts_run() == [] and sim2.state(KIMI_UNIT).main_pid == pid


async def test_many_nodes_one_first_then_the_others_and_a_stop_at_the_first_failure(
        make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, nodes=("gpu-a", "gpu-b"))
    a, b_node = cluster.sims["gpu-a"], cluster.sims["gpu-b"]
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 256 on kimi")
        assert reply.data["change"]["nodes"] == ["gpu-a", "gpu-b"]
        assert {s["node"] for s in reply.data["change"]["preflight"]} == {"gpu-a", "gpu-b"}
        rid = str(reply.data["request_id"])
        await b.click("restart_confirm", rid, user=BOB)
        assert await step_state(b, rid, "gpu-b") == "waiting"  # gpu-a first
        await until(lambda: bool(notices(b, KEPT.format(n=1), NOTIFY)), 90, "kept on both")
        assert "on gpu-a, gpu-b" in notices(b, KEPT.format(n=1), NOTIFY)[0]
        assert flag(argv_of(a), "--max-num-seqs") == "256" and flag(argv_of(b_node), "--max-num-seqs") == "256"
        store = b.rt.store
        assert store is not None
        rows = sorted(await store.audit.recent("kimi", limit=100), key=lambda e: e.at)
        order = [(e.event, e.node) for e in rows if e.event in ("change.applied", "change.verified")]
        assert order == [("change.applied", "gpu-a"), ("change.verified", "gpu-a"), ("change.applied", "gpu-b"),
                         ("change.verified", "gpu-b")]
        # A change that fails on the first node goes no further.
        for sim in (a, b_node):
            for p in sim.root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
                p.unlink()
        pid_b = b_node.state(KIMI_UNIT).main_pid
        reply = await ask_change(b, "set --max-model-len auto on kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "❌ change #2 on kimi stopped at its first failure", NOTIFY)), 90,
                    "the stop")
        said = notices(b, "❌ change #2 on kimi stopped", NOTIFY)[0]
        assert "rolled back on gpu-a" in said and "not applied on gpu-b" in said
        assert b_node.state(KIMI_UNIT).main_pid == pid_b
