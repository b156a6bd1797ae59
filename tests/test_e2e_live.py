"""End to end over a real sshd: status with phases and ETA, throughput, bench, GPUs, logs, changes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from handlers.context import Asker
from services.sim.scenarios import KIMI_UNIT, file_log_unit
from services.store.store import Store
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_e2e_faults import _toml
from tests.test_e2e_settings import kimi, no_secrets


async def ask(cluster: SimCluster, text: str) -> tuple[dict[str, Any], str]:
    async with runtime(cluster.config) as rt:
        reply = await answer(text, rt.context(Asker(surface="json")))
    out = render_text(reply)
    return reply.to_json(out), out


def _contains(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


async def wait_file(path: Path, text: str, limit: float = 45) -> None:
    """Wait until ``text`` appears in ``path`` (a journal or log file the simulated node writes)."""
    for _ in range(int(limit / 0.05)):
        if _contains(path, text):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(text)


async def wait_journal(cluster: SimCluster, node: str, text: str, limit: float = 45) -> None:
    await wait_file(cluster.sims[node].journal_path(), text, limit)


def with_bench(cluster: SimCluster) -> None:
    svc = cluster.config.services[0].model_copy(update={"bench_dir": cluster.sims["gpu-a"].bench_dir})
    cluster.config = cluster.config.model_copy(update={"services": [svc]})


async def test_status_while_loading_weights_has_progress_and_shard_eta(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(shards=400, seconds_per_shard=0.05)})
    await wait_journal(cluster, "gpu-a", "Completed |")
    await asyncio.sleep(0.3)
    data, text = await ask(cluster, "is kimi ready yet?")
    svc = data["data"]["services"][0]
    assert data["intent"] == "status" and svc["state"] == "loading"
    assert svc["phase"] == "loading_weights"
    assert svc["progress"]["total"] == 400 and 0 < svc["progress"]["done"] < 400
    assert 0 < svc["progress"]["fraction"] < 1
    assert svc["eta_basis"] == "shard_rate" and svc["eta_seconds"] is not None
    assert re.search(r"\[[█░]{20}\] \d+ %", text) and "/400 shards" in text and "remaining" in text


async def test_eta_from_history_of_previous_loads(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(shards=400, seconds_per_shard=0.05)})
    store = Store(cluster.config.state.database_url())
    start = datetime.now(UTC) - timedelta(days=1)
    await store.loads.record("kimi", "gpu-a", "earlier", start, start + timedelta(seconds=1800), "ready", 1800.0)
    await store.close()
    await wait_journal(cluster, "gpu-a", "Completed |")
    data, text = await ask(cluster, "status")
    svc = data["data"]["services"][0]
    assert svc["eta_basis"] == "history" and 1700 < svc["eta_seconds"] <= 1800
    assert "from previous loads of this service" in text


async def test_phases_after_the_weights(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(kv_s=30)})
    await wait_journal(cluster, "gpu-a", "Model loading took")
    data, _ = await ask(cluster, "status")
    assert data["data"]["services"][0]["phase"] == "kv_cache"
    cluster2 = await make_cluster({"gpu-a": kimi(compile_s=30)})
    await wait_journal(cluster2, "gpu-a", "Dynamo bytecode transform")
    data, _ = await ask(cluster2, "status")
    assert data["data"]["services"][0]["phase"] == "compiling"


async def test_throughput_live_and_benchmarks(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(traffic_tps=600.0, running=12, kv_usage=0.3)})
    with_bench(cluster)
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster, "how fast is kimi?")
    svc = data["data"]["services"][0]
    t = svc["throughput"]
    assert t["source"] == "metrics" and 450 < t["generation_tps"] < 750
    assert t["running"] == 12 and abs(t["kv_cache_usage"] - 0.3) < 0.01
    assert t["ttft_p50_ms"] is not None and t["itl_p99_ms"] is not None
    bench = svc["bench"]
    assert bench["single_stream"]["output_throughput"] == 82.5 and bench["single_stream"]["max_concurrency"] == 1
    assert bench["peak"]["max_concurrency"] == 64 and bench["peak"]["date"] == "2026-02-21"
    assert "82.5 tok/s single-stream (2026-02-21), 1,536 tok/s peak (concurrency 64, 2026-02-21)" in text
    # The settings answer carries the one-line summary too.
    _, text = await ask(cluster, "settings for kimi")
    assert "1,536 tok/s peak" in text


async def test_idle_server_is_not_dead(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster, "throughput")
    svc = data["data"]["services"][0]
    assert svc["state"] == "ready"
    assert svc["throughput"]["generation_tps"] == 0
    assert "hung" not in text


async def test_old_metric_names_still_read(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(traffic_tps=300.0, running=4, kv_usage=0.5, old_metric_names=True)})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, _ = await ask(cluster, "throughput")
    t = data["data"]["services"][0]["throughput"]
    assert abs(t["kv_cache_usage"] - 0.5) < 0.01 and t["generation_tps"] > 0 and t["itl_p50_ms"] is not None


async def test_hung_engine_is_flagged(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(traffic_tps=300.0, running=5, hung=True)})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster, "status")
    assert "possibly hung" in text
    assert any("possibly hung" in w for w in data["data"]["services"][0]["warnings"])


async def test_gpus_processes_and_leftovers(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster, "gpu status")
    node = data["data"]["nodes"][0]
    assert len(node["gpus"]) == 8 and node["leftovers"] == []
    names = {p["name"] for p in node["processes"]}
    assert any(n.startswith("VLLM::Worker") for n in names)
    assert "LEFTOVER" not in text and "kimi" in text
    await sim.crash(KIMI_UNIT, leave_workers=True)
    await sim.wait_for(KIMI_UNIT, "failed", 45)
    data, text = await ask(cluster, "gpus on gpu-a")
    node = data["data"]["nodes"][0]
    assert node["leftovers"] and all(p["memory_mib"] > 0 for p in node["leftovers"])
    assert "LEFTOVER" in text and "belong to no running service" in text
    svc = data["data"]["services"][0]
    assert svc["leftovers"] and svc["gpus"][0]["processes"]
    sim.kill_leftovers()


async def test_logs_are_whole_lines_with_secrets_redacted(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster, "logs kimi 200")
    lines = data["data"]["services"][0]["logs"]
    assert 20 < len(lines) <= 200
    args = [line for line in lines if "non-default args" in line]
    assert args and "[redacted]" in args[0] and "'tensor_parallel_size': 8" in args[0]
    no_secrets(text, json.dumps(data))
    assert len(data["data"]["services"][0]["logs"]) <= 200
    data, _ = await ask(cluster, "logs kimi 5")
    assert len(data["data"]["services"][0]["logs"]) == 5


async def test_unit_logging_to_a_file(make_cluster: MakeCluster) -> None:
    scenario = kimi()
    unit = file_log_unit(port=free_port())
    unit.profile.shards, unit.profile.seconds_per_shard = 300, 0.05
    scenario.units = [unit]
    cluster = await make_cluster({"gpu-a": scenario})
    log_file = str(cluster.sims["gpu-a"].root / "var/log/vllm/filelog.log")
    svc = cluster.config.services[0].model_copy(update={"log_file": log_file})
    cluster.config = cluster.config.model_copy(update={"services": [svc]})
    await wait_file(Path(log_file), "Completed |")
    data, _ = await ask(cluster, "status")
    s = data["data"]["services"][0]
    assert s["phase"] == "loading_weights" and s["progress"]["total"] == 300
    data, _ = await ask(cluster, "logs vllm-filelog 10")
    assert len(data["data"]["services"][0]["logs"]) == 10


async def test_what_changed_across_two_bot_processes(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    cfg = tmp_path / "inferbot.toml"
    cfg.write_text(_toml(cluster))
    # Bot process one records a snapshot...
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "bot.cli", "ask", "settings", "--json", "--config", str(cfg)],
        capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    sim.edit_unit(KIMI_UNIT, unit_file.read_text().replace("--max-model-len 131072", "--max-model-len 65536"))
    await sim.daemon_reload()
    await sim.restart_unit(KIMI_UNIT)
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    # ...and this one, with its own store connection, reads the diff.
    data, text = await ask(cluster, "what changed on kimi?")
    diff = data["data"]["services"][0]["diff"]
    assert {"kind": "flag", "key": "max-model-len", "old": "131072", "new": "65536"} in diff
    assert data["data"]["services"][0]["since"]
    assert "max-model-len" in text and "131072" in text and "65536" in text


async def test_compare_one_service_on_two_nodes(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()})
    data, text = await ask(cluster, "compare kimi on gpu-a and gpu-b")
    cmp = data["data"]["compare"]
    assert cmp["left"] == "kimi@gpu-a" and cmp["right"] == "kimi@gpu-b"
    rows = {r["key"]: r for r in cmp["rows"]}
    assert rows["tensor-parallel-size"]["same"] and not rows["port"]["same"]
    assert "≠ port" in text


async def test_warns_when_settings_differ_from_the_last_ready_ones(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(seconds_per_shard=0.05)})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    data, _ = await ask(cluster, "settings")  # seen ready with these settings
    assert not any("last ones seen ready" in w for w in data["data"]["services"][0]["warnings"])
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    eager = unit_file.read_text().replace("--trust-remote-code", "--trust-remote-code --enforce-eager")
    sim.edit_unit(KIMI_UNIT, eager)
    await sim.daemon_reload()
    await sim.restart_unit(KIMI_UNIT)
    await sim.wait_for(KIMI_UNIT, "loading", 45)
    data, _ = await ask(cluster, "settings")
    svc = data["data"]["services"][0]
    assert svc["state"] in ("loading", "starting")
    assert any("last ones seen ready" in w and "enforce-eager: (unset) → true" in w for w in svc["warnings"]), svc
