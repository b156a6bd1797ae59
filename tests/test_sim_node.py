"""The simulated vLLM node: fake systemctl/journalctl/nvidia-smi/sudo, real processes, the probe round trip.

No SSH here: the probe script runs locally with ``sh -c`` and the node's shell environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.node.probe import ProbeOptions, ProbeTarget, build_script, environ_dict, parse_output, split_nul
from services.sim.node import SimNode
from services.sim.scenarios import (
    KIMI_API_KEY,
    KIMI_UNIT,
    NodeScenario,
    bash_unit,
    docker_unit,
    fast_profile,
    file_log_unit,
    kimi_node,
    kimi_unit,
    qwen_node,
    template_unit,
)
from tests.sshd import free_port


class Sh:
    def __init__(self, node: SimNode) -> None:
        self.env = {**os.environ, **node.shell_env()}

    async def __call__(self, command: str, timeout: float = 20) -> tuple[int, str, str]:  # noqa: ASYNC109
        proc = await asyncio.create_subprocess_exec(
            "sh", "-c", command, env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()


def proc(pid: int | str, name: str = "cmdline") -> bytes:
    """``/proc/PID/NAME`` (b"" when the process is gone)."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def read(path: Path) -> str:
    return path.read_text()


def show_dict(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, _, v = line.partition("=")
        out.setdefault(k, v)
    return out


async def until(sh: Sh, command: str, needle: str, timeout: float = 5.0) -> str:  # noqa: ASYNC109
    """Run ``command`` until its stdout contains ``needle``; returns that stdout."""
    deadline = time.monotonic() + timeout
    while True:
        _, out, _ = await sh(command)
        if needle in out or time.monotonic() > deadline:
            return out
        await asyncio.sleep(0.05)


async def started(tmp_path: Path, scenario: NodeScenario) -> SimNode:
    node = SimNode(tmp_path / "node", scenario)
    await node.start()
    return node


@pytest.fixture
async def kimi(tmp_path: Path) -> AsyncIterator[SimNode]:
    node = await started(tmp_path, kimi_node(fast=True, port=free_port()))
    try:
        yield node
    finally:
        await node.stop()


async def test_kimi_loading_then_ready(tmp_path: Path) -> None:
    sc = kimi_node(fast=True, port=free_port())
    sc.units[0].profile.seconds_per_shard = 0.015  # ~1.8 s of weights: time to look at the loading state
    kimi = await started(tmp_path, sc)
    try:
        await _loading_then_ready(kimi)
    finally:
        await kimi.stop()


async def _loading_then_ready(kimi: SimNode) -> None:
    sh = Sh(kimi)
    url = kimi.api_url(KIMI_UNIT)
    # loading: systemd says active/running, the port refuses connections
    rc, out, _ = await sh(f"systemctl show -p {PROPS} -- {KIMI_UNIT}")
    show = show_dict(out)
    assert rc == 0
    assert (show["ActiveState"], show["SubState"], show["LoadState"]) == ("active", "running", "loaded")
    assert list(show) == ORDER  # D-Bus order, not -p order
    pid = int(show["MainPID"])
    cmdline = split_nul(proc(pid))
    root = str(kimi.root)
    assert cmdline[:4] == [f"{root}/opt/vllm/venv/bin/python3", f"{root}/opt/vllm/venv/bin/vllm", "serve",
                           "/shared/kimi-k2.5-int4"]  # fmt: skip
    assert cmdline[-2:] == ["--api-key", KIMI_API_KEY]
    environ = environ_dict(proc(pid, "environ"))
    assert environ["NCCL_PROTO"] == "LL" and environ["HF_TOKEN"].startswith("hf_")
    assert environ["INVOCATION_ID"] == show["InvocationID"] and len(show["InvocationID"]) == 32
    assert show["ExecStart"].startswith(f"{{ path={root}/opt/vllm/venv/bin/vllm ; argv[]={root}/opt/vllm/venv/bin/vllm")
    assert "--api-key ${VLLM_API_KEY} ; ignore_errors=no ; start_time=[" in show["ExecStart"]
    assert show["ExecStart"].endswith(f"pid={pid} ; code=(null) ; status=0/0 }}")
    assert show["EnvironmentFiles"] == f"{root}/etc/vllm/kimi.env (ignore_errors=no)"
    assert show["Environment"].startswith("NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS")
    rc, out, _ = await sh(f"curl -s -o /dev/null -w '%{{http_code}}' {url}/health")
    assert rc == 7 and out == "000"
    out = await until(sh, f"journalctl _SYSTEMD_INVOCATION_ID={show['InvocationID']} -o cat -a --no-pager",
                      "0/119")  # fmt: skip
    rc, out2, _ = await sh(f"curl -s -o /dev/null -w '%{{http_code}}' {url}/health")
    assert rc == 7 and out2 == "000"  # bound, not listening: refused during the whole load
    assert "\rLoading safetensors checkpoint shards:   0% Completed | 0/119 [00:00<?, ?it/s]" in out
    assert "non-default args: {'model_tag': '/shared/kimi-k2.5-int4'" in out and f"'api_key': ['{KIMI_API_KEY}']" in out
    assert "systemd[1]" not in out and "Started " not in out  # PID 1's lines are not the service's invocation
    # GPUs: real worker PIDs hold memory
    rc, out, _ = await sh("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid "
                          "--format=csv,noheader,nounits")  # fmt: skip
    apps = [line.split(", ") for line in out.splitlines()]
    assert [a[1] for a in apps] == [f"VLLM::Worker_TP{i}" for i in range(8)]
    assert all(proc(a[0]) for a in apps)

    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    rc, out, _ = await sh(f"curl -s -w '\\n%{{http_code}}' {url}/health; echo; curl -s {url}/version")
    assert out.splitlines() == ["", "200", '{"version": "0.20.1"}']
    rc, out, _ = await sh(f"curl -s -w ' %{{http_code}}' {url}/v1/models")
    assert out == '{"error": "Unauthorized"} 401'
    rc, out, _ = await sh(f"curl -s -H 'Authorization: Bearer {KIMI_API_KEY}' {url}/v1/models")
    card = json.loads(out)["data"][0]
    assert (card["id"], card["root"], card["max_model_len"]) == ("kimi-k2.5", "/shared/kimi-k2.5-int4", 131072)
    rc, out, _ = await sh(f"curl -s {url}/metrics")
    for name in ("vllm:num_requests_running{", "vllm:kv_cache_usage_perc{", "vllm:generation_tokens_total{",
                 "vllm:time_to_first_token_seconds_bucket{", "vllm:inter_token_latency_seconds_count{",
                 'vllm:cache_config_info{block_size="16"'):  # fmt: skip
        assert name in out
    assert 'model_name="kimi-k2.5"' in out and 'engine="0"' in out
    rc, out, _ = await sh(f"journalctl -u {KIMI_UNIT} -o cat -a -n 20")
    assert "Application startup complete." in out


async def test_probe_round_trip(kimi: SimNode) -> None:
    sh = Sh(kimi)
    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    script = build_script(
        [ProbeTarget(unit=KIMI_UNIT, bench_dir=kimi.bench_dir)], ProbeOptions(bench=True, metrics_samples=1)
    )
    rc, out, err = await sh(script)
    assert rc == 0, err
    node = parse_output(out)
    assert node.complete and node.host == "gpu-node-1" and node.gpus_rc == 0
    assert len(node.gpus.splitlines()) == 8 and len(node.gpu_apps.splitlines()) == 8
    u = node.units[0]
    show = show_dict(u.show)
    assert u.show_rc == 0 and show["ActiveState"] == "active"
    assert u.cat.startswith(f"# {kimi.root}/etc/systemd/system/{KIMI_UNIT}\n[Unit]\n")
    assert u.cmdline is not None and u.cmdline.data and b"--tensor-parallel-size\x008" in u.cmdline.data
    assert u.environ is not None and u.environ.data and b"VLLM_API_KEY=" + KIMI_API_KEY.encode() in u.environ.data
    env_file = u.files[f"{kimi.root}/etc/vllm/kimi.env"]
    assert env_file.rc == 0 and env_file.data and b"HF_TOKEN=hf_" in env_file.data
    assert u.url == f"http://127.0.0.1:{kimi.units[KIMI_UNIT].sc.port}"
    assert u.health is not None and u.health.status == 200
    assert u.version is not None and u.version.body == '{"version": "0.20.1"}'
    assert u.metrics and "vllm:generation_tokens_total" in u.metrics[0].probe.body
    assert u.journal_src == "invocation" and u.journal and "Application startup complete." in u.journal
    assert len(u.bench_files) == 4
    assert any('"output_throughput": 1536.42' in v for v in u.bench_files.values())


async def test_restart_via_fake_systemctl(kimi: SimNode) -> None:
    sh = Sh(kimi)
    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    before = kimi.state(KIMI_UNIT)
    rc, _, err = await sh(f"sudo -n systemctl restart {KIMI_UNIT}")
    assert rc == 0, err
    after = kimi.state(KIMI_UNIT)
    assert after.invocation_id != before.invocation_id and after.main_pid != before.main_pid
    assert after.sim_state == "loading" and after.active == "active"
    assert not proc(before.main_pid)
    rc, out, _ = await sh(f"journalctl -u {KIMI_UNIT} -o cat")
    tail = out[out.rindex("Stopping vLLM Kimi") :]
    assert "Deactivated successfully." in tail
    assert "Waiting for GPU memory to free (max used: " in tail  # the ExecStartPre saw the memory still held
    assert tail.index("Waiting for GPU memory") < tail.index("Started vLLM Kimi-K2.5 INT4 1T MoE Inference Server.")


async def test_unknown_unit(kimi: SimNode) -> None:
    sh = Sh(kimi)
    rc, out, _ = await sh("systemctl show -p Id,LoadState,ActiveState,SubState,MainPID,ExecStart -- nope.service")
    assert rc == 0
    assert out.splitlines() == ["MainPID=0", "Id=nope.service", "LoadState=not-found", "ActiveState=inactive",
                                "SubState=dead"]  # fmt: skip
    rc, out, err = await sh("systemctl cat -- nope.service")
    assert (rc, out, err) == (1, "", "No files found for nope.service.\n")
    rc, _, err = await sh("systemctl restart nope")
    assert (rc, err) == (5, "Failed to restart nope.service: Unit nope.service not found.\n")
    rc, out, _ = await sh("journalctl -u nope.service -o cat -a --no-pager")
    assert out == "-- No entries --\n"


async def test_discovery_lists_and_status(kimi: SimNode) -> None:
    sh = Sh(kimi)
    rc, out, _ = await sh("systemctl list-units --type=service --all --plain --no-legend --no-pager")
    assert KIMI_UNIT in out and "ssh.service" in out
    rc, out, _ = await sh(f"systemctl show -p Id,ExecStart -- {KIMI_UNIT} ssh.service")
    blocks = out.split("\n\n")
    assert len(blocks) == 2 and blocks[0].startswith("ExecStart={") and "Id=ssh.service" in blocks[1]
    rc, out, _ = await sh(build_script([], ProbeOptions(discover=True, gpus=False, journal_lines=0)))
    assert parse_output(out).discovered == [KIMI_UNIT]
    rc, out, _ = await sh(f"systemctl status {KIMI_UNIT}")
    assert rc == 0
    assert out.startswith(f"● {KIMI_UNIT} - vLLM Kimi-K2.5 INT4 1T MoE Inference Server\n     Loaded: loaded (")
    assert "     Active: active (running) since " in out and "ExecStartPre=/bin/bash -c for i in $$(seq 1 30)" in out


async def test_journal_blob_without_all(kimi: SimNode) -> None:
    sh = Sh(kimi)
    await until(sh, f"journalctl -u {KIMI_UNIT} -o cat", "Completed | ")
    _, out, _ = await sh(f"journalctl -u {KIMI_UNIT} --no-pager")
    blobs = [line for line in out.splitlines() if line.endswith("B blob data]")]
    assert blobs and all(" gpu-node-1 vllm[" in line for line in blobs)
    _, out, _ = await sh(f"journalctl -u {KIMI_UNIT} -a --no-pager")
    assert "B blob data]" not in out and "\rLoading safetensors" in out
    _, out, _ = await sh(f"journalctl -u {KIMI_UNIT} -n 2 -o short-iso")
    assert len(out.splitlines()) == 2 and out[:4].isdigit() and out[10] == "T"


async def test_need_daemon_reload(kimi: SimNode) -> None:
    sh = Sh(kimi)
    text = read(kimi.units[KIMI_UNIT].fragment).replace("--max-model-len 131072", "--max-model-len 65536")
    kimi.edit_unit(KIMI_UNIT, text)
    _, out, _ = await sh(f"systemctl show -p NeedDaemonReload,ExecStart {KIMI_UNIT}")
    show = show_dict(out)
    assert show["NeedDaemonReload"] == "yes" and "--max-model-len 131072" in show["ExecStart"]
    _, out, err = await sh(f"systemctl cat {KIMI_UNIT}")
    assert "--max-model-len 65536" in out and "changed on disk" in err
    await kimi.daemon_reload()
    # an edit behind the node's back is noticed too (mtime, like systemd)
    drop_in = kimi.units[KIMI_UNIT].fragment.with_name(KIMI_UNIT + ".d")
    await asyncio.to_thread(drop_in.mkdir)
    await asyncio.to_thread((drop_in / "override.conf").write_text, "[Service]\nEnvironment=NCCL_DEBUG=INFO\n")
    await until(sh, f"systemctl show -p NeedDaemonReload {KIMI_UNIT}", "=yes")
    await kimi.daemon_reload()
    _, out, _ = await sh(f"systemctl show -p NeedDaemonReload,ExecStart,DropInPaths,Environment {KIMI_UNIT}")
    assert show_dict(out)["DropInPaths"] == str(drop_in / "override.conf")
    assert show_dict(out)["Environment"].endswith(" NCCL_DEBUG=INFO")
    show = show_dict(out)
    assert show["NeedDaemonReload"] == "no" and "--max-model-len 65536" in show["ExecStart"]
    # the running process still has the old argv (drift until restart)
    pid = kimi.state(KIMI_UNIT).main_pid
    assert b"131072" in proc(pid)


async def test_crash_loop_then_start_limit(tmp_path: Path) -> None:
    unit = kimi_unit(fast=True, port=free_port(), restart_sec=0.05, profile=fast_profile(fail_at="startup"))
    node = await started(tmp_path, NodeScenario(units=[unit], gpu_free_delay_s=0.1, tick_s=0.1))
    sh = Sh(node)
    try:
        seen = []
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            rc, out, _ = await sh(f"systemctl show -p ActiveState,SubState,Result,NRestarts -- {KIMI_UNIT}")
            show = show_dict(out)
            seen.append((show["ActiveState"], show["SubState"], show["Result"], int(show["NRestarts"])))
            if show["Result"] == "start-limit-hit":
                break
            await asyncio.sleep(0.03)
        assert ("activating", "auto-restart", "exit-code") in {s[:3] for s in seen}
        # burst 5: the first start + 4 automatic restarts run; the 5th restart job hits the limit
        assert seen[-1] == ("failed", "failed", "start-limit-hit", 5)
        assert [n for n in sorted({s[3] for s in seen}) if n] == sorted(n for n in {s[3] for s in seen} if n)
        rc, _, err = await sh(f"systemctl restart {KIMI_UNIT}")
        assert rc == 1 and err.startswith(f"Job for {KIMI_UNIT} failed because start of the service was attempted "
                                          "too often.")  # fmt: skip
        rc, out, _ = await sh(f"journalctl -u {KIMI_UNIT} -o cat")
        assert "Main process exited, code=exited, status=1/FAILURE" in out
        assert "RuntimeError: Engine core initialization failed." in out
        assert "Start request repeated too quickly." in out
        rc, _, _ = await sh(f"systemctl reset-failed {KIMI_UNIT}")
        assert rc == 0 and node.state(KIMI_UNIT).active == "inactive"
    finally:
        await node.stop()


async def test_leftover_workers_hold_gpus(tmp_path: Path) -> None:
    unit = kimi_unit(fast=True, port=free_port(), restart="no")
    node = await started(tmp_path, NodeScenario(units=[unit], gpu_free_delay_s=0.1, tick_s=0.1))
    sh = Sh(node)
    try:
        await node.wait_for(KIMI_UNIT, "ready", 45)
        workers = node.state(KIMI_UNIT).worker_pids
        await node.crash(KIMI_UNIT, leave_workers=True)
        await node.wait_for(KIMI_UNIT, "failed", 3)
        _, out, _ = await sh(f"systemctl show -p ActiveState,Result,MainPID,ExecMainStatus {KIMI_UNIT}")
        assert show_dict(out) == {"MainPID": "0", "Result": "signal", "ExecMainStatus": "9", "ActiveState": "failed"}
        await asyncio.sleep(0.3)
        _, out, _ = await sh("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader")
        pids = [int(line.split(", ")[0]) for line in out.splitlines()]
        assert pids == workers[1:] and all(line.endswith(" MiB") for line in out.splitlines())
        _, out, _ = await sh("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sort -rn | head -1")
        assert int(out) > 90000
        # a start waits in ExecStartPre (activating/start-pre, MainPID=0) until the memory is free
        job = asyncio.create_task(node.start_unit(KIMI_UNIT))
        out = await until(sh, f"journalctl -u {KIMI_UNIT} -o cat -n 5", "Waiting for GPU memory to free (max used: 9")
        _, out, _ = await sh(f"systemctl show -p ActiveState,SubState,MainPID {KIMI_UNIT}")
        assert show_dict(out) == {"MainPID": "0", "ActiveState": "activating", "SubState": "start-pre"}
        _, out, _ = await sh(f"systemctl status {KIMI_UNIT}")
        assert "Active: activating (start-pre) since " in out and "  Cntrl PID: " in out
        assert not job.done()
        node.kill_leftovers()
        assert (await asyncio.wait_for(job, 5)).rc == 0
        _, out, _ = await sh("nvidia-smi --query-compute-apps=pid --format=csv,noheader")
        assert not set(map(int, out.split())) & set(workers)
    finally:
        await node.stop()
    assert not any(proc(p) for p in workers)  # gone (or zombies waiting for init)


async def test_stop_start_and_kill(kimi: SimNode) -> None:
    sh = Sh(kimi)
    await kimi.wait_for(KIMI_UNIT, "ready", 45)
    rc, _, _ = await sh(f"systemctl stop {KIMI_UNIT}")
    assert rc == 0
    snap = kimi.state(KIMI_UNIT)
    assert (snap.active, snap.sub, snap.main_pid, snap.invocation_id) == ("inactive", "dead", 0, "")
    rc, out, _ = await sh(f"systemctl show -p ActiveState,InvocationID,ExecStart {KIMI_UNIT}")
    show = show_dict(out)
    assert show["InvocationID"] == "" and " ; code=exited ; status=0 }" in show["ExecStart"]
    rc, out, _ = await sh(f"systemctl status {KIMI_UNIT}")
    assert rc == 3 and out.startswith("○ ") and "Active: inactive (dead) since " in out
    rc, _, err = await sh(f"systemctl start {KIMI_UNIT}")
    assert rc == 0, err
    assert kimi.state(KIMI_UNIT).main_pid


async def test_hung_systemctl_and_no_sudo(kimi: SimNode) -> None:
    sh = Sh(kimi)
    kimi.set_hung_systemctl(True)
    rc, _, _ = await sh(f"timeout 0.3 systemctl show -p Id {KIMI_UNIT}")
    assert rc == 124
    kimi.set_hung_systemctl(False)
    rc, out, _ = await sh(f"systemctl show -p Id {KIMI_UNIT}")
    assert out == f"Id={KIMI_UNIT}\n"


async def test_qwen_traffic(tmp_path: Path) -> None:
    sc = qwen_node(fast=True, port=free_port())
    sc.units[0].profile.stats_interval_s = 0.3
    node = await started(tmp_path, sc)
    sh = Sh(node)
    try:
        await node.wait_for(sc.units[0].name, "ready", 20)
        url = node.api_url(sc.units[0].name)
        _, m1, _ = await sh(f"curl -s {url}/metrics | grep '^vllm:generation_tokens_total'")
        await asyncio.sleep(0.7)
        _, m2, _ = await sh(f"curl -s {url}/metrics | grep '^vllm:generation_tokens_total'")
        assert float(m2.split()[-1]) > float(m1.split()[-1])
        _, out, _ = await sh(f"journalctl -u {sc.units[0].name} -o cat | grep 'Avg generation throughput'")
        assert "Engine 000: Avg prompt throughput: " in out and "Running: 24 reqs" in out
        _, out, _ = await sh("nvidia-smi --query-gpu=index,name,utilization.gpu --format=csv,noheader,nounits")
        assert [line.split(", ")[:2] for line in out.splitlines()] == [["0", "NVIDIA H100 80GB HBM3"],
                                                                        ["1", "NVIDIA H100 80GB HBM3"]]
        assert all(int(line.split(", ")[2]) > 80 for line in out.splitlines())
    finally:
        await node.stop()


async def test_odd_units(tmp_path: Path) -> None:
    """bash -c wrapper, docker run, StandardOutput=append:, a template instance."""
    sc = NodeScenario(units=[bash_unit(port=free_port())])
    sc.units += [docker_unit(port=free_port()), file_log_unit(port=free_port()), template_unit(str(free_port()))]
    sc.gpus.count = 4
    for i, u in enumerate(sc.units):
        u.gpu_indices = [i]
    node = await started(tmp_path, sc)
    sh = Sh(node)
    try:
        for u in sc.units:
            await node.wait_for(u.name, "ready", 45)
        # bash -c wrapper: bash expanded $MODEL/$EXTRA_ARGS and exec'ed the console script
        pid = node.state(sc.units[0].name).main_pid
        argv = split_nul(proc(pid))
        assert argv[2:] == ["serve", "Qwen/Qwen3-0.6B", "--max-model-len", "4096", "--enforce-eager", "--port",
                            str(sc.units[0].port)]  # fmt: skip
        _, out, _ = await sh(f"systemctl show -p ExecStart {sc.units[0].name}")
        assert "argv[]=/bin/bash -c exec " in out and '"$MODEL" $EXTRA_ARGS' in out
        # docker run: the host port comes from -p
        _, out, _ = await sh(f"curl -s {node.api_url(sc.units[1].name)}/version")
        assert out == '{"version": "0.20.1"}'
        # StandardOutput=append: the log goes to the file, not the journal
        log = node.root / "var/log/vllm/filelog.log"
        assert "Application startup complete." in read(log)
        _, out, _ = await sh(f"journalctl -u {sc.units[2].name} -o cat")
        assert "Application startup complete." not in out and "Started vLLM logging to a file." in out
        # template instance: %i expanded in show, file is vllm@.service
        name = sc.units[3].name
        _, out, _ = await sh(f"systemctl show -p FragmentPath,ExecStart,Description {name}")
        show = show_dict(out)
        assert show["FragmentPath"].endswith("/vllm@.service") and f"--port {sc.units[3].port} ;" in show["ExecStart"]
        _, out, _ = await sh("nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits")
        used = [int(line.split(", ")[1]) for line in out.splitlines()]
        assert len(used) == 4 and all(u > 1000 for u in used)
    finally:
        await node.stop()


async def test_backdated_demo_start(tmp_path: Path) -> None:
    """The demo: 13 minutes into a 30-minute load; journal and unit timestamps agree."""
    sc = kimi_node(fast=False, port=free_port())
    sc.units[0].text = sc.units[0].text.replace("ExecStartPre=", "#ExecStartPre=")
    node = await started(tmp_path, sc)
    sh = Sh(node)
    try:
        await asyncio.sleep(0.8)
        _, out, _ = await sh(f"systemctl show -p ActiveEnterTimestamp,InvocationID {KIMI_UNIT}")
        show = show_dict(out)
        ts = time.mktime(time.strptime(show["ActiveEnterTimestamp"], "%a %Y-%m-%d %H:%M:%S UTC")) - time.timezone
        assert abs(time.time() - 780 - ts) < 3
        _, out, _ = await sh(f"journalctl _SYSTEMD_INVOCATION_ID={show['InvocationID']} -o cat -a")
        assert "63/119 [12:36<11:12, 12.00s/it]" in out and "64/119" not in out
        _, out, _ = await sh(f"journalctl _SYSTEMD_INVOCATION_ID={show['InvocationID']} -o short-unix -n 1 -a")
        assert abs(float(out.split()[0]) - (time.time() - 780 + 20 + 63 * 12)) < 3
        _, out, _ = await sh("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1")
        assert 30000 < int(out) < 40000
    finally:
        await node.stop()


async def test_health_503_and_hang(tmp_path: Path) -> None:
    u1 = kimi_unit(fast=True, port=free_port(), profile=fast_profile(health_503_after_s=0.2))
    u2 = bash_unit(port=free_port())
    u2.profile = fast_profile(hang_connections=True, init_s=1.0, shards=1)
    u2.gpu_indices = [8]  # the Kimi unit (TP=8) has GPUs 0-7
    sc = NodeScenario(units=[u1, u2], gpu_free_delay_s=0.1, tick_s=0.1)
    sc.gpus.count = 9
    node = await started(tmp_path, sc)
    sh = Sh(node)
    try:
        deadline = time.monotonic() + 3
        url2 = node.api_url(u2.name)
        rc = 7
        while rc == 7 and time.monotonic() < deadline:  # until the process has started and listens
            rc, out, _ = await sh(f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 0.3 {url2}/health")
        assert rc == 28 and out == "000"  # accepted, never answered
        await node.wait_for(u1.name, "unhealthy", 10)
        rc, out, _ = await sh(f"curl -s -o /dev/null -w '%{{http_code}}' {node.api_url(u1.name)}/health")
        assert out == "503"
        await node.wait_for(u2.name, "ready", 10)
        rc, out, _ = await sh(f"curl -s -o /dev/null -w '%{{http_code}}' {node.api_url(u2.name)}/health")
        assert out == "200"
    finally:
        await node.stop()


PROPS = (
    "Id,Description,LoadState,ActiveState,SubState,Result,MainPID,ExecMainStartTimestamp,"
    "ActiveEnterTimestamp,StateChangeTimestamp,InactiveEnterTimestamp,NRestarts,NeedDaemonReload,"
    "FragmentPath,DropInPaths,Environment,EnvironmentFiles,ExecStart,ExecMainStatus,InvocationID,ControlGroup"
)
ORDER = ["MainPID", "Result", "NRestarts", "ExecMainStartTimestamp", "ExecMainStatus", "ExecStart", "ControlGroup",
         "Environment",
         "EnvironmentFiles", "Id", "Description", "LoadState", "ActiveState", "SubState", "FragmentPath",
         "DropInPaths", "StateChangeTimestamp", "ActiveEnterTimestamp", "InactiveEnterTimestamp", "NeedDaemonReload",
         "InvocationID"]  # fmt: skip


def test_probe_props_match() -> None:
    from services.node.probe import SHOW_PROPERTIES
    from services.sim.fake_vllm import Profile
    from services.sim.scenarios import LoadProfile

    assert PROPS == SHOW_PROPERTIES
    assert set(Profile.__annotations__) == set(LoadProfile.model_fields)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the node's processes as another user")
async def test_run_as_login_user_and_root_only_proc(tmp_path: Path) -> None:
    """The probe as an unprivileged login user: reads everything; a root-owned process needs sudo."""
    import pwd

    user = next((u for u in ("inferbot-test", "nobody") if _has_user(u)), None)
    if user is None:
        pytest.skip("no unprivileged user")
    sc = kimi_node(fast=True, port=free_port())
    sc.root_only_proc = True
    sc.journal_readable = False
    node = SimNode(tmp_path / "node", sc, run_as=user)
    await node.start()
    try:
        await node.wait_for(KIMI_UNIT, "ready", 45)
        env = node.shell_env()
        script = build_script([ProbeTarget(unit=KIMI_UNIT)], ProbeOptions())

        async def probe_as_user() -> str:
            p = await asyncio.create_subprocess_exec(
                "runuser", "-u", user, "--", "env", "-i", f"PATH={env['PATH']}",
                f"INFERBOT_SIM_ROOT={env['INFERBOT_SIM_ROOT']}", f"HOME={pwd.getpwnam(user).pw_dir}", "sh", "-c",
                script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await p.communicate()
            return out.decode()

        u = parse_output(await probe_as_user()).units[0]
        assert u.environ is not None and u.environ.rc == 0 and u.environ.data  # via sudo -n
        assert u.journal and "Application startup complete." in u.journal  # journalctl via sudo -n
        node.set_sudo_allowed(False)
        n = parse_output(await probe_as_user())
        u = n.units[0]
        assert n.uid != 0 and u.environ is not None and u.environ.rc != 0 and u.environ.data is None
        assert u.cmdline is not None and u.cmdline.rc == 0  # cmdline stays world-readable
        assert not u.journal
    finally:
        await node.stop()


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


async def test_launcher_process_trees(tmp_path: Path) -> None:
    """Wrappers behave like the real ones: sudo -u, uv run and a Python launcher stay as the parent (sudo
    resets the environment), numactl/taskset exec, the in-process launcher shows no vLLM argument."""
    from services.sim.scenarios import (
        launcher_node,
        numactl_unit,
        opaque_unit,
        python_launcher_unit,
        sudo_unit,
        uv_unit,
    )

    units = [sudo_unit(port=free_port()), numactl_unit(port=free_port()), uv_unit(port=free_port()),
             python_launcher_unit(port=free_port()), opaque_unit(port=free_port())]
    node = await started(tmp_path, launcher_node(units))
    try:
        for u in units:
            await node.wait_for(u.name, "ready", 45)

        def children(pid: int) -> list[int]:
            out = []
            for stat in Path("/proc").glob("[0-9]*/stat"):
                try:
                    fields = stat.read_text().rpartition(")")[2].split()
                except OSError:
                    continue
                if int(fields[1]) == pid:
                    out.append(int(stat.parent.name))
            return out

        sudo, numa, uv, launch, opaque = (node.state(u.name).main_pid for u in units)
        assert split_nul(proc(sudo))[1:4] == [str(node.root / "sim/bin/sudo"), "-u", "vllm"]
        (child,) = [c for c in children(sudo) if b"serve" in proc(c)]
        assert split_nul(proc(child))[2:4] == ["serve", "/models/s"]
        assert b"NCCL_DEBUG" in proc(sudo, "environ") and b"NCCL_DEBUG" not in proc(child, "environ")
        assert split_nul(proc(numa))[1:3] == [str(node.root / "opt/serve_model.py"), "serve"]  # exec'ed
        assert split_nul(proc(uv))[1:3] == [str(node.root / "usr/local/bin/uv"), "run"]
        assert any(b"/models/u" in proc(c) for c in children(uv))
        assert "serve" not in split_nul(proc(launch)) and any(b"/models/z" in proc(c) for c in children(launch))
        assert "serve" not in split_nul(proc(opaque))
        assert all(proc(c).startswith(b"VLLM::") for c in children(opaque))
    finally:
        await node.stop()
