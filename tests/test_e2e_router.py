"""Issue 10 end to end over a real sshd and the simulated cluster: questions about restarts never offer one,
unknown names are reported after every word, aliases pick their service, flag questions answer the flag,
text and ``--json`` give the same answer, and ``ok`` means "something asked for was answered"."""

from __future__ import annotations

from typing import Any

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from config.models import BotConfig, Node, Service
from handlers.context import Asker
from handlers.reply import Reply
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port

ALICE = "U0ALICE"
QUESTIONS = ["why did kimi restart last night?", "when was the last restart of kimi", "who can restart kimi?",
             "did kimi restart overnight", "how do I restart kimi", "should I restart kimi?", "restart history",
             "has kimi restarted", "kimi restarted?", "restarts of kimi today"]
NEGATIONS = ["don't restart kimi", "never restart kimi", "do not restart kimi"]


async def ready_kimi(make_cluster: MakeCluster) -> SimCluster:
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())},
                                 access={"restart_users": [ALICE]})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    return cluster


def with_dead_node(config: BotConfig) -> BotConfig:
    """``config`` plus a node gpu-b on a closed loopback port, serving qwen."""
    live = config.nodes[0]
    dead = Node(name="gpu-b", host="127.0.0.1", port=free_port(), user=live.user, key_file=live.key_file,
                known_hosts=live.known_hosts, timeout=3)
    return config.model_copy(update={
        "nodes": [*config.nodes, dead],
        "services": [*config.services, Service(name="qwen", node="gpu-b", unit="vllm-qwen.service")]})


def confirm_buttons(reply: Reply) -> list[str]:
    return [a.action_id for a in reply.actions if a.action_id == "restart_confirm"]


async def test_restart_questions_never_offer_a_restart_to_an_allowed_user(make_cluster: MakeCluster) -> None:
    cluster = await ready_kimi(make_cluster)
    alice = Asker(surface="slack", user_id=ALICE, channel_id="C0OPS", thread_ts="1.1")
    async with runtime(cluster.config) as rt:
        for text in QUESTIONS:
            reply = await answer(text, rt.context(alice))
            assert reply.intent == "restarts" and confirm_buttons(reply) == [], text
            assert reply.ok, text
            out = render_text(reply)
            assert "who may restart" in out and "<@U0ALICE>" in out and "restart kimi" in out, text
            assert reply.data["services"][0]["n_restarts"] == 0 and reply.data["services"][0]["since"]
        for text in NEGATIONS:
            reply = await answer(text, rt.context(alice))
            assert reply.intent == "restarts" and confirm_buttons(reply) == [] and reply.ok
            assert "I won't restart anything" in render_text(reply)
        # The imperative still asks for the confirmation (and nothing above restarted kimi).
        reply = await answer("restart kimi", rt.context(alice))
        assert confirm_buttons(reply) == ["restart_confirm"]
        assert rt.store is not None
        events = [e.event for e in await rt.store.audit.recent(service="kimi")]
        assert events == ["restart.requested"]
        # The request now shows in the restart history.
        reply = await answer("when was the last restart of kimi", rt.context(alice))
        assert [r["event"] for r in reply.data["services"][0]["restarts"]] == ["restart.requested"]


