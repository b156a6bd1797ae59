"""Record what a real-systemd node running a loaded, busy vLLM answers the bot's questions (issue 26, goal 6).

    python -m bench.real_record [--out tests/samples/probe/real-systemd]     # as root; boots a container

The real-systemd tier's container (``tests/systemd/container.py``: Debian 12, systemd 252 as PID 1, journald,
sshd) runs the Kimi unit as an operator writes it — NCCL ``Environment=`` lines, an ``EnvironmentFile`` with
the tokens, the console script of a venv, every flag of the deployment — with the stand-in vLLM in its busy
mode (``tests/systemd/standin_busy.py``): the journal of a whole start and of the traffic since, in vLLM's
formats; a busy engine's whole ``/metrics``; eight worker processes holding the GPUs of a fake ``nvidia-smi``
(the one part that cannot be real here). Then the bot itself asks it over real SSH — every question of
:data:`QUESTIONS`, through ``bot.dispatch.answer`` — and each remote command it runs is recorded with what the
node printed. The cheap nodes of ``bench.real_cheap`` replay these answers (by the command), so the bot's
client work is measured on answers carrying a real journal, real ``/metrics`` text and real unit text.

Writes ``OUT/<id>.out`` (the node's stdout for the command whose sha256 starts with ``id``) and
``OUT/meta.json`` (the service's unit and bench_dir, each question's commands, sizes, and how long the node took
to answer each: ``node_s``, from the command's start to its last byte, what the cheap nodes can wait before
replaying it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT
from services.sim.scenarios import KIMI_UNIT

OUT = REPO_ROOT / "tests" / "samples" / "probe" / "real-systemd"
BENCH_DIR = "/var/lib/vllm/bench"
QUESTIONS = ("what are current settings?", "status", "gpu status", "throughput", "logs kimi")
"""What is recorded: the questions of the bursts and the settings question of the client-CPU contender."""
SYSTEMD_TESTS = REPO_ROOT / "tests" / "systemd"
BENCH_SAMPLES = REPO_ROOT / "tests" / "samples" / "bench" / "json"

UNIT = """[Unit]
Description=vLLM Kimi-K2.5 INT4 1T MoE Inference Server
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec=10
StartLimitBurst=5

[Service]
Type=simple
WorkingDirectory=/opt/vllm
Environment=NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS NCCL_MAX_NCHANNELS=16 NCCL_BUFFSIZE=16777216 \
NCCL_NTHREADS=512 CUDA_DEVICE_MAX_CONNECTIONS=1
Environment=VLLM_WORKER_MULTIPROC_METHOD=spawn
EnvironmentFile=/etc/vllm/kimi.env
ExecStartPre=/bin/sh -c 'nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >/dev/null'
ExecStart=/opt/vllm/venv/bin/vllm serve /shared/kimi-k2.5-int4 \\
    --served-model-name kimi-k2.5 \\
    --tensor-parallel-size 8 \\
    --max-model-len 131072 \\
    --gpu-memory-utilization 0.95 \\
    --tool-call-parser kimi_k2 \\
    --reasoning-parser kimi_k2 \\
    --enable-auto-tool-choice \\
    --trust-remote-code \\
    --host 0.0.0.0 \\
    --port {port} \\
    --api-key ${{VLLM_API_KEY}}
Restart=on-failure
RestartSec=10
TimeoutStartSec=3600
TimeoutStopSec=120
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
"""
ENV_FILE = ("HF_TOKEN=hf_kX9mQ2vLpR7tYwZ4nB8cJ3dF6gH1sA5eU0iO\n"
            "VLLM_API_KEY=sk-kimi-7f3a9c2e5b8d1f4a6c0e9b2d5f8a1c4e\n")
GPUS = "".join(
    f"{i}, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, GPU-{i}a1b2c3d-{i}e5f-6a7b-8c9d-0e1f2a3b4c0{i}, "
    f"{92995 - i}, 97887, {88 + i % 5}, {71 + i % 4}, {431.5 + 7.25 * i:.2f}\n" for i in range(8))
NVIDIA_SMI = """#!/bin/sh
# The one fake part: this container has no GPUs. Busy GPUs, and the stand-in's eight workers holding them.
case "$*" in
  *--query-gpu=*) cat /etc/inferbot/gpus.csv ;;
  *--query-compute-apps=*) cat /run/standin-gpu-apps.csv 2>/dev/null ;;
  *) echo "NVIDIA-SMI 580.95.05    Driver Version: 580.95.05    CUDA Version: 13.0" ;;
