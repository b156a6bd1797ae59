"""The outcomes of a settings change the other conversation tests leave out (issue 25), on the simulated node behind
a real sshd with the real store, scheduler and watchers: a change that changes nothing stops at the preflight; an
unhealthy notice inside the verify window rolls the change back; a rollback that cannot be done is one ❌ naming
what is on disk and the command that restores by hand, and the revert that follows is accepted.

The truth is the node: the simulated process's ``/proc/<pid>/cmdline`` and the drop-in on disk.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot.render_text import render_text
from config.models import BotConfig
from handlers.common import fmt_duration
from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT
from tests.conftest import MakeCluster
from tests.test_change_flow import argv_of, ask_change, change_cluster, dropin, events, flag, until_step
from tests.test_restart import BOB, NOTIFY, OPS, THREAD, bot, notices, set_profile, until
from tests.unit.handlers.test_acceptance import bench_cluster, previous_result

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _without_node_parser(root: Path) -> None:
    """The node's vLLM parser cannot be loaded: only inferbot's table checks (it lets ``auto`` through, the
    simulated vLLM refuses it at start-up)."""
    for p in root.glob("opt/vllm/venv/lib/python*/site-packages/vllm/entrypoints/openai/cli_args.py"):
        p.unlink()


async def test_a_change_that_changes_nothing_says_so_and_stops(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    pid = sim.state(KIMI_UNIT).main_pid
    async with bot(cluster.config) as b:
        # The operator's unit already runs --tensor-parallel-size 8 (spelled as its alias here).
        r = await b.ask("set -tp 8 on kimi")
        assert not r.ok and not r.actions, (r.title, r.error)
        assert "nothing would change" in str(r.error) + " ".join(s.text or "" for s in r.sections)
        steps = {s["name"]: s["status"] for s in r.data["change"]["preflight"]}
        assert steps["changes"] == "failed" and r.data["change"]["state"] == "refused"
        assert not dropin(cluster).exists() and b.restarts_run() == [] and sim.state(KIMI_UNIT).main_pid == pid
        store = b.rt.store
        assert store is not None
        assert "change.refused" in events(await store.audit.recent("kimi", limit=50))
        assert "change.requested" not in events(await store.audit.recent("kimi", limit=50))  # nobody was asked
        # Everyday words for a flag (what the `flag` answer reads) are refused with the flag they name.
        r = await b.ask("set context length 65536 on kimi")
        assert not r.ok and not r.actions and "did you mean --max-model-len?" in str(r.error), r.error
        assert r.data["change"]["suggestions"] == ["max-model-len"]


@pytest.mark.parametrize(("live", "normal"), [({"health_status": 503}, {"health_status": None}),
                                              ({"hung": True}, {"hung": False})], ids=["unhealthy", "hung"])
async def test_an_unhealthy_or_hung_notice_inside_the_verify_window_rolls_back(
        make_cluster: MakeCluster, live: dict[str, object], normal: dict[str, object]) -> None:
    cluster = await change_cluster(make_cluster, changes={"verify_window": "30s"})
    sim = cluster.sims["gpu-a"]
    data = cluster.config.model_dump()
    data["watch"]["hung_after"] = "1s"
    cluster.config = BotConfig.model_validate(data)
    set_profile(sim, traffic_tps=200.0, running=3, waiting=4)  # requests in flight (the change's start has them)
    operator_argv = argv_of(sim)
    async with bot(cluster.config, watch=True) as b:
        reply = await ask_change(b, "set max-num-seqs 64 on kimi")
        rid = str(reply.data["request_id"])
        await b.click("restart_confirm", rid, user=BOB)
        await until_step(b, rid, "verifying")
        assert flag(argv_of(sim), "--max-num-seqs") == "64"
        sim.set_live(KIMI_UNIT, **live)  # /health answers 503, or the tokens stop while requests run: the watcher's
        try:
            await until(lambda: bool(notices(b, "❌ change #1 on kimi failed:", NOTIFY)), 60, "the failure")
        except AssertionError:
            raise AssertionError(f"no failure; notices: {b.notifier.texts(NOTIFY)}; {sim.state(KIMI_UNIT)}") from None
        sim.set_live(KIMI_UNIT, **normal)
        said = notices(b, "❌ change #1 on kimi failed:", NOTIFY)
        assert len(said) == 1 and "within the verify window" in said[0] and "↩️ rolling back" in said[0], said
        await until(lambda: bool(notices(b, "✅ kimi is back on its previous settings", NOTIFY)), 60, "the rollback")
        assert notices(b, "✅ kimi is back on its previous settings — loaded in", OPS, THREAD)
        assert argv_of(sim) == operator_argv and not dropin(cluster).exists()
        assert not notices(b, "change #1 on kimi kept")
        store = b.rt.store
        assert store is not None
        ch = await store.changes.get(rid)
        assert ch is not None and ch.state == "rolled_back"


async def test_a_rollback_that_cannot_be_done_is_one_notice_with_the_way_back_by_hand(
        make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    _without_node_parser(sim.root)
    operator_argv = argv_of(sim)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set --max-model-len auto on kimi")
        rid = str(reply.data["request_id"])
        await b.click("restart_confirm", rid, user=BOB)
        await until_step(b, rid, "loading")
        sim.set_sudo_allowed(False)  # the node takes sudo away mid-change: the drop-in cannot be removed
        await until(lambda: bool(notices(b, "rolling back failed", NOTIFY)), 60, "the failed rollback")
        store = b.rt.store
        assert store is not None
        ch = await store.changes.get(rid)
        assert ch is not None and ch.state == "rollback_failed"
        for channel, thread in ((NOTIFY, None), (OPS, THREAD)):
            said = notices(b, "rolling back failed", channel, thread)
            assert len(said) == 1, said
            text = said[0]
            assert text.startswith("❌ change #1 on kimi: rolling back failed")
            assert "inferbot's drop-in is on disk" in text
            assert f"sudo rm -f {dropin(cluster)} && sudo systemctl daemon-reload && sudo systemctl reset-failed " \
                   f"{KIMI_UNIT} && sudo systemctl restart {KIMI_UNIT}" in text
        assert dropin(cluster).exists()  # what the notice says is on disk is on disk
        assert events(await store.audit.recent("kimi", limit=100)).count("change.rollback_failed") == 1
        assert not notices(b, "is back on its previous settings")
        # Decided: the service is no longer held by the change; a revert is accepted and puts the unit back.
        sim.set_sudo_allowed(True)
        await sim.wait_for(KIMI_UNIT, "failed", 30)
        reply = await ask_change(b, "revert kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        # The unit is at systemd's start limit (the crash loop): the revert clears it (reset-failed) first.
        await until(lambda: bool(notices(b, "kimi is back on the operator's unit", NOTIFY)
                                 or notices(b, "change #2 on kimi failed", NOTIFY)), 60, "the revert")
        assert not notices(b, "change #2 on kimi failed", NOTIFY), b.notifier.texts(NOTIFY)
        assert not dropin(cluster).exists() and argv_of(sim) == operator_argv


async def test_a_regression_in_the_acceptance_benchmark_rolls_back(make_cluster: MakeCluster,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await bench_cluster(make_cluster, monkeypatch, regression_pct=5)
    data = cluster.config.model_dump()
    sim = cluster.sims["gpu-a"]
    data["services"][0]["changes"] = {"enabled": True, "dropin": f"{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf",
                                      "verify_window": "1s"}
    cluster.config = BotConfig.model_validate(data)
    previous_result(cluster, 1, 1e9)  # an earlier run of the same settings, impossibly fast: far more than 5 % down
    operator_argv = argv_of(sim)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 64 on kimi")
        rid = str(reply.data["request_id"])
        await b.click("restart_confirm", rid, user=BOB)
        await until(lambda: bool(notices(b, "❌ change #1 on kimi failed:", NOTIFY)), 120, "the failure")
        said = notices(b, "❌ change #1 on kimi failed:", NOTIFY)
        assert len(said) == 1 and "the acceptance benchmark shows a regression beyond 5 %" in said[0], said
        assert "↩️ rolling back" in said[0]
        await until(lambda: bool(notices(b, "✅ kimi is back on its previous settings", NOTIFY)), 90, "the rollback")
        assert argv_of(sim) == operator_argv and not dropin(cluster).exists()
        assert not notices(b, "change #1 on kimi kept")


async def test_max_parallel_nodes_after_the_first_at_a_time(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster, nodes=("gpu-a", "gpu-b", "gpu-c"),
                                   changes={"max_parallel": 2, "verify_window": "2s"})
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 96 on kimi")
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "✅ change #1 on kimi kept", NOTIFY)), 120, "kept on all three")
        store = b.rt.store
        assert store is not None
        rows = sorted(await store.audit.recent("kimi", limit=200), key=lambda e: e.at)
        seen = [(e.event.removeprefix("change."), e.node) for e in rows if e.event in ("change.applied",
                                                                                         "change.verified")]
        at = {step: i for i, step in enumerate(seen)}
        # gpu-a alone first; then gpu-b and gpu-c together (two at a time), not one after the other.
        assert at[("verified", "gpu-a")] < at[("applied", "gpu-b")] and at[("verified", "gpu-a")] < at[
            ("applied", "gpu-c")], seen
        assert max(at[("applied", "gpu-b")], at[("applied", "gpu-c")]) < min(at[("verified", "gpu-b")],
                                                                            at[("verified", "gpu-c")]), seen
        for n in ("gpu-a", "gpu-b", "gpu-c"):
            assert flag(argv_of(cluster.sims[n]), "--max-num-seqs") == "96"


async def test_contradictions_the_node_shows_are_refused_before_anyone_is_asked(make_cluster: MakeCluster) -> None:
    cluster = await change_cluster(make_cluster)
    sim = cluster.sims["gpu-a"]
    pid = sim.state(KIMI_UNIT).main_pid
    # Another process listens on a port of the node (the node's own /proc/net/tcp, read over SSH, is the truth).
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        async with bot(cluster.config) as b:
            r = await b.ask(f"set --port {port} on kimi")
            assert not r.ok and not r.actions
            steps = {s["name"]: s for s in r.data["change"]["preflight"]}
            assert steps["port"]["status"] == "failed" and f"port {port} is already taken on gpu-a" in str(r.error)
            # Tensor × pipeline parallel size against the node's GPUs (the simulated nvidia-smi lists 8).
            r = await b.ask("set -tp 8 -pp 2 on kimi")
            assert not r.ok and not r.actions
            assert "tensor 8 × pipeline 2 needs 16 GPUs, and gpu-a has 8" in str(r.error), r.error
            assert not dropin(cluster).exists() and b.restarts_run() == [] and sim.state(KIMI_UNIT).main_pid == pid
    finally:
        taken.close()


async def test_the_preview_names_the_cost_of_the_last_load(make_cluster: MakeCluster,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = await change_cluster(make_cluster)
    async with bot(cluster.config) as b:
        reply = await ask_change(b, "set max-num-seqs 200 on kimi")
        assert "a restart: no earlier load is on record" in render_text(reply)
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "✅ change #1 on kimi kept", NOTIFY)), 60, "kept")
        # The unit asks for an API key the bot does not hold: its smoke completion was skipped, and the kept
        # notice does not claim it (as the load's own ✅ says).
        assert any("smoke test skipped" in t for t in b.notifier.texts(NOTIFY))
        kept = notices(b, "✅ change #1 on kimi kept", NOTIFY)[0]
        assert "ready (the smoke completion was skipped)" in kept and ", the smoke completion" not in kept, kept
        store = b.rt.store
        assert store is not None
        took = (await store.loads.durations("kimi", "gpu-a", limit=1))[0]
        reply = await ask_change(b, "set max-num-seqs 100 on kimi")
        assert f"a restart: the last load took {fmt_duration(took)}" in render_text(reply)
    # With the unit's API key the smoke completion runs and passes: then, and only then, the notice names it.
    monkeypatch.setenv("INFERBOT_TEST_KIMI_KEY", KIMI_API_KEY)
    data = cluster.config.model_dump()
    data["services"][0]["api_key_env"] = "INFERBOT_TEST_KIMI_KEY"
    async with bot(BotConfig.model_validate(data)) as b:
        await b.click("restart_confirm", str(reply.data["request_id"]), user=BOB)
        await until(lambda: bool(notices(b, "✅ change #2 on kimi kept", NOTIFY)), 60, "kept")
        kept = notices(b, "✅ change #2 on kimi kept", NOTIFY)[0]
        assert ": ready, the smoke completion, no crash" in kept and "skipped" not in kept, kept