async def test_unknown_names_aliases_and_flags(make_cluster: MakeCluster) -> None:
    cluster = await ready_kimi(make_cluster)
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="json"))
        for text in ("status gpu-c", "gpus gpu-c", "is gpu-c up?", "settings kimi2", "logs kimi2",
                     "throughput for kimi2", "compare kimi2 and kimi"):
            reply = await answer(text, ctx)
            out = render_text(reply)
            assert reply.ok is False and reply.title == "Unknown service or node", text
            assert "I don't know a service or node called" in out and "did you mean" in out, text
            assert "services" not in reply.data or reply.data["services"] == ["kimi"], text
        # A served model name or a model path is an alias once the service has been seen.
        first = await answer("settings", ctx)
        assert first.ok
        for text in ("settings for kimi-k2.5", "settings for /shared/kimi-k2.5-int4", "status of kimi-k2.5-int4"):
            reply = await answer(text, ctx)
            assert reply.ok and [s["service"] for s in reply.data["services"]] == ["kimi"], text
        # Flag questions answer the flag; GPU questions answer the GPUs.
        reply = await answer("what is the gpu-memory-utilization of kimi", ctx)
        assert reply.intent == "settings" and reply.ok
        assert reply.data["flag"] == {"name": "gpu-memory-utilization", "values": [
            {"service": "kimi", "node": "gpu-a", "set": True, "value": "0.95"}]}
        out = render_text(reply)
        assert "--gpu-memory-utilization  0.95" in out and "--max-model-len" not in out
        reply = await answer("what's --max-model-len on kimi", ctx)
        assert reply.data["flag"]["values"][0]["value"] == "131072"
        reply = await answer("tensor parallel size of kimi", ctx)
        assert reply.data["flag"]["values"][0]["value"] == "8"
        for text in ("gpu utilization", "what's the gpu utilization on gpu-a", "GPU util", "gpu usage", "vram",
                     "gpu memory"):
            reply = await answer(text, ctx)
            assert reply.intent == "gpus" and reply.ok and reply.data["nodes"][0]["gpus"], text


async def test_text_and_json_give_the_same_answer(make_cluster: MakeCluster) -> None:
    cluster = await ready_kimi(make_cluster)
    async with runtime(cluster.config) as rt:
        for text in ("restart kimi", "help", "status gpu-c", "don't restart kimi", "asdf qwer"):
            as_text = await answer(text, rt.context(Asker(surface="cli")))
            as_json = await answer(text, rt.context(Asker(surface="json")))
            assert render_text(as_text) == render_text(as_json), text
            assert as_text.ok == as_json.ok and as_text.intent == as_json.intent, text
        refusal = await answer("restart kimi", rt.context(Asker(surface="json")))
        assert refusal.ok is False and "inferbot restart kimi" in render_text(refusal)


async def ok_of(config: BotConfig, texts: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    async with runtime(config) as rt:
        for text in texts:
            reply = await answer(text, rt.context(Asker(surface="json")))
            out[text] = reply.to_json(render_text(reply))
    return out


async def test_ok_for_every_intent(make_cluster: MakeCluster) -> None:
    cluster = await ready_kimi(make_cluster)
    # "restart" alone is no order (it names no service): the restart information, asking which one.
    answered = ["settings", "status", "throughput", "gpus", "logs kimi", "what changed on kimi", "audit", "help",
                "who can restart kimi?", "don't restart kimi", "what's --max-model-len on kimi", "", "restart"]
    refused = ["status gpu-c", "settings for nosuch", "asdf qwer zxcv", "restart kimi", "compare kimi"]
    got = await ok_of(cluster.config, answered + refused)
    assert {t: got[t]["ok"] for t in answered} == dict.fromkeys(answered, True)
    assert {t: got[t]["ok"] for t in refused} == dict.fromkeys(refused, False)
    for t in refused:
        assert got[t]["error"], t
    # One node down of two: still answered, and the failure is listed.
    partial = await ok_of(with_dead_node(cluster.config), ["settings", "status", "gpus", "throughput"])
    for t, data in partial.items():
        assert data["ok"] is True and data["data"]["unreachable"] == ["gpu-b"], t
    # Every targeted node down: nothing asked for was answered.
    down = await ok_of(with_dead_node(cluster.config), ["settings for qwen", "status of gpu-b", "gpus on gpu-b",
                                                        "throughput for qwen", "logs qwen"])
    for t, data in down.items():
        assert data["ok"] is False and data["data"]["unreachable"] == ["gpu-b"] and data["error"], t
    mixed = await ok_of(with_dead_node(cluster.config), ["compare kimi and qwen", "restart history", "compare kimi"])
    assert mixed["compare kimi and qwen"]["intent"] == "compare" and mixed["compare kimi and qwen"]["ok"] is False
    assert mixed["restart history"]["ok"] is True  # who may restart and how, and kimi's restarts, were answered
    assert mixed["compare kimi"]["ok"] is False


async def test_a_fresh_bot_learns_served_model_names_from_the_nodes(make_cluster: MakeCluster) -> None:
    """Issue 23: "settings for kimi-k2.5" on a bot that has never probed (nothing in its store) answers kimi."""
    cluster = await ready_kimi(make_cluster)
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="json"))
        assert rt.store is not None
        assert await rt.store.snapshots.latest("kimi", "gpu-a", limit=1) == []  # nothing seen yet
        for text in ("settings for kimi-k2.5", "is k2.5 up?", "logs for /shared/kimi-k2.5-int4"):
            reply = await answer(text, ctx)
            assert reply.ok and reply.title != "Unknown service or node", text
            assert reply.data["understood"]["services"] == ["kimi"], text
        reply = await answer("status of llama", ctx)
        assert reply.title == "Unknown service or node" and reply.data["unknown"] == ["llama"]


