"""A down node's reason is said once, however many services it took with it (issue 22).

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
