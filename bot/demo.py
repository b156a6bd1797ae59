"""``inferbot demo``: the built-in simulated cluster on loopback, asked exactly as ``inferbot ask`` would.

Two simulated GPU nodes, each behind its own SSH server on 127.0.0.1 (real SSH protocol, key auth,
host keys checked): the Kimi-K2.5 INT4 deployment 13 minutes into its 30-minute load, and a Qwen3 node
serving traffic. Nothing leaves loopback; no config, Slack or GPU is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import re
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncssh

from bot.ask_once import ask
from bot.router import route
from config.models import BotConfig, Node, Service, StateSettings
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, QWEN_UNIT, NodeScenario, kimi_node, qwen_node
from services.sim.sshserver import LoopbackSSH
from services.store.store import Store

SETTLE_S = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _login_name() -> str:
    name = getpass.getuser()
    # The config only accepts Unix-style user names; the loopback server accepts any name anyway.
    return name if re.match(r"^[a-z_][a-z0-9_-]{0,31}$", name) else "demo"


@contextlib.asynccontextmanager
async def demo_cluster(
    scenarios: list[tuple[str, str, NodeScenario, str]], workdir: Path, bench: dict[str, str] | None = None
) -> AsyncIterator[BotConfig]:
    """Start simulated nodes ``(node, service, scenario, unit)`` behind loopback SSH; yield their config."""
    keydir = workdir / "keys"
    keydir.mkdir(parents=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(keydir / "id_ed25519"))
    key.write_public_key(str(keydir / "id_ed25519.pub"))
    sims: list[SimNode] = []
    servers: list[LoopbackSSH] = []
    nodes: list[Node] = []
    services: list[Service] = []
    known_hosts = keydir / "known_hosts"
    try:
        for node_name, service_name, scenario, unit in scenarios:
            sim = SimNode(workdir / node_name, scenario)
            sims.append(sim)
            await sim.start()
            server = LoopbackSSH(keydir, env=sim.shell_env())
            servers.append(server)
            await server.start(keydir / "id_ed25519.pub")
            with known_hosts.open("a") as f:
                f.write(server.known_hosts_line() + "\n")
            nodes.append(Node(name=node_name, host="127.0.0.1", port=server.port, user=_login_name(),
                              key_file=str(keydir / "id_ed25519"), known_hosts=str(known_hosts)))
            bench_dir = (bench or {}).get(node_name)
            services.append(Service(name=service_name, node=node_name, unit=unit,
                                    bench_dir=sim.bench_dir if bench_dir == "auto" else bench_dir))
        config = BotConfig(nodes=nodes, services=services, state=StateSettings(dir=str(workdir / "state")),
                           source="(built-in demo cluster)")
        await _seed_history(config)
        await asyncio.wait_for(_settle(sims, scenarios), SETTLE_S)
        yield config
    finally:
        for server in servers:
            await server.stop()
        for sim in sims:
            await sim.stop()


async def _seed_history(config: BotConfig) -> None:
    """The demo's Kimi has loaded before (30m 02s), so ETAs and notices have a "last time" to use."""
    os.makedirs(config.state.directory(), exist_ok=True)
    store = Store(config.state.database_url())
    try:
        start = datetime.now(UTC) - timedelta(days=2)
        await store.loads.record("kimi", "gpu-a", "demo-previous-load", start, start + timedelta(seconds=1802),
                                 "ready", 1802.0)
    finally:
        await store.close()


async def run_demo(question: str, as_json: bool, png: str | None = None) -> int:
    """Answer ``question`` on the demo cluster and print it like ``inferbot ask``."""
    with tempfile.TemporaryDirectory(prefix="inferbot-demo-") as tmp:
        qwen = qwen_node(port=_free_port())
        # vLLM logs its stats line every 10 s by default; 2 s keeps the demo quick.
        qwen.units[0].profile.stats_interval_s = 2.0
        scenarios = [
            ("gpu-a", "kimi", kimi_node(port=_free_port()), KIMI_UNIT),
            ("gpu-b", "qwen", qwen, QWEN_UNIT),
        ]
        async with demo_cluster(scenarios, Path(tmp), bench={"gpu-a": "auto"}) as config:
            if route(question, config).command.name.startswith("chart_"):
                await _seed_charts(config)
            return await ask(config, question, as_json, png=png)


async def _settle(sims: list[SimNode], scenarios: list[tuple[str, str, NodeScenario, str]]) -> None:
    """Wait until the scenario is in place: a load visibly in progress, a long-running server ready."""
    for sim, (_, _, scenario, _) in zip(sims, scenarios, strict=True):
        for u in scenario.units:
            mid_load = u.profile.started_ago_s < u.profile.total_load_s()
            await sim.wait_for(u.name, "loading" if mid_load else "ready", SETTLE_S)
            # The progress line is what the phase, progress bar and ETA come from; the stats line is
            # where the settings answer's live tok/s comes from.
            marker = "Completed |" if mid_load else ("Avg generation throughput" if u.profile.traffic_tps else "")
            if marker:
                await asyncio.to_thread(_wait_for_text, sim.journal_path(), marker, SETTLE_S)


def _wait_for_text(path: Path, text: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while text not in path.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.05)


async def _seed_charts(config: BotConfig) -> None:
    """A chart question: give the fresh demo database the history a running bot would have by now."""
    from bot.demo_charts import seed_chart_history

    store = Store(config.state.database_url())
    try:
        await seed_chart_history(store, datetime.now(UTC))
    finally:
        await store.close()
