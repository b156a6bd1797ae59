"""handlers/down_nodes.py: a down node's reason is said once, however many services it took with it (issue 22).

``status`` of 1,000 services on one down node printed the same reason 1,000 times. Through the real CLI, on
a simulated node behind a real sshd (up) and a node on a closed loopback port (down) carrying 1,000 services:
every answer that lists services per node says the down node's reason once, names its services ("kimi2,
svc0001, svc0002, and 997 more"), and keeps the up node's own cards; ``--json`` keeps one object per service
and names each node's services in ``data.nodes[].services``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from handlers.down_nodes import DownNodes, names_words, node_down_sections
from services.cluster import NodeReport
from services.models import NodeError
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_cli_local_input import INFERBOT
from tests.test_e2e_faults import _toml
from tests.test_e2e_live import wait_journal
from tests.test_e2e_settings import kimi

DOWN = 1000
REFUSED = "connection refused on 127.0.0.4:9"


def down_names() -> list[str]:
    return ["kimi2"] + [f"svc{i:04d}" for i in range(1, DOWN)]


def config_with_a_down_node(cluster: SimCluster) -> Path:
    text = _toml(cluster).replace("[state]", "\n".join(
        ["[[nodes]]", 'name = "gpu-b"', 'host = "127.0.0.4"', "port = 9", 'user = "inferbot"',
         f'known_hosts = "{cluster.known_hosts}"', 'timeout = "2s"', ""]
        + [line for name in down_names()
           for line in ("[[services]]", f'name = "{name}"', 'node = "gpu-b"', f'unit = "vllm-{name}.service"', "")]
        + ["[state]"]))
    path = Path(cluster.config.state.directory()) / "inferbot.toml"
    path.write_text(text)
    return path


def ask(config: Path, *question: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "INFERBOT_"))}
    env["HOME"] = tempfile.gettempdir()
    done = subprocess.run([INFERBOT, "ask", *question, "--config", str(config)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr
    return done


async def test_every_answer_says_a_down_nodes_reason_once(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    await wait_journal(cluster, "gpu-a", "Avg prompt throughput")
    config = config_with_a_down_node(cluster)
    named = "kimi2, svc0001, svc0002, and 997 more"
    for question, up_card in (("status", "kimi on gpu-a"), ("what are current settings?", "kimi on gpu-a"),
                              ("throughput", "kimi on gpu-a"), ("gpu status", "GPUs on gpu-a"),
                              ("logs gpu-b", None), ("what changed?", "kimi on gpu-a"),
                              ("restart history", "kimi on gpu-a")):
        text = (await asyncio.to_thread(ask, config, question)).stdout
        assert text.count(REFUSED) == 1, (question, text.count(REFUSED), text[:3000])
        assert text.count("gpu-b unreachable\n") == 1 and text.count(named) == 1, (question, text[:3000])
        assert "svc0500 on gpu-b" not in text or question in ("what changed?", "restart history"), question
        assert up_card is None or up_card in text, (question, text[:3000])

    out: dict[str, Any] = json.loads((await asyncio.to_thread(ask, config, "status", "--json")).stdout)
    services = out["data"]["services"]
    assert [s["service"] for s in services] == ["kimi", *down_names()]  # one object per service, as before
    assert all(s["state"] == "unreachable" and REFUSED in s["reason"] for s in services[1:])
    assert services[0]["state"] == "ready"
    nodes = {n["node"]: n for n in out["data"]["nodes"]}
    assert nodes["gpu-a"]["services"] == ["kimi"] and nodes["gpu-a"]["ok"] is True
    assert nodes["gpu-b"]["services"] == down_names() and REFUSED in nodes["gpu-b"]["error"]["reason"]
    assert out["data"]["unreachable"] == ["gpu-b"] and out["text"].count(REFUSED) == 1


# -- the card itself ---------------------------------------------------------------------------------------

REFUSED_ERROR = NodeError(kind="refused", reason=REFUSED, fix="start sshd on gpu-b, or fix host/port in [[nodes]]")


def test_names_are_spelled_out_up_to_three_then_counted() -> None:
    assert names_words(["kimi"]) == "kimi"
    assert names_words(["kimi", "qwen"]) == "kimi and qwen"
    assert names_words(["kimi", "qwen", "llama"]) == "kimi, qwen, and llama"
    assert names_words(down_names()) == "kimi2, svc0001, svc0002, and 997 more"
    assert names_words([f"s{i}" for i in range(1004)]) == "s0, s1, s2, and 1,001 more"


def test_a_down_node_gets_one_card_at_its_first_service_and_none_after() -> None:
    down = DownNodes([NodeReport(node="gpu-a", ok=True), NodeReport(node="gpu-b", ok=False, error=REFUSED_ERROR)],
                     [("kimi", "gpu-a"), ("kimi2", "gpu-b"), ("qwen", "gpu-b")])
    assert "gpu-b" in down and "gpu-a" not in down
    assert down.card("gpu-a") == []  # a node that answered has its services' own cards
    card = down.card("gpu-b")
    assert [(s.kind, s.title, s.text, s.status) for s in card] == [
        ("header", "gpu-b unreachable", None, "error"),
        ("text", None, f"{REFUSED} — kimi2 and qwen", None),
        ("context", "Fix", "start sshd on gpu-b, or fix host/port in [[nodes]]", None)]
    assert down.card("gpu-b") == [] and down.rest() == []  # said once


def test_a_busy_bot_does_not_blame_the_node() -> None:
    busy = NodeReport(node="gpu-a", ok=False, error=NodeError(kind="busy", reason="inferbot is busy: 64 questions "
                                                                              "are waiting for gpu-a's channels"))
    down = DownNodes([busy], [("kimi", "gpu-a")])
    assert down.words("gpu-a") == "gpu-a not asked (inferbot is busy)"
    header, text = down.card("gpu-a")
    assert (header.title, header.status) == ("gpu-a not asked (inferbot is busy)", "warn")
    assert "unreachable" not in (text.text or "")


def test_a_down_node_none_of_whose_services_was_shown_is_given_at_the_end() -> None:
    silent = NodeReport(node="gpu-c", ok=False, error=None)  # a discovery node: no configured service
    down = DownNodes([silent], [])
    assert [s.text for s in node_down_sections(silent, [])][1] == "no answer"
    assert [s.title for s in down.rest()] == ["gpu-c unreachable", None]
    assert down.rest() == []