esac
"""


def prepare(port: int) -> Any:
    """What goes into the container's root before it boots."""
    def write(root: Path) -> None:
        venv = root / "opt/vllm/venv/bin"
        venv.mkdir(parents=True)
        (venv / "python3").symlink_to("/usr/bin/python3")
        text = (SYSTEMD_TESTS / "standin_vllm.py").read_text()
        (venv / "vllm").write_text(text.replace("#!/usr/bin/python3", "#!/opt/vllm/venv/bin/python3", 1))
        shutil.copy(SYSTEMD_TESTS / "standin_busy.py", venv / "standin_busy.py")
        (venv / "vllm").chmod(0o755)
        (root / "shared/kimi-k2.5-int4").mkdir(parents=True)
        (root / "etc/inferbot/standin-busy").write_text("")
        (root / "etc/inferbot/gpus.csv").write_text(GPUS)
        smi = root / "usr/local/bin/nvidia-smi"
        smi.write_text(NVIDIA_SMI)
        smi.chmod(0o755)
        env = root / "etc/vllm/kimi.env"
        env.parent.mkdir(parents=True)
        env.write_text(ENV_FILE)
        env.chmod(0o600)
        bench = root / BENCH_DIR.lstrip("/")
        bench.mkdir(parents=True)
        for f in sorted(BENCH_SAMPLES.glob("openai-*.json")):
            shutil.copy(f, bench / f.name.replace("GLM-5-FP8", "kimi-k2.5-int4"))
        unit = root / "etc/systemd/system" / KIMI_UNIT
        unit.write_text(UNIT.format(port=port))
        (root / "etc/systemd/system/multi-user.target.wants" / KIMI_UNIT).symlink_to(f"../{KIMI_UNIT}")

    return write


Ran = dict[str, list[tuple[str, str, float]]]


async def ask_all(config_path: Path, questions: tuple[str, ...]) -> Ran:
    """Ask each question through the bot; the command, stdout and the node's time of every remote command it
    ran."""
    from bot.app import runtime
    from bot.dispatch import answer
    from config.loader import load_config
    from config.models import Node
    from handlers.context import Asker
    from services.models import CommandResult

    config = load_config(str(config_path))
    ran: Ran = {}
    async with runtime(config) as rt:
        real_run = rt.pool.run

        async def recording(node: Node, command: str, *a: Any, **kw: Any) -> CommandResult:
            result = await real_run(node, command, *a, **kw)
            current.append((command, result.stdout, result.elapsed_s))
            return result

        rt.pool.run = recording  # type: ignore[method-assign]
        for q in questions:
            current: list[tuple[str, str, float]] = []
            reply = await answer(q, rt.context(Asker(surface="slack"), service_data=False))
            if not reply.ok:
                raise RuntimeError(f"{q!r} was not answered: {reply.error}")
            ran[q] = current
    return ran


def write(out: Path, ran: Ran, started: float) -> dict[str, Any]:
    """The answers by command (its sha256's first 16 hex digits), and what they are."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.out"):
        old.unlink()
    commands: dict[str, dict[str, Any]] = {}
    questions: dict[str, list[str]] = {}
    for q, pairs in ran.items():
        questions[q] = []
        for command, stdout, node_s in pairs:
            digest = command_id(command)
            (out / f"{digest}.out").write_text(stdout)
            commands[digest] = {"command_bytes": len(command.encode()), "answer_bytes": len(stdout.encode()),
                                "node_s": round(node_s, 3)}
            questions[q].append(digest)
    meta = {"unit": KIMI_UNIT, "bench_dir": BENCH_DIR, "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                                     time.gmtime(started)),
            "from": "tests/systemd container (systemd 252, journald), the stand-in vLLM in its busy mode "
                    "(tests/systemd/standin_busy.py), asked over real SSH by bot.dispatch.answer",
            "questions": questions, "commands": commands}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def command_id(command: str) -> str:
    """How a recorded answer is named: the first 16 hex digits of its command's sha256."""
    return hashlib.sha256(command.encode()).hexdigest()[:16]


def record(out: Path, settle_s: float) -> dict[str, Any]:
    """Boot the container, let the busy server run a while, ask, write."""
    from tests.sshd import ClientKey, free_port
    from tests.systemd import container as ct

    why = ct.missing_requirements()
    if why is not None:
        raise SystemExit(f"bench.real_record: the real-systemd tier {why}")
    work = Path(tempfile.mkdtemp(prefix="inferbot-realrec-"))
    started = time.time()
    try:
        key = ClientKey(work)
        port = free_port()
        with ct.booted(key.public.read_text(), prepare(port)) as c:
            c.wait_active([KIMI_UNIT])
            c.wait_listening([port])
            time.sleep(settle_s)  # live traffic: access and stats lines after the start's
            known = work / "known_hosts"
            known.write_text(c.known_hosts_line() + "\n")
            cfg = work / "inferbot.toml"
            cfg.write_text(
                f'[[nodes]]\nname = "real"\nhost = "127.0.0.1"\nport = {c.ssh_port}\nuser = "{ct.LOGIN_USER}"\n'
                f'key_file = "{key.private}"\nknown_hosts = "{known}"\ntimeout = "30s"\n\n'
                f'[[services]]\nname = "kimi"\nnode = "real"\nunit = "{KIMI_UNIT}"\nbench_dir = "{BENCH_DIR}"\n\n'
                f'[state]\ndir = "{work / "state"}"\n')
            ran = asyncio.run(ask_all(cfg, QUESTIONS))
        return write(out, ran, started)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    """Entry point of ``python -m bench.real_record``."""
    p = argparse.ArgumentParser(prog="python -m bench.real_record", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--settle", type=float, default=12.0, help="seconds of live traffic before asking")
    args = p.parse_args()
    meta = record(args.out, args.settle)
    print(json.dumps(meta, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