async def test_env_questions_answer_the_units_environment(make_cluster: MakeCluster) -> None:
    """Issue 23, point 6: a variable by name or in everyday words, its value per service and where it is set;
    a secret is "[redacted]" and set (never the flag of a similar name, "not set")."""
    cluster = await ready_kimi(make_cluster)
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="json"))
        reply = await answer("what's nccl proto on kimi", ctx)
        assert reply.intent == "settings" and "flag" not in reply.data
        [v] = reply.data["env_var"]["values"]
        assert reply.data["env_var"]["name"] == "NCCL_PROTO"
        assert (v["service"], v["set"], v["value"], v["source"]) == ("kimi", True, "LL", "Environment= in the unit")
        reply = await answer("is HF_TOKEN set on kimi", ctx)
        [v] = reply.data["env_var"]["values"]
        assert v["set"] is True and v["value"] == "[redacted]" and v["source"].startswith("EnvironmentFile ")
        out = render_text(reply)
        assert "[redacted]" in out and "not set" not in out and "hf_" not in out
        reply = await answer("are we still on NCCL_PROTO=LL?", ctx)
        assert reply.data["env_var"]["matches"] is True and "Yes — NCCL_PROTO=LL." in render_text(reply)
        reply = await answer("which NCCL_ALGO is kimi on, still Tree?", ctx)
        assert reply.data["env_var"]["matches"] is False and "No — NCCL_ALGO is Ring, not Tree." in render_text(reply)
        reply = await answer("the tp for kimi is 8 right", ctx)
        assert reply.data["flag"]["name"] == "tensor-parallel-size" and reply.data["flag"]["matches"] is True


async def test_ties_ask_back_and_unplaced_text_gets_four_lines_at_most(make_cluster: MakeCluster) -> None:
    """Issue 23, points 5 and 8: two readings nearly as good → a short question with a button for each;
    text it cannot place → at most four lines (what it may have meant, "`help` for everything")."""
    cluster = await ready_kimi(make_cluster)
    async with runtime(cluster.config) as rt:
        ctx = rt.context(Asker(surface="cli"))
        reply = await answer("kimi logs or status", ctx)
        assert reply.ok is False and [a.value for a in reply.actions] == ["logs kimi", "status kimi"]
        assert reply.data["understood"]["asked"] is True and reply.data["suggestions"] == ["logs kimi", "status kimi"]
        assert "Did you mean `logs kimi` or `status kimi`?" in render_text(reply)
        for text in ("make me a sandwich", "asdf qwer zxcv", "hmm"):
            reply = await answer(text, ctx)
            out = render_text(reply)
            assert reply.ok is False and len(out.strip().splitlines()) <= 4, text
            assert "`help` for everything" in out and "Ask me" not in out, text
        reply = await answer("thanks!", ctx)
        assert reply.intent == "smalltalk" and len(render_text(reply).strip().splitlines()) == 1
        reply = await answer("kimi status? also gpus", ctx)
        assert reply.intent == "status" and reply.data["suggestions"] == ["gpus kimi"]
        assert "You also asked: `gpus kimi`" in render_text(reply)
