"""``record``: what a simulated Kimi node's probes print, loading and then ready with traffic, saved for replay."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from config.models import BotConfig
    from services.sim.scenarios import NodeScenario
    from tests.sshd import ClientKey


async def record(out: Path) -> dict[str, Any]:
    """Start one simulated Kimi node (loading, then a fast one that becomes ready) and save the probes' answers."""
    from services.sim.scenarios import KIMI_UNIT, kimi_node
    from tests.sshd import ClientKey, free_port, login_user

    work = Path(tempfile.mkdtemp(prefix="inferbot-rec-"))
    os.chmod(work, 0o755)
    user = login_user()
    key = ClientKey(work)
    saved: dict[str, Any] = {}
    try:
        for label, scenario in (
            ("loading", kimi_node(port=free_port(), hostname="node-01")),
            ("ready", kimi_node(fast=True, port=free_port(), hostname="node-01", traffic_tps=900.0)),
        ):
            saved |= await _record_scenario(out, work, label, scenario, key, user)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out / "meta.json").write_text(json.dumps({"unit": KIMI_UNIT, "files": saved}, indent=1))
    return saved


async def _record_scenario(out: Path, work: Path, label: str, scenario: NodeScenario, key: ClientKey,
                           user: str) -> dict[str, Any]:
    """Run ``scenario`` behind a real sshd, wait until it is ``label`` (loading or ready), save its answers."""
    from services.sim.node import SimNode
    from services.sim.scenarios import KIMI_UNIT
    from tests.sshd import start_sshd

    root = work / label
    root.mkdir()
    os.chmod(root, 0o755)
    sim = SimNode(root, scenario, run_as=user if os.geteuid() == 0 else None)
    await sim.start()
    sshd = start_sshd(key, sim.shell_env(), "127.0.0.1", user)
    try:
        if label == "ready":
            await sim.wait_for(KIMI_UNIT, "ready", 120)
            await asyncio.sleep(2)  # a stats line in the journal, tokens flowing
        else:
            await asyncio.sleep(3)
        (work / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
        config = _one_node_config(sshd.host, sshd.port, sshd.user, str(key.private), work / "known_hosts",
                                  sim.bench_dir)
        return await _save_answers(config, out, label)
    finally:
        sshd.stop()
        await sim.stop()


def _one_node_config(host: str, port: int, user: str, key_file: str, known_hosts: Path, bench_dir: str) -> BotConfig:
    """The bot's config for the one recorded node and its Kimi service."""
    from config.models import BotConfig
    from services.sim.scenarios import KIMI_UNIT

    return BotConfig.model_validate({
        "nodes": [{"name": "node-01", "host": host, "port": port, "user": user, "key_file": key_file,
                   "known_hosts": str(known_hosts)}],
        "services": [{"name": "kimi-01", "node": "node-01", "unit": KIMI_UNIT, "bench_dir": bench_dir}],
    })


async def _save_answers(config: BotConfig, out: Path, label: str) -> dict[str, Any]:
    """Ask the node with the settings and the watcher's probe; write each command and what it printed."""
    from handlers.settings import SETTINGS_PROBE
    from handlers.watcher import WATCH_PROBE
    from services.cluster import Cluster
    from services.node.ssh import NodePool

    pool = NodePool()
    cluster = Cluster(config, pool)
    real_run = pool.run
    captured: list[tuple[str, str]] = []

    async def rec_run(*a: Any, _real: Any = real_run, _cap: Any = captured, **kw: Any) -> Any:
        result = await _real(*a, **kw)
        _cap.append((a[1], result.stdout))
        return result

    pool.run = rec_run  # type: ignore[method-assign]
    saved: dict[str, Any] = {}
    for what, opts in (("settings", SETTINGS_PROBE), ("watch", WATCH_PROBE)):
        captured.clear()
        await cluster.probe_node(config.nodes[0], config.services, opts)
        command, stdout = captured[-1]
        (out / f"{what}-{label}.out").write_text(stdout)
        (out / f"{what}-{label}.cmd").write_text(command)
        saved[f"{what}-{label}"] = {"bytes": len(stdout.encode()), "command_bytes": len(command)}
    await pool.close()
    return saved
