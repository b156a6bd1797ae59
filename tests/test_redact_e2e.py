"""Issue 22 end to end: the shapes that leaked, planted on a simulated node behind a real sshd, never reach
``inferbot ask``'s text, its ``--json``, its log output, the Slack messages or the state database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from services.sim.scenarios import LoadProfile, NodeScenario, UnitScenario, fast_profile
from tests.conftest import MakeCluster
from tests.samples.secrets.corpus import ISSUE22
from tests.sshd import free_port
from tests.systemd.helpers import ask
from tests.test_e2e_faults import _toml

UNIT = "vllm-redact.service"
URL_TOKEN_ENV = "SP9lxwPtTjKHMT0EhunlBvkmr2uzH1Lvf14TUEfj"  # a token as the user name of a URL, in a drop-in
URL_TOKEN_FLAG = "5qpHy26uSv5Pqdv1qXVT2HwAI0HLynlazYvc"  # the same in --otlp-traces-endpoint
YAML_EXPLICIT = "9QwErTy7UiOp3AsDfGh1JkLz"
YAML_ANCHOR = "4ZxCvBn8MqWeRt2YuIoP6aSd"
SPLIT_JSON = "1Ut9smiSZTnIgmoEnXNx9xWMpmq1dk4T"
PYDANTIC = "TWLHVgh2a9Lqi28vWqQiMp5qI4zDiM"

JOURNAL = [s.text for s in ISSUE22 if s.where == "journal"] + [
    'DEBUG 12-02 10:00:01 [cfg.py:30] request body: {"api_key":',
    f'  "{SPLIT_JSON}", "port": 8000}}',
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ServerSettings",
    "api_key",
    f"  String should have at least 40 characters [type=string_too_short, input_value='{PYDANTIC}', input_type=str]",
]
SECRETS = sorted({v for s in ISSUE22 for v in s.secrets}
                 | {URL_TOKEN_ENV, URL_TOKEN_FLAG, YAML_EXPLICIT, YAML_ANCHOR, SPLIT_JSON, PYDANTIC})

CONFIG_YAML = (
    "max-model-len: 4096\n"
    "? api-key\n"
    f": {YAML_EXPLICIT}\n"
    f"x-common: &tok {YAML_ANCHOR}\n"
    "kv-transfer-config:\n"
    "  kv_connector: LMCacheConnectorV1\n"
    "  kv_role: kv_both\n"
    "  kv_connector_extra_config: {api_key: *tok}\n"
)
START = (
    "cat {root}/etc/vllm/redact-journal.txt\n"
    "exec {root}/opt/vllm/venv/bin/vllm serve /models/redact --config {root}/etc/vllm/redact.yaml "
    f"--otlp-traces-endpoint https://{URL_TOKEN_FLAG}@otel.example.net:4318/v1/traces --port {{port}}\n"
)


def redact_unit(port: int) -> UnitScenario:
    """A unit whose drop-in, flags, --config file and journal hold every shape of issue 22."""
    text = ("[Unit]\nDescription=vLLM with secrets in every shape\n\n[Service]\n"
            "ExecStart=/bin/sh {root}/opt/redact-start.sh\nRestart=no\n")
    drop_in = ("[Service]\n"
               f'Environment="OTEL_EXPORTER_OTLP_ENDPOINT=https://{URL_TOKEN_ENV}@otel.example.net:4318/v1/traces"\n')
    profile = fast_profile(shards=2, model_gib=1.2)
    assert isinstance(profile, LoadProfile)
    return UnitScenario(name=UNIT, text=text, port=port, drop_ins={"override.conf": drop_in}, profile=profile,
                        files={"{root}/opt/redact-start.sh": START,
                               "{root}/etc/vllm/redact.yaml": CONFIG_YAML,
                               "{root}/etc/vllm/redact-journal.txt": "\n".join(JOURNAL) + "\n"})


def cli(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INFERBOT_LOG_LEVEL": "DEBUG"}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args, "--config", str(config)], capture_output=True,
                          text=True, env=env, timeout=90)


async def test_no_issue22_shape_reaches_any_output(make_cluster: MakeCluster, tmp_path: Path) -> None:
    port = free_port()
    cluster = await make_cluster({"gpu-a": NodeScenario(hostname="gpu-r", units=[redact_unit(port)])})
    sim = cluster.sims["gpu-a"]
    await sim.wait_for(UNIT, "ready", 45)
    journal = await asyncio.to_thread(sim.journal_path().read_text, errors="replace")
    assert URL_TOKEN_FLAG in journal and SPLIT_JSON in journal and PYDANTIC in journal  # the node does hold them

    cfg = tmp_path / "inferbot.toml"
    cfg.write_text(_toml(cluster))
    outputs: dict[str, str] = {}
    for q in ("settings for vllm-redact", "logs vllm-redact 200", "status"):
        for fmt in ((), ("--json",)):
            proc = await asyncio.to_thread(cli, "ask", q, *fmt, config=cfg)
            assert proc.returncode == 0, proc.stderr
            outputs[f"{q} {fmt} stdout"] = proc.stdout
            outputs[f"{q} {fmt} log"] = proc.stderr
    settings = json.loads(outputs["settings for vllm-redact ('--json',) stdout"])["data"]["services"][0]
    assert settings["state"] == "ready" and settings["flags"]["max-model-len"] == "4096"
    assert settings["flags"]["otlp-traces-endpoint"] == "https://[redacted]@otel.example.net:4318/v1/traces"
    assert settings["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "https://[redacted]@otel.example.net:4318/v1/traces"
    assert settings["flags"]["api-key"] == "[redacted]"  # from the --config file's explicit key
    logs = outputs["logs vllm-redact 200 () stdout"]
    assert "[auth.py:88] refreshing token=" in logs and "('host', 'api.example.net')" in logs  # context stays
    assert "Application startup complete." in logs
    assert '"level": "debug"' in outputs["settings for vllm-redact ('--json',) log"]  # the log was on

    answer = await ask(cluster.config, "logs vllm-redact 200")  # in process: the Slack messages too
    outputs["slack"] = answer.slack
    outputs["state database"] = b"".join(p.read_bytes() for p in sorted(cluster.config.state.directory().rglob("*"))
                                         if p.is_file()).decode("utf-8", "replace")
    leaks = [(secret, where) for secret in SECRETS for where, out in outputs.items() if secret in out]
    assert not leaks, f"{len(leaks)} leaks: {leaks}"
