"""Against a real systemd 252 (Debian 12 container, systemd as PID 1) over real SSH with the product's client.

Every unit runs a stand-in vLLM server that keeps the exact argv and environment systemd gave it, so
quoting, ``$VAR``/``${VAR}``, ``%i``, ``Environment=``/``EnvironmentFile=`` and launchers are systemd's own,
not our parser's idea of them.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.samples.secrets import systemd_corpus as corpus
from tests.sim_truth import simulated
from tests.systemd.conftest import JSON_COMPILATION, LAUNCHERS, UNITS, RealNode
from tests.systemd.helpers import Answer, ask, state_bytes

NO_VLLM = "No `vllm serve` or vLLM api_server found"


async def settings(node: RealNode, tmp_path: Path, service: str) -> tuple[Answer, dict[str, Any]]:
    a = await ask(node.config(tmp_path), f"settings for {service}")
    assert a.json["intent"] == "settings", a.json
    return a, a.service()


async def test_standard_vllm_serve(real_node: RealNode, tmp_path: Path) -> None:
    a, svc = await settings(real_node, tmp_path, "std")
    assert svc["state"] == "ready" and svc["settings_source"] == "process"
    assert svc["model"] == "/models/std" and svc["version"] == "0.20.1"
    assert svc["flags"]["tensor-parallel-size"] == "2" and svc["flags"]["max-model-len"] == "8192"
    assert svc["flags"]["gpu-memory-utilization"] == "0.9"
    assert svc["env"] == {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_ALGO": "Ring"}  # ambient systemd vars dropped
    # /proc shows the console script's interpreter first: the same command, not drift.
    assert svc["command"][:3] == ["/opt/venv/bin/python", "/usr/local/bin/vllm", "serve"]
    assert "--tensor-parallel-size" in a.text and "active, ready" in a.text


async def test_launcher_script_of_another_name(real_node: RealNode, tmp_path: Path) -> None:
    a, svc = await settings(real_node, tmp_path, "serve-model")
    assert svc["state"] == "ready"
    assert svc["model"] == "/models/x"
    assert svc["flags"]["tensor-parallel-size"] == "8" and svc["flags"]["max-model-len"] == "32768"
    assert NO_VLLM not in a.text and not any(NO_VLLM in w for w in svc["warnings"])


async def test_wrapper_that_does_not_exec(real_node: RealNode, tmp_path: Path) -> None:
    # MainPID is `/bin/sh -c /opt/launch.sh`; the server is a grandchild in the unit's cgroup.
    a, svc = await settings(real_node, tmp_path, "wrapper")
    assert svc["model"] == "/models/wrapped"
    assert svc["flags"]["tensor-parallel-size"] == "4" and svc["flags"]["max-model-len"] == "16384"
    assert svc["state"] == "ready", svc["reason"]  # its port comes from the server's argv, not the shell's
    assert NO_VLLM not in a.text


async def test_sudo_u_vllm(real_node: RealNode, tmp_path: Path) -> None:
    a, svc = await settings(real_node, tmp_path, "sudo-vllm")
    assert svc["state"] == "ready"
    assert svc["model"] == "/models/sudo"
    assert svc["flags"]["pipeline-parallel-size"] == "2" and svc["flags"]["max-model-len"] == "2048"
    assert NO_VLLM not in a.text


# Launchers the product reads today (the server is MainPID); the others need the launcher branch.
@pytest.mark.parametrize("name", LAUNCHERS)
async def test_launcher_shapes(real_node: RealNode, tmp_path: Path, name: str) -> None:
    a, svc = await settings(real_node, tmp_path, name)
    assert svc["model"] == f"/models/{name}"
    assert svc["flags"]["max-model-len"] == "3072" and svc["flags"]["port"] == str(real_node.ports[name])
    assert svc["state"] == "ready", svc["reason"]
    assert NO_VLLM not in a.text


async def test_systemd_quoting_and_env_files(real_node: RealNode, tmp_path: Path) -> None:
    _, svc = await settings(real_node, tmp_path, "quoting")
    port = str(real_node.ports["quoting"])
    assert svc["state"] == "ready"
    assert svc["model"] == "/models/quoted"  # ${MODEL_DIR} from Environment=
    flags = svc["flags"]
    assert flags["port"] == port  # $PORT
    assert flags["served-model-name"] == ["quoted name"]  # "..." keeps the space
    assert flags["chat-template-content-format"] == 'str"ing'  # \" inside quotes
    # $EXTRA_ARGS from the EnvironmentFile= is split at whitespace into several words.
    assert flags["seed"] == "7" and flags["max-num-seqs"] == "64" and flags["max-model-len"] == "4096"
    env = svc["env"]
    assert env["GREETING"] == "hello world" and env["SINGLE"] == "a b"
    assert env["QUOTED_SINGLE"] == "x y" and env["QUOTED_DOUBLE"] == 'say "hi"'
    assert env["EXTRA_ARGS"] == "--seed 7 --max-num-seqs 64"
    assert svc["command"][-1] == "--max-model-len=4096"


async def test_template_instance_specifiers(real_node: RealNode, tmp_path: Path) -> None:
    _, svc = await settings(real_node, tmp_path, "tmpl")
    port = str(real_node.ports["tmpl"])
    assert svc["unit"] == real_node.template_unit and svc["state"] == "ready"
    assert svc["model"] == f"/models/tmpl-{port}"
    assert svc["flags"]["port"] == port and svc["flags"]["served-model-name"] == [f"tmpl-{port}"]
    assert svc["env"]["INSTANCE"] == port


async def test_json_flag_value_as_passed(real_node: RealNode, tmp_path: Path) -> None:
    a, svc = await settings(real_node, tmp_path, "json-flags")
    assert svc["flags"]["compilation-config"] == JSON_COMPILATION  # byte-identical, not re-serialised
    assert JSON_COMPILATION in a.text


async def test_json_flag_secrets_redacted_yet_valid_json(real_node: RealNode, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    a, svc = await settings(real_node, tmp_path, "json-flags")
    kv = json.loads(svc["flags"]["kv-transfer-config"])
    assert kv["kv_connector_extra_config"]["api_key"] == "[redacted]"
    loader = json.loads(svc["flags"]["model-loader-extra-config"])
    assert loader == {"token": "[redacted]"}
    assert "redact" in a.text.lower()  # the answer says the value was changed
    for out in (a.everything(), caplog.text, state_bytes(tmp_path).decode("utf-8", "replace")):
        assert "SECRETkvNested991" not in out
        assert "12345678901" not in out


async def test_daemon_reload_drift(real_node: RealNode, tmp_path: Path) -> None:
    unit = real_node.container.path("/etc/systemd/system/drift.service")
    unit.write_text(unit.read_text().replace("--max-model-len 1024", "--max-model-len 2048"))
    try:
        a, svc = await settings(real_node, tmp_path, "drift")
        assert any("NeedDaemonReload=yes" in w and "daemon-reload" in w for w in svc["warnings"]), svc["warnings"]
        assert "daemon-reload" in a.text
        assert svc["flags"]["max-model-len"] == "1024"  # the running process still has the old argv
    finally:
        unit.write_text(unit.read_text().replace("--max-model-len 2048", "--max-model-len 1024"))
        real_node.container.run("systemctl", "daemon-reload")


async def test_no_corpus_secret_in_any_output(real_node: RealNode, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """Every shape of the corpus, asked every way a user can, never shows up anywhere."""
    caplog.set_level(logging.DEBUG)
    cfg = real_node.config(tmp_path)
    answers = [await ask(cfg, q) for q in (
        "settings for corpus", "status", "logs corpus 200", "what changed on corpus?", "settings for corpus",
        "is corpus ready yet?", "logs nosuchservice 5", "settings for corpus on nosuchnode",
        "settings for corpus-fail", "logs corpus-fail 100", "is corpus-fail ready yet?",
    )]
    failed = answers[8].service()
    assert failed["state"] == "failed" and failed["reason"], failed  # the error path, with secrets in its log
    assert answers[0].service()["state"] == "ready"
    assert answers[2].json["intent"] == "logs" and "Application startup complete." in answers[2].everything()
    outputs = {f"answer {i}": a.everything() for i, a in enumerate(answers)}
    outputs["bot log"] = caplog.text
    outputs["state database"] = state_bytes(tmp_path).decode("utf-8", "replace")
    leaks = [(shape.name, where) for shape in corpus.SHAPES for v in shape.values
             for where, out in outputs.items() if v in out]
    assert not leaks, f"{len(leaks)} leaks: {leaks}"


async def test_corpus_secrets_really_are_on_the_node(real_node: RealNode) -> None:
    """The corpus check can fail: every value really reaches the node in clear (argv, environ, journal)."""
    c = real_node.container
    pid = c.run("systemctl", "show", "-p", "MainPID", "--value", "corpus.service").stdout.strip()
    raw = {
        "flag": c.run("cat", f"/proc/{pid}/cmdline").stdout,
        "environment": c.run("cat", f"/proc/{pid}/environ").stdout,
        "env-file": c.run("cat", f"/proc/{pid}/environ").stdout,
        "journal": c.run("journalctl", "-u", "corpus.service", "-o", "cat", "--no-pager").stdout,
    }
    missing = [(s.name, v) for s in corpus.SHAPES for v in s.values if v not in raw[s.where]]
    assert not missing, missing
    assert "'api_key': ['sk-corpusFlagKeyOne11', 'sk-corpusFlagKeyTwo22']" in raw["journal"]  # non-default args

AMBIENT = {"LANG", "LANGUAGE", "PATH", "INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID", "HOME", "LOGNAME",
           "USER", "SHELL", "NOTIFY_SOCKET", "MANAGERPID"}
RECORDING = Path(__file__).parents[1] / "samples/units/real-systemd.json"


def observed(node: RealNode, unit: str) -> dict[str, Any]:
    """What real systemd made of ``unit``: the files it read, and the main process's argv and environment."""
    c = node.container
    pid = c.run("systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()
    argv = c.run("cat", f"/proc/{pid}/cmdline").stdout.split("\0")[:-1]
    environ = dict(e.partition("=")[::2] for e in c.run("cat", f"/proc/{pid}/environ").stdout.split("\0") if e)
    fragment_name = re.sub(r"@[^.]+\.", "@.", unit)
    text = c.path(f"/etc/systemd/system/{fragment_name}").read_text()
    files = {}
    for line in text.splitlines():
        if line.startswith("EnvironmentFile="):
            p = line.split("=", 1)[1].lstrip("-")
            if c.path(p).exists():
                files[p] = c.path(p).read_text()
    return {"unit": unit, "fragment": fragment_name, "text": text, "env_files": files, "argv": argv,
            "env": {k: v for k, v in environ.items() if k not in AMBIENT}}


def test_simulator_reads_units_like_real_systemd(real_node: RealNode, tmp_path: Path) -> None:
    """The simulator's own unit reader gives the argv and environment the real systemd gave the process."""
    # Launchers that exec replace MainPID's argv with their own program's: compare the units they do not start.
    cases = [observed(real_node, u) for u in (*UNITS, real_node.template_unit) if not u.startswith("launch-")]
    mismatches = []
    for case in cases:
        argv, env = simulated(case, tmp_path)
        real_argv = case["argv"]
        if real_argv[:1] != argv[:1] and real_argv[1:2] == argv[:1]:
            real_argv = real_argv[1:]  # a script's shebang interpreter comes first in /proc
        if case["unit"] == "sudo-vllm.service":
            env = {k: v for k, v in env.items() if k in case["env"]}
        if (real_argv, case["env"]) != (argv, env):
            mismatches.append((case["unit"], real_argv, argv, case["env"], env))
    assert not mismatches, mismatches
    if os.environ.get("INFERBOT_RECORD_SYSTEMD"):
        keep = [c for c in cases if c["unit"] in ("syntax.service", "quoting.service", real_node.template_unit)]
        RECORDING.write_text(json.dumps(keep, indent=1, ensure_ascii=False) + "\n")


def _watched(states: list[Any]) -> list[tuple[Any, ...]]:
    """What the watcher reads of a poll (handlers/watcher.py, handlers/health_watch.py)."""
    return [(s.service, s.state, s.reason, s.active, s.main_pid, s.restarts, s.invocation_id, s.since)
            for s in states]


def _loop_pids(node: RealNode) -> list[int]:
    """The node's persistent session loops (the watch probe's ``sh -c`` with its read loop)."""
    # ("[t]": this grep's own command line does not match its pattern.)
    out = node.container.run("sh", "-c", "grep -l 'while IFS= read -r [_]; do' /proc/[0-9]*/cmdline 2>/dev/null",
                             check=False).stdout
    return [int(p.split("/")[2]) for p in out.split()]


async def test_the_watchers_persistent_session_reads_real_systemd_as_one_shot_probes_do(
        real_node: RealNode, tmp_path: Path) -> None:
    """The leader's watcher asks on one long-lived session per node: real systemd, every unit of the node."""
    import asyncio

    from handlers.watcher import WATCH_PROBE
    from services.cluster import Cluster
    from services.node.ssh import NodePool

    cfg = real_node.config(tmp_path)
    node = cfg.nodes[0]
    services = cfg.services_on(node.name)
    once = NodePool()
    try:
        report, expected, _ = await Cluster(cfg, once).probe_node(node, services, WATCH_PROBE)
    finally:
        await once.close()
    assert report.ok
    pool = NodePool()
    pool.keep_sessions(True)
    try:
        cluster = Cluster(cfg, pool)
        polls = [await cluster.probe_node(node, services, WATCH_PROBE) for _ in range(3)]
        assert pool.session_opens == 1 and pool.runs == 3 and all(r.ok for r, _, _ in polls)
        for _, states, _ in polls:
            assert _watched(states) == _watched(expected)
        by_name = {s.service: s for s in polls[-1][1]}
        assert by_name["std"].state == "ready" and by_name["corpus-fail"].state == "failed"
        leaks = [v for shape in corpus.SHAPES for v in shape.values
                 for _, states, _ in polls for s in states if v in s.model_dump_json()]
        assert not leaks, leaks
        # Between polls the node's loop waits in read(2): asleep, and no CPU spent.
        (pid,) = _loop_pids(real_node)

        def stat() -> list[str]:
            return real_node.container.run("cat", f"/proc/{pid}/stat").stdout.rpartition(")")[2].split()

        before = stat()
        await asyncio.sleep(2)
        after = stat()
        assert after[0] == "S" and after[11:13] == before[11:13], (before, after)  # state; utime, stime
    finally:
        await pool.close()
    deadline = asyncio.get_running_loop().time() + 10
    while _loop_pids(real_node):
        assert asyncio.get_running_loop().time() < deadline, "the session's loop outlived its channel"
        await asyncio.sleep(0.1)
