"""End to end over a real sshd: every fault gets a clear answer, no traceback, no secret."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from handlers.context import Asker
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_e2e_settings import kimi, no_secrets

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def ask(cluster: SimCluster, text: str = "what are current settings?") -> tuple[dict, str]:
    async with runtime(cluster.config) as rt:
        reply = await answer(text, rt.context(Asker(surface="json")))
    out = render_text(reply)
    return reply.to_json(out), out


def with_node(cluster: SimCluster, **changes: object) -> None:
    node = cluster.config.nodes[0].model_copy(update=changes)
    cluster.config = cluster.config.model_copy(update={"nodes": [node]})


async def test_node_down_is_unreachable_while_others_answer(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()})
    await cluster.sims["gpu-b"].wait_for(KIMI_UNIT, "ready", 45)
    cluster.sshds["gpu-a"].stop()  # the node's sshd is gone: connection refused
    data, text = await ask(cluster)
    by_node = {s["node"]: s for s in data["data"]["services"]}
    assert by_node["gpu-a"]["state"] == "unreachable"
    assert "connection refused" in by_node["gpu-a"]["reason"]
    assert by_node["gpu-b"]["state"] == "ready"
    assert "Traceback" not in text


async def test_wrong_host_key_is_refused_never_accepted(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
    sshd = cluster.sshds["gpu-a"]
    cluster.known_hosts.write_text(f"[{sshd.host}]:{sshd.port} {other}\n")
    before = cluster.known_hosts.read_text()
    data, _ = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "unreachable" and "host key mismatch" in svc["reason"]
    assert cluster.known_hosts.read_text() == before  # never auto-accepted


async def test_auth_refused(make_cluster: MakeCluster, tmp_path: Path) -> None:
    import asyncssh

    cluster = await make_cluster({"gpu-a": kimi()})
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    stranger.write_private_key(str(tmp_path / "k"))
    with_node(cluster, key_file=str(tmp_path / "k"))
    data, _ = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "unreachable" and "authentication refused" in svc["reason"]
    assert "authorized_keys" in svc["fix"]  # issue 10: a fix is a fix, no longer one of the warnings


async def test_hung_command_times_out(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    cluster.sims["gpu-a"].set_hung_systemctl(True)
    with_node(cluster, timeout=1.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    data, _ = await ask(cluster)
    assert loop.time() - started < 10  # bounded by the node timeout, not by the hung command
    svc = data["data"]["services"][0]
    assert svc["state"] == "unreachable" and "no answer" in svc["reason"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the fake vLLM as another user")
async def test_no_permission_for_proc_falls_back_and_says_so(make_cluster: MakeCluster) -> None:
    scenario = kimi()
    scenario.root_only_proc = True
    scenario.sudo_allowed = False
    cluster = await make_cluster({"gpu-a": scenario})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "ready"
    assert any("no permission to read /proc" in w for w in svc["warnings"])
    assert svc["env"]["NCCL_ALGO"] == "Ring"  # from the unit instead
    no_secrets(text, json.dumps(data))


async def test_crash_loop_is_failed(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(restart="always", fail_at="startup")})
    sim = cluster.sims["gpu-a"]
    for _ in range(200):
        if sim.state(KIMI_UNIT).n_restarts >= 3:
            break
        await asyncio.sleep(0.05)
    data, _ = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "failed"
    expected = ("crash loop", "keeps restarting", "Result=", "the load failed")
    assert any(w in svc["reason"] for w in expected), svc["reason"]


async def test_unhealthy_after_ready(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(health_503_after_s=0.2)})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    await asyncio.sleep(0.6)
    data, _ = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "unhealthy" and "503" in svc["reason"]


async def test_starting_while_waiting_for_gpu_memory(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    await sim.crash(KIMI_UNIT, leave_workers=True)  # workers keep the GPU memory
    asyncio.get_running_loop().create_task(sim.start_unit(KIMI_UNIT))
    await sim.wait_for(KIMI_UNIT, "starting", 45)
    data, text = await ask(cluster, "status")
    svc = data["data"]["services"][0]
    assert svc["state"] == "starting" and "ExecStartPre" in svc["reason"]
    assert svc["leftovers"], "the workers left behind must be flagged"
    assert "belong to no running service" in text
    sim.kill_leftovers()


async def test_edited_unit_warns_reload_and_drift(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    text = unit_file.read_text().replace("--max-model-len 131072", "--max-model-len 65536")
    sim.edit_unit(KIMI_UNIT, text)
    data, _ = await ask(cluster)
    warnings = " ".join(data["data"]["services"][0]["warnings"])
    assert "NeedDaemonReload" in warnings
    assert "--max-model-len 131072 → 65536" in warnings  # systemctl cat already shows the new file
    await sim.daemon_reload()
    data, _ = await ask(cluster)
    warnings = " ".join(data["data"]["services"][0]["warnings"])
    assert "NeedDaemonReload" not in warnings and "--max-model-len 131072 → 65536" in warnings


async def test_discovery_on_node_without_services(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi()}, services=[])
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    data, _ = await ask(cluster)
    services = data["data"]["services"]
    assert [s["unit"] for s in services] == [KIMI_UNIT]
    assert services[0]["service"] == "vllm-kimi-k25-int4"
    assert services[0]["flags"]["tensor-parallel-size"] == "8"
    assert services[0]["api_url"].endswith(f":{cluster.sims['gpu-a'].sc.units[0].port}")


@pytest.mark.parametrize("text", ["", "asdf qwer zxcv", "x" * 50_000, "\x00\x1b[31m;rm -rf /", "settings for nope"])
async def test_garbage_gets_friendly_answer(make_cluster: MakeCluster, text: str) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    data, out = await ask(cluster, text)
    # Issue 10 changed `ok`: it is false when nothing asked for was answered (not understood, unknown name).
    assert data["ok"] is (text == "") and "Traceback" not in out
    assert data["intent"] in ("help", "settings")
    if text == "settings for nope":
        assert "I don't know a service or node called “nope”" in out


def cli(*args: str, config: Path | None = None, debug: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INFERBOT_LOG_LEVEL": "DEBUG" if debug else "WARNING"}
    cmd = [sys.executable, "-m", "bot.cli", *args]
    if config is not None:
        cmd += ["--config", str(config)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


async def test_cli_ask_json_contract_and_no_secret_in_logs(make_cluster: MakeCluster, tmp_path: Path) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    cfg = tmp_path / "inferbot.toml"
    cfg.write_text(_toml(cluster))
    proc = await asyncio.to_thread(cli, "ask", "what are current settings?", "--json", config=cfg, debug=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"intent", "ok", "text", "data"}
    svc = data["data"]["services"][0]
    for key in ("service", "node", "unit", "state", "reason", "since", "model", "flags", "env", "version",
                "gpus", "warnings"):
        assert key in svc
    assert set(svc["gpus"][0]) >= {"index", "name", "memory_used_mib", "memory_total_mib", "utilization_pct"}
    assert '"level": "debug"' in proc.stderr  # the logs were on, and still hold no secret
    no_secrets(proc.stdout, proc.stderr)


def test_cli_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[nodes]]\nname = 'GPU A'\nhost = 'x'\n")
    proc = cli("ask", "settings", "--json", config=bad)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "bad.toml" in proc.stderr
    assert json.loads(proc.stdout) == {"ok": False, "error": proc.stderr.strip().removeprefix("inferbot: ")}
    proc = cli("ask", "settings", config=tmp_path / "missing.toml")
    assert proc.returncode == 2 and "config file not found" in proc.stderr
    proc = cli("frobnicate")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def _toml(cluster: SimCluster) -> str:
    lines = []
    for n in cluster.config.nodes:
        lines += ["[[nodes]]", f'name = "{n.name}"', f'host = "{n.host}"', f"port = {n.port}", f'user = "{n.user}"',
                  f'key_file = "{n.key_file}"', f'known_hosts = "{n.known_hosts}"', ""]
    for s in cluster.config.services:
        lines += ["[[services]]", f'name = "{s.name}"', f'node = "{s.node}"', f'unit = "{s.unit}"', ""]
    lines += ["[state]", f'dir = "{cluster.config.state.directory()}"']
    return "\n".join(lines) + "\n"


# ---- issue 10: node errors, consistently


async def _http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(200)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # accepts, never says a word
    writer.close()


async def check_json(cluster: SimCluster, capsys: pytest.CaptureFixture[str]) -> dict:
    from bot.check import run_check

    capsys.readouterr()
    await run_check(cluster.config, as_json=True)
    return json.loads(capsys.readouterr().out)


async def test_port_that_is_not_ssh_says_so(make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    server = await asyncio.start_server(_http, "127.0.0.4", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with_node(cluster, host="127.0.0.4", port=port)
        data, text = await ask(cluster)
        svc = data["data"]["services"][0]
        assert svc["reason"].startswith(f"127.0.0.4:{port} is not an SSH server (it answered 'HTTP/1.1 400"), svc
        assert "MaxSessions" not in text and "`port`" in svc["fix"]
        assert "Fix:" in text and "Warnings" not in text
        problems = (await check_json(cluster, capsys))["nodes"][0]["problems"]
        assert problems[0]["what"] == svc["reason"] and problems[0]["fix"] == svc["fix"]
    finally:
        server.close()


async def test_empty_known_hosts_says_add_it_not_mismatch(make_cluster: MakeCluster,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    sshd = cluster.sshds["gpu-a"]
    cluster.known_hosts.write_text("")
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "unreachable"
    assert f"the host {sshd.host}:{sshd.port} is not in known_hosts ({cluster.known_hosts})" in svc["reason"]
    assert "mismatch" not in text
    assert f"ssh-keyscan -p {sshd.port} {sshd.host} >> {cluster.known_hosts}" in svc["fix"]
    problems = (await check_json(cluster, capsys))["nodes"][0]["problems"]
    assert "is not in known_hosts" in problems[0]["what"] and "ssh-keyscan" in problems[0]["fix"]
    assert cluster.known_hosts.read_text() == ""  # never added behind anyone's back


async def test_silent_port_quotes_the_configured_timeout_in_ask_and_check(
        make_cluster: MakeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = await make_cluster({"gpu-a": kimi()})
    server = await asyncio.start_server(_silent, "127.0.0.4", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with_node(cluster, host="127.0.0.4", port=port, timeout=1.5)
        data, _ = await ask(cluster, "status")
        reason = data["data"]["services"][0]["reason"]
        assert reason == f"no answer from 127.0.0.4:{port} within 1.5s", reason
        problems = (await check_json(cluster, capsys))["nodes"][0]["problems"]
        assert problems[0]["what"] == reason
        assert "`timeout` of node gpu-a" in problems[0]["fix"]
    finally:
        server.close()


async def test_a_host_key_added_as_the_fix_says_is_used_without_a_restart(make_cluster: MakeCluster) -> None:
    """The pool parses known_hosts once for all its connections; a changed file is read again."""
    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    line = cluster.known_hosts.read_text()
    cluster.known_hosts.write_text("")
    async with runtime(cluster.config) as rt:
        first = await answer("status", rt.context(Asker(surface="json")))
        assert "is not in known_hosts" in first.data["services"][0]["reason"]
        cluster.known_hosts.write_text(line)  # what the fix says to do, by hand
        second = await answer("status", rt.context(Asker(surface="json")))
    assert second.data["services"][0]["state"] == "ready"


async def test_a_rotated_client_key_is_used_on_the_next_connection(make_cluster: MakeCluster,
                                                                   tmp_path: Path) -> None:
    import asyncssh

    cluster = await make_cluster({"gpu-a": kimi()})
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    good = await asyncio.to_thread(Path(cluster.config.nodes[0].key_file or "").read_bytes)
    key = tmp_path / "id_rotating"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    with_node(cluster, key_file=str(key))
    async with runtime(cluster.config) as rt:
        first = await answer("status", rt.context(Asker(surface="json")))
        assert "authentication refused" in first.data["services"][0]["reason"]
        # Rotated the way tools do it: a new file renamed over the old one.
        (tmp_path / "id_new").write_bytes(good)
        os.chmod(tmp_path / "id_new", 0o600)
        os.replace(tmp_path / "id_new", key)
        second = await answer("status", rt.context(Asker(surface="json")))
    assert second.data["services"][0]["state"] == "ready"
