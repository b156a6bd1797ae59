"""End to end over a real sshd: settings of units whose main process is not `vllm serve` (issue 9).

Each unit runs on the simulated node as a real process tree: wrappers that exec leave the server's argv
on the main process, wrappers that stay as the parent (sudo, uv run, conda run, a shell or a Python
launcher) have the server as a child, and an in-process launcher leaves only vLLM's log and API.
"""

from __future__ import annotations

import json

import pytest

from services.sim.scenarios import (
    COMPILATION_CONFIG,
    LAUNCHER_SECRET,
    SPECULATIVE_CONFIG,
    UnitScenario,
    cc_alias_unit,
    conda_unit,
    fork_shell_unit,
    json_flags_unit,
    launcher_node,
    launcher_script_unit,
    numactl_unit,
    opaque_unit,
    python_launcher_unit,
    serve_program_unit,
    sudo_unit,
    uv_unit,
)
from tests.conftest import MakeCluster, SimCluster
from tests.sshd import free_port
from tests.test_e2e_settings import ask

NO_VLLM = "No `vllm serve` or vLLM api_server found"


async def start(make_cluster: MakeCluster, units: list[UnitScenario], **kw: object) -> SimCluster:
    services = kw.pop("services", None)
    cluster = await make_cluster({"gpu-a": launcher_node(units, **kw)}, services=services)
    for u in units:
        if u.active_on_boot:
            await cluster.sims["gpu-a"].wait_for(u.name, "ready", 45)
    return cluster


def by_unit(data: dict) -> dict[str, dict]:
    return {s["unit"]: s for s in data["data"]["services"]}


def no_secret(*texts: str) -> None:
    for text in texts:
        assert LAUNCHER_SECRET not in text


async def test_settings_from_any_launcher(make_cluster: MakeCluster) -> None:
    units = [launcher_script_unit(port=free_port()), serve_program_unit(port=free_port()),
             fork_shell_unit(port=free_port()), python_launcher_unit(port=free_port()),
             sudo_unit(port=free_port()), numactl_unit(port=free_port()), uv_unit(port=free_port()),
             conda_unit(port=free_port())]
    cluster = await start(make_cluster, units)
    data, text = await ask(cluster)
    got = by_unit(data)
    for u in units:
        svc = got[u.name]
        assert svc["state"] == "ready", (u.name, svc["reason"])  # the API URL came from the server's --port
        assert svc["api_url"].endswith(f":{u.port}")
        assert not any(NO_VLLM in w for w in svc["warnings"]), (u.name, svc["warnings"])
        assert svc["flags"]["port"] == str(u.port)
        assert svc["command"] and svc["settings_pid"]

    # The server is the main process itself: a launcher script of another name, exec-ing prefixes.
    for name in ("model-api.service", "llm-serve.service", "llm-numa.service"):
        svc = got[name]
        assert svc["settings_source"] == "process" and svc["settings_pid"] == svc["main_pid"]
        assert svc["model"] == "/models/x"
        assert svc["flags"]["tensor-parallel-size"] == "8" and svc["flags"]["max-model-len"] == "8192"
        assert svc["flags"]["served-model-name"] == ["x-8b"]
        assert svc["wrapper"] == "vllm-serve"

    # The server is a child: the main process is a wrapper that stays as its parent.
    expect = {
        "llm-shell.service": ("/models/y", "max-model-len", "4096", "a shell that starts it without exec"),
        "inference.service": ("/models/z", "tensor-parallel-size", "4", "does not run vLLM itself"),
        "vllm-sudo.service": ("/models/s", "max-model-len", "2048", "sudo -u vllm"),
        "llm-uv.service": ("/models/u", "tensor-parallel-size", "2", "uv run --project"),
        "llm-conda.service": ("/models/c", "max-model-len", "6144", "conda run -n vllm"),
    }
    for name, (model, flag, value, why) in expect.items():
        svc = got[name]
        assert svc["settings_source"] == "cgroup-process", name
        assert svc["settings_pid"] != svc["main_pid"]
        assert (svc["model"], svc["flags"][flag]) == (model, value), name
        note = svc["settings_note"]
        assert f"settings from PID {svc['settings_pid']}" in note and why in note, note
        assert f"settings from PID {svc['settings_pid']}" in text
        assert svc["command"][-2:] == ["--port", str(svc["flags"]["port"])]  # the child's argv, not the wrapper's
    assert got["llm-conda.service"]["flags"]["enable-prefix-caching"] is True
    # sudo resets the environment: the unit's variable never reached the server, and the answer says why.
    sudo = got["vllm-sudo.service"]
    assert any("NCCL_DEBUG is set in the unit but the vLLM process" in w and "sudo -u vllm" in w
               for w in sudo["warnings"]), sudo["warnings"]

    # Stopped, the settings come from the unit file, read through its prefixes.
    sim = cluster.sims["gpu-a"]
    await sim.stop_unit("llm-numa.service")
    await sim.stop_unit("vllm-sudo.service")
    data, _ = await ask(cluster)
    got = by_unit(data)
    numa, sudo = got["llm-numa.service"], got["vllm-sudo.service"]
    assert numa["state"] == "stopped" and numa["settings_source"] == "unit"
    assert (numa["model"], numa["flags"]["tensor-parallel-size"]) == ("/models/x", "8")
    assert (sudo["model"], sudo["flags"]["max-model-len"]) == ("/models/s", "2048")


