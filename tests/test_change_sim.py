"""A settings change on the simulated node behind a real sshd: the node's own (simulated) vLLM parser, and
inferbot's drop-in written through the real remote templates, loaded by the simulated systemd.

The truth here is the simulator: its vLLM checks its arguments with its own table (services/sim/vllm_cli.py),
its systemd reads units with its own syntax module — neither imports the product's parsers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.models import BotConfig, Service
from services.change.catalogue import table_for
from services.change.plan import Plan, plan_change
from services.change.preflight import run_preflight
from services.change.spec import ChangeSpec, parse_text
from services.node import change as remote
from services.node.ssh import NodePool
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port


def proc_argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def exists(path: str) -> bool:
    return Path(path).exists()


def proc_env(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(e.partition("=")[::2] for e in raw if e)


async def kimi(make_cluster: MakeCluster, **changes: Any) -> tuple[SimCluster, SimNode, Service]:
    """The Kimi unit on a simulated node, changes enabled, inferbot's drop-in under the node's root."""
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())})
    sim = cluster.sims["gpu-a"]
    dropin = f"{sim.unit_dir}/{KIMI_UNIT}.d/90-inferbot.conf"
    data = cluster.config.model_dump()
    data["services"][0]["changes"] = {"enabled": True, "dropin": dropin, **changes}
    cluster.config = BotConfig.model_validate(data)
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    return cluster, sim, cluster.config.services[0]


async def apply(pool: NodePool, cluster: SimCluster, service: Service, plan: Plan) -> None:
    node = cluster.node("gpu-a")
    if plan.dropin_text is not None:
        step = await remote.write_dropin(pool, node, service, plan.dropin_text)
    else:
        step = await remote.remove_dropin(pool, node, service)
    assert step.ok, step.summary()
    assert (await remote.daemon_reload(pool, node, cluster.config.access)).ok


async def test_node_parser_accepts_a_good_line_and_names_a_bad_value(make_cluster: MakeCluster) -> None:
    cluster, _, service = await kimi(make_cluster)
    node = cluster.node("gpu-a")
    pool = NodePool()
    try:
        spec = parse_text("set", "max-num-seqs 256 --speculative-config '{\"method\":\"ngram\"}'")
        assert isinstance(spec, ChangeSpec)
        pf = await run_preflight(pool, node, service, spec, change_id="#1", version="0.20.1")
        steps = {s.name: s for s in pf.steps}
        assert pf.ok, pf.steps
        assert steps["parser"].status == "ok"
        assert "vLLM 0.20.1's own parser on gpu-a accepts" in steps["parser"].detail
        assert pf.checked_with == "vLLM 0.20.1's own parser on gpu-a"
        # A value inferbot's table lets through (max-model-len "auto") that this vLLM refuses: the node says which.
        spec = parse_text("set", "--max-model-len auto")
        assert isinstance(spec, ChangeSpec)
        pf = await run_preflight(pool, node, service, spec, change_id="#2", version="0.20.1")
        assert not pf.ok and pf.failure is not None and pf.failure.name == "parser"
        assert "argument --max-model-len: invalid int value: 'auto'" in pf.failure.detail
        # The check reads only stdin: a bad flag in the argv is named by the node's parser too.
        parsed = await remote.parse_on_node(pool, node, f"{cluster.sims['gpu-a'].root}/opt/vllm/venv/bin/vllm",
                                            ["/models/x", "--max-num-seqs", "abc"])
        assert parsed.loaded and not parsed.ok
        assert parsed.error == "vllm serve: error: argument --max-num-seqs: invalid int value: 'abc'"
    finally:
        await pool.close()


async def test_node_parser_refuses_a_program_path_of_an_odd_shape(make_cluster: MakeCluster) -> None:
    cluster, _, _ = await kimi(make_cluster)
    pool = NodePool()
    try:
        parsed = await remote.parse_on_node(pool, cluster.node("gpu-a"), "/opt/x; touch /tmp/owned", ["m"])
        assert not parsed.loaded and "unexpected shape" in (parsed.error or "")
        assert not exists("/tmp/owned")
    finally:
        await pool.close()


async def test_a_dropin_written_through_the_template_is_what_the_process_gets(make_cluster: MakeCluster) -> None:
    cluster, sim, service = await kimi(make_cluster)
    node = cluster.node("gpu-a")
    table, _ = table_for("0.20.1")
    pool = NodePool()
    try:
        before_pid = sim.state(KIMI_UNIT).main_pid
        operator_argv = proc_argv(before_pid)
        spec = parse_text("set", "max-num-seqs 256 --no-trust-remote-code --chat-template 'a b %i $X \"q\" \\\\'")
        assert isinstance(spec, ChangeSpec)
        read = await remote.read_unit(pool, node, service)
        assert read.cat_ok and read.source.dropin_text is None and read.gpu_count == 8
        plan = plan_change(read.source, spec, table, "#3")
        assert isinstance(plan, Plan) and plan.action == "write"
        await apply(pool, cluster, service, plan)
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
        assert argv[argv.index("--max-num-seqs") + 1] == "256"
        assert argv[argv.index("--chat-template") + 1] == 'a b %i $X "q" \\\\'  # single quotes keep both
        assert "--no-trust-remote-code" in argv and "--trust-remote-code" not in argv
        # A second change merges into the same drop-in; the first one's flags stay.
        env_spec = parse_text("set", "env NCCL_PROTO=Simple")
        assert isinstance(env_spec, ChangeSpec)
        read = await remote.read_unit(pool, node, service)
        plan = plan_change(read.source, env_spec, table, "#4")
        assert isinstance(plan, Plan) and plan.previous is not None
        assert plan.delta.set_flags["max-num-seqs"] == "256" and plan.delta.set_env == {"NCCL_PROTO": "Simple"}
        await apply(pool, cluster, service, plan)
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        pid = sim.state(KIMI_UNIT).main_pid
        assert proc_env(pid)["NCCL_PROTO"] == "Simple" and "--max-num-seqs" in proc_argv(pid)
        # Back to the operator's unit: the drop-in goes, the process gets the operator's argv again.
        read = await remote.read_unit(pool, node, service)
        back = parse_text("change", "unset max-num-seqs --set trust-remote-code unset chat-template")
        assert isinstance(back, ChangeSpec)
        # (the operator's own value of a variable: inferbot's setting of it is dropped; `unset env` would remove it)
        undo = plan_change(read.source, back.model_copy(update={"set_env": {"NCCL_PROTO": "LL"}}), table, "#5")
        assert isinstance(undo, Plan) and undo.action == "remove", undo
        await apply(pool, cluster, service, undo)
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        pid = sim.state(KIMI_UNIT).main_pid
        assert proc_argv(pid) == operator_argv and proc_env(pid)["NCCL_PROTO"] == "LL"
    finally:
        await pool.close()


async def test_a_value_the_simulated_vllm_refuses_fails_the_start(make_cluster: MakeCluster) -> None:
    cluster, sim, service = await kimi(make_cluster)
    node = cluster.node("gpu-a")
    table, _ = table_for("0.20.1")
    pool = NodePool()
    try:
        spec = parse_text("set", "--max-model-len auto")
        assert isinstance(spec, ChangeSpec)
        read = await remote.read_unit(pool, node, service)
        plan = plan_change(read.source, spec, table, "#6")
        assert isinstance(plan, Plan)
        await apply(pool, cluster, service, plan)
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "failed", 30)
        journal = sim.journal_path().read_text()
        assert "vllm serve: error: argument --max-model-len: invalid int value: 'auto'" in journal
        # Rolling back (the drop-in removed) and clearing the failure starts the operator's settings again.
        assert (await remote.remove_dropin(pool, node, service)).ok
        assert (await remote.daemon_reload(pool, node, cluster.config.access)).ok
        assert (await remote.reset_failed(pool, node, service)).ok
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
    finally:
        await pool.close()


async def test_without_sudo_nothing_is_written(make_cluster: MakeCluster) -> None:
    cluster, sim, service = await kimi(make_cluster)
    sim.set_sudo_allowed(False)
    pool = NodePool()
    try:
        step = await remote.write_dropin(pool, cluster.node("gpu-a"), service, "[Service]\n")
        assert not step.ok and "password is required" in step.summary()
        assert not exists(service.dropin_path())
    finally:
        await pool.close()


async def test_apply_roll_back_and_revert_through_the_engine(make_cluster: MakeCluster) -> None:
    from services.change.apply import apply_plan, restore

    cluster, sim, service = await kimi(make_cluster)
    node, policy = cluster.node("gpu-a"), cluster.config.access
    pool = NodePool()
    try:
        operator_argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
        first = parse_text("set", "max-num-seqs 256")
        assert isinstance(first, ChangeSpec)
        pf = await run_preflight(pool, node, service, first, change_id="#7", version="0.20.1", node_parser=False)
        assert pf.ok and pf.plan is not None
        assert (await apply_plan(pool, node, service, pf.plan, policy)).ok
        second = parse_text("set", "--gpu-memory-utilization 0.5")
        assert isinstance(second, ChangeSpec)
        pf2 = await run_preflight(pool, node, service, second, change_id="#8", version="0.20.1", node_parser=False)
        assert pf2.ok and pf2.plan is not None and pf2.plan.previous == pf.plan.delta
        assert (await apply_plan(pool, node, service, pf2.plan, policy)).ok
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.5" and "--max-num-seqs" in argv
        # Roll back #8: inferbot's change is #7's again.
        back = await restore(pool, node, service, pf2.plan.previous, policy, change_id="#8", version="0.20.1",
                             clear_start_limit=True)
        assert back.ok, back.summary()
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        argv = proc_argv(sim.state(KIMI_UNIT).main_pid)
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.95" and "--max-num-seqs" in argv
        # Revert: the operator's unit alone.
        assert (await restore(pool, node, service, None, policy, change_id="#9")).ok
        assert not exists(service.dropin_path())
        await sim.restart_unit(KIMI_UNIT)
        await sim.wait_for(KIMI_UNIT, "ready", 45)
        assert proc_argv(sim.state(KIMI_UNIT).main_pid) == operator_argv
        # A step that fails says what is on disk and how to go back by hand.
        assert (await apply_plan(pool, node, service, pf.plan, policy)).ok
        sim.set_sudo_allowed(False)
        failed = await restore(pool, node, service, None, policy, change_id="#10")
        assert not failed.ok and failed.on_disk is not None and "max-num-seqs 256" in failed.on_disk
        assert "[redacted]" in failed.on_disk and "sk-" not in failed.on_disk  # the unit's API key stays hidden
        assert failed.summary().endswith(f"sudo systemctl restart {KIMI_UNIT}`")
    finally:
        await pool.close()