async def test_json_flags_keep_their_text(make_cluster: MakeCluster) -> None:
    units = [json_flags_unit(port=free_port(), served_max_model_len=32768), cc_alias_unit(port=free_port())]
    cluster = await start(make_cluster, units)
    data, text = await ask(cluster)
    got = by_unit(data)
    flags = got["vllm-json.service"]["flags"]
    assert flags["compilation-config"] == COMPILATION_CONFIG  # not re-serialised: no spaces added
    assert flags["speculative-config"] == SPECULATIVE_CONFIG
    assert flags["model-loader-extra-config"] == '{"num_threads":8}'
    assert flags["hf-overrides"] == '{"max_position_embeddings":65536}'
    assert flags["override-generation-config"] == '{"temperature":0.6,"top_p":0.95}'
    assert flags["optimization-level"] == "3"
    assert got["vllm-cc.service"]["flags"]["compilation-config"] == COMPILATION_CONFIG
    # The one with a secret inside was changed by redaction, and the answer says so.
    assert got["vllm-json.service"]["redacted_flags"] == ["kv-transfer-config"]
    assert "redacted (secrets inside): --kv-transfer-config" in text
    assert COMPILATION_CONFIG in text and SPECULATIVE_CONFIG in text
    assert f"--compilation-config={COMPILATION_CONFIG}" in got["vllm-json.service"]["command"]
    # /v1/models is the second source: it reports another max_model_len than the command line asks for.
    warnings = " ".join(got["vllm-json.service"]["warnings"])
    assert "/v1/models reports max_model_len 32768" in warnings and "--max-model-len 65536" in warnings
    assert got["vllm-json.service"]["api_max_model_len"] == 32768
    no_secret(text, json.dumps(data))


async def test_redacted_json_flag_stays_valid_json(make_cluster: MakeCluster) -> None:
    cluster = await start(make_cluster, [json_flags_unit(port=free_port())])
    data, _ = await ask(cluster)
    kv = json.loads(data["data"]["services"][0]["flags"]["kv-transfer-config"])
    assert kv["kv_connector"] == "LMCacheConnectorV1"
    assert kv["kv_connector_extra_config"]["api_key"] == "[redacted]"


async def test_in_process_launcher_answers_from_vllms_log(make_cluster: MakeCluster) -> None:
    cluster = await start(make_cluster, [opaque_unit(port=free_port())])
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "ready"
    assert svc["settings_source"] == "vllm-log" and svc["settings_pid"] is None
    assert svc["model"] == "/models/opaque"
    assert svc["flags"]["tensor-parallel-size"] == "2" and svc["flags"]["max-model-len"] == "12288"
    assert svc["flags"]["api-key"] == ["[redacted]"]
    assert "non-default args" in svc["settings_note"] and "start-up log" in text
    tried = " ".join(svc["settings_tried"])
    assert f"/proc/{svc['main_pid']}/cmdline (main process)" in tried
    assert "none is a vLLM API server command line" in tried
    assert not any(NO_VLLM in w for w in svc["warnings"])
    no_secret(text, json.dumps(data))


async def test_only_the_api_answers(make_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """No command line with vLLM's arguments, no readable journal, no sudo: /v1/models (asked with the key
    the bot holds, over stdin) still tells the model and max_model_len, and the answer says what was tried."""
    monkeypatch.setenv("INFERBOT_TEST_MS_KEY", LAUNCHER_SECRET)
    unit = opaque_unit(port=free_port(), served_max_model_len=10240)
    cluster = await start(make_cluster, [unit], journal_readable=False, sudo_allowed=False,
                          services=[{"name": "ms", "node": "gpu-a", "unit": unit.name,
                                     "api_url": f"http://127.0.0.1:{unit.port}",  # nothing else tells the port
                                     "api_key_env": "INFERBOT_TEST_MS_KEY"}])
    data, text = await ask(cluster)
    svc = data["data"]["services"][0]
    assert svc["state"] == "ready"
    assert svc["settings_source"] == "api"
    assert svc["model"] == svc["api_model"] == "/models/opaque"
    assert svc["api_max_model_len"] == 10240
    tried = " ".join(svc["settings_tried"])
    assert "the journal (invocation): empty or not readable" in tried
    assert "/version: " in tried and "/v1/models: /models/opaque, max_model_len 10240" in tried
    assert "No flags besides the model" not in text
    assert "what was tried" in text and "max_model_len (/v1/models)" in text
    no_secret(text, json.dumps(data))


async def test_discovery_finds_launcher_units(make_cluster: MakeCluster) -> None:
    units = [launcher_script_unit(port=free_port()), python_launcher_unit(port=free_port()),
             opaque_unit(port=free_port()), conda_unit(port=free_port())]
    stopped = serve_program_unit(port=free_port())
    stopped.active_on_boot = False
    cluster = await start(make_cluster, [*units, stopped], services=[])  # the stopped one: by ExecStart= alone
    data, _ = await ask(cluster)
    found = sorted(s["unit"] for s in data["data"]["services"])
    assert found == sorted(u.name for u in [*units, stopped])  # and not ssh, cron, nvidia-persistenced
    assert {s["settings_source"] for s in data["data"]["services"]} == {"process", "cgroup-process", "vllm-log",
                                                                          "unit"}
