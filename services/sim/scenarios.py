"""What a simulated node looks like: GPUs, units (real unit-file text), load profiles, knobs for failures.

Unit texts, drop-ins and env-file paths are templates: ``{root}`` becomes the node's root directory and
``{port}`` the unit's port (plain ``str.replace``, so ``${VAR}`` and JSON braces stay as written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FailAt = Literal["oom", "startup", "kv"]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoadProfile(_M):
    """How the fake vLLM server behaves; written to a JSON file the process reads (``INFERBOT_SIM_PROFILE``)."""

    version: str = "0.20.1"
    architecture: str = "DeepseekV3ForCausalLM"
    shards: int = 119
    seconds_per_shard: float = 12.0
    init_s: float = 20.0  # imports, engine config, worker start-up, before the first shard
    kv_s: float = 60.0  # memory profiling and KV-cache allocation
    compile_s: float = 240.0  # torch.compile + CUDA graph capture
    api_s: float = 3.0  # routes, uvicorn start-up
    model_gib: float = 67.14  # weights per GPU ("Model loading took 67.14 GiB memory ...")
    graph_gib: float = 0.95
    ascii_banner: bool = False  # 6-line logo instead of "vLLM server version X, serving model Y"
    tqdm_desc: str = "Loading safetensors checkpoint shards"
    fail_at: FailAt | None = None  # "oom" during weights, "startup" right away, "kv" at KV-cache profiling
    fail_shard: int | None = None  # shard at which "oom" happens (default: half way)
    exit_code: int = 1
    health_503_after_s: float | None = None  # engine dies this long after ready; API stays up (503)
    engine_death_exit: int | None = None  # after the engine died the API server exits with this status (vLLM: 0)
    hang_connections: bool = False  # during the load the port accepts TCP but never answers
    started_ago_s: float = 0.0  # first start only: the load began this long ago (backdated)
    traffic_tps: float = 0.0  # generation tokens/s once ready
    prompt_tps: float | None = None  # default: 3x traffic_tps
    running: int | None = None  # running requests while traffic flows (default from traffic_tps)
    waiting: int = 0
    kv_usage: float | None = None  # KV-cache usage fraction while traffic flows
    hung: bool = False  # running > 0 but the generation counter is frozen
    stats_interval_s: float = 10.0
    old_metric_names: bool = False  # vllm:gpu_cache_usage_perc / vllm:time_per_output_token_seconds
    shutdown_s: float = 0.3  # after SIGTERM: keeps answering this long, then exits 0
    served_max_model_len: int | None = None  # /v1/models reports this (vLLM auto-fit), not --max-model-len
    completion_fail: bool = False  # once ready, /v1/completions answers 500 with vLLM's error body
    completion_hang: bool = False  # once ready, /v1/completions never answers
    # Filled in by the node (not a knob): the GPU size, so memory can follow --gpu-memory-utilization.
    gpu_total_mib: int = 97887
    gpu_uuids: list[str] = Field(default_factory=list)

    def total_load_s(self) -> float:
        return self.init_s + self.shards * self.seconds_per_shard + self.kv_s + self.compile_s + self.api_s


class UnitScenario(_M):
    """One systemd service on the node."""

    name: str  # "vllm-kimi-k25-int4.service" (a template instance "vllm@8004.service" uses file "vllm@.service")
    text: str  # the unit file (template)
    file_name: str | None = None  # defaults to ``name`` (or the template name for instances)
    drop_ins: dict[str, str] = Field(default_factory=dict)  # "override.conf" -> text (template)
    env_files: dict[str, str] = Field(default_factory=dict)  # "{root}/etc/vllm/kimi.env" -> content
    env_file_mode: int = 0o644
    files: dict[str, str] = Field(default_factory=dict)  # other files it reads (launcher configs), templates
    enabled: bool = True
    active_on_boot: bool = True  # started by SimNode.start()
    port: int = 8000
    gpu_indices: list[int] | None = None  # GPUs the service uses, in CUDA order (default: 0..n-1)
    profile: LoadProfile = Field(default_factory=LoadProfile)


class GpuSpec(_M):
    count: int = 8
    name: str = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    memory_total_mib: int = 97887
    power_limit_w: float = 600.0
    idle_power_w: float = 22.5
    idle_used_mib: int = 2
    pci_bus_start: int = 0x18


class StaticUnit(_M):
    """A non-vLLM unit that is just there (list-units, discovery): never started, never changes."""

    name: str
    description: str
    exec_start: str
    active: bool = True


def _default_static_units() -> list[StaticUnit]:
    return [
        StaticUnit(name="ssh.service", description="OpenBSD Secure Shell server", exec_start="/usr/sbin/sshd -D"),
        StaticUnit(name="cron.service", description="Regular background program processing daemon",
                   exec_start="/usr/sbin/cron -f $EXTRA_OPTS"),
        StaticUnit(name="nvidia-persistenced.service", description="NVIDIA Persistence Daemon",
                   exec_start="/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode"),
    ]  # fmt: skip


class NodeScenario(_M):
    hostname: str = "gpu-node-1"
    gpus: GpuSpec = Field(default_factory=GpuSpec)
    units: list[UnitScenario] = Field(default_factory=list)
    static_units: list[StaticUnit] = Field(default_factory=_default_static_units)
    sudo_allowed: bool = True  # `sudo -n CMD` works for the login user
    polkit_allows_user: bool = False  # a non-root login may run systemctl start/stop/restart without sudo
    journal_readable: bool = True  # a non-root login can read the system journal (adm/systemd-journal)
    root_only_proc: bool = False  # unit processes run as root even with run_as: their environ is unreadable
    hung_systemctl: bool = False  # every systemctl call sleeps 60 s (SimNode.set_hung_systemctl to toggle)
    nvidia_smi_broken: bool = False  # "NVIDIA-SMI has failed because it couldn't communicate ..." rc 9
    gpu_free_delay_s: float = 3.0  # GPU memory of exited processes is released this much later
    stop_timeout_s: float = 5.0  # TimeoutStopSec: SIGKILL after this
    tick_s: float = 0.5  # how often GPU numbers are re-rendered
    bench_dir: str = "{root}/home/ops/bench"
    bench_files: dict[str, str] = Field(default_factory=dict)  # file name -> JSON text

    def render(self, text: str, root: Path, port: int = 0) -> str:
        return text.replace("{root}", str(root)).replace("{port}", str(port))


# ---------------------------------------------------------------------------------------------------------
# Builders

KIMI_UNIT = "vllm-kimi-k25-int4.service"
QWEN_UNIT = "vllm-qwen3.service"

_KIMI_TEXT = """\
[Unit]
Description=vLLM Kimi-K2.5 INT4 1T MoE Inference Server
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec={start_limit_interval}
StartLimitBurst={start_limit_burst}

[Service]
Type=simple
WorkingDirectory={root}/opt/vllm
Environment=NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS NCCL_MAX_NCHANNELS=16 NCCL_BUFFSIZE=16777216 \
NCCL_NTHREADS=512 CUDA_DEVICE_MAX_CONNECTIONS=1
Environment=VLLM_WORKER_MULTIPROC_METHOD=spawn
EnvironmentFile={root}/etc/vllm/kimi.env
ExecStartPre=/bin/bash -c 'for i in $$(seq 1 30); do free=$$(nvidia-smi --query-gpu=memory.used \
--format=csv,noheader,nounits | sort -rn | head -1); [ "$$free" -lt 1000 ] && exit 0; \
echo "Waiting for GPU memory to free (max used: $${free} MiB)"; sleep {pre_sleep}; done; exit 1'
ExecStart={root}/opt/vllm/venv/bin/vllm serve /shared/kimi-k2.5-int4 \\
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
    --api-key ${VLLM_API_KEY}
Restart={restart}
RestartSec={restart_sec}
TimeoutStartSec=3600
TimeoutStopSec=120
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
"""

KIMI_HF_TOKEN = "hf_kX9mQ2vLpR7tYwZ4nB8cJ3dF6gH1sA5eU0iO"
KIMI_API_KEY = "sk-kimi-7f3a9c2e5b8d1f4a6c0e9b2d5f8a1c4e"


def _bench_json(
    *, date: str, concurrency: int, output_tps: float, peak_tps: float, model: str, tpot_ms: float, n: int
) -> str:
    completed = n
    out_tokens = n * 512
    duration = out_tokens / output_tps
    data = {
        "date": date,
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": n,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": concurrency,
        "duration": round(duration, 6),
        "completed": completed,
        "failed": 0,
        "total_input_tokens": n * 1024,
        "total_output_tokens": out_tokens,
        "request_throughput": round(completed / duration, 6),
        "request_goodput": None,
        "output_throughput": output_tps,
        "total_token_throughput": round(output_tps * 3, 4),
        "max_output_tokens_per_s": peak_tps,
        "max_concurrent_requests": concurrency,
        "mean_ttft_ms": 412.7,
        "median_ttft_ms": 388.1,
        "std_ttft_ms": 97.3,
        "p99_ttft_ms": 905.4,
        "mean_tpot_ms": tpot_ms,
        "median_tpot_ms": round(tpot_ms * 0.98, 3),
        "std_tpot_ms": 1.2,
        "p99_tpot_ms": round(tpot_ms * 1.4, 3),
        "mean_itl_ms": tpot_ms,
        "median_itl_ms": round(tpot_ms * 0.97, 3),
        "std_itl_ms": 3.1,
        "p99_itl_ms": round(tpot_ms * 2.2, 3),
    }
    return json.dumps(data, indent=None)


def kimi_bench_files() -> dict[str, str]:
    m = "/shared/kimi-k2.5-int4"
    return {
        "openai-infqps-concurrency1-kimi-k2.5-int4-20260221-101530.json": _bench_json(
            date="20260221-101530", concurrency=1, output_tps=82.5, peak_tps=91.0, model=m, tpot_ms=12.1, n=20
        ),
        "openai-infqps-concurrency8-kimi-k2.5-int4-20260221-103012.json": _bench_json(
            date="20260221-103012", concurrency=8, output_tps=498.31, peak_tps=560.0, model=m, tpot_ms=15.8, n=80
        ),
        "openai-infqps-concurrency64-kimi-k2.5-int4-20260221-110544.json": _bench_json(
            date="20260221-110544", concurrency=64, output_tps=1536.42, peak_tps=1792.0, model=m, tpot_ms=39.6,
            n=640,
        ),
        # An older run with a different build: higher number, must not count as the current peak.
        "openai-infqps-concurrency64-kimi-k2.5-int4-20260214-091203.json": _bench_json(
            date="20260214-091203", concurrency=64, output_tps=1712.9, peak_tps=1950.0, model=m, tpot_ms=35.2,
            n=640,
        ),
    }  # fmt: skip


def kimi_unit(
    *,
    fast: bool,
    port: int = 8000,
    restart: str = "on-failure",
    restart_sec: float | None = None,
    start_limit_burst: int = 5,
    start_limit_interval_s: float = 10.0,
    profile: LoadProfile | None = None,
) -> UnitScenario:
    if profile is None:
        profile = fast_profile() if fast else LoadProfile()
    text = (
        _KIMI_TEXT.replace("{start_limit_interval}", f"{start_limit_interval_s:g}")
        .replace("{start_limit_burst}", str(start_limit_burst))
        .replace("{pre_sleep}", "0.2" if fast else "10")
        .replace("{restart}", restart)
        .replace("{restart_sec}", f"{restart_sec if restart_sec is not None else (0.2 if fast else 30):g}")
    )
    return UnitScenario(
        name=KIMI_UNIT,
        text=text,
        env_files={"{root}/etc/vllm/kimi.env": f"HF_TOKEN={KIMI_HF_TOKEN}\nVLLM_API_KEY={KIMI_API_KEY}\n"},
        port=port,
        profile=profile,
    )


def fast_profile(**overrides: object) -> LoadProfile:
    """A load of about 1 s (plus ~0.3 s of Python start-up): 119 shards, every phase present."""
    base: dict[str, object] = {
        "init_s": 0.1,
        "seconds_per_shard": 0.004,
        "kv_s": 0.1,
        "compile_s": 0.15,
        "api_s": 0.05,
        "stats_interval_s": 0.5,
        "shutdown_s": 0.1,
    }
    base.update(overrides)
    return LoadProfile.model_validate(base)


def kimi_node(
    root: Path | None = None,
    fast: bool = False,
    *,
    port: int = 8000,
    started_ago_s: float | None = None,
    hostname: str = "gpu-node-1",
    traffic_tps: float = 0.0,
) -> NodeScenario:
    """The brief's deployment: 8x RTX PRO 6000 Blackwell, Kimi-K2.5 INT4 TP=8, ~30 min load (unless ``fast``).

    ``started_ago_s`` defaults to 780 s (13 minutes into the load) for the slow demo, 0 when ``fast``.
    ``root`` is accepted for symmetry with ``SimNode``; templates are rendered when the node starts.
    """
    del root
    unit = kimi_unit(fast=fast, port=port)
    unit.profile.started_ago_s = (0.0 if fast else 780.0) if started_ago_s is None else started_ago_s
    unit.profile.traffic_tps = traffic_tps
    return NodeScenario(
        hostname=hostname,
        gpus=GpuSpec(),
        units=[unit],
        gpu_free_delay_s=0.5 if fast else 20.0,
        stop_timeout_s=3.0 if fast else 30.0,
        tick_s=0.25 if fast else 1.0,
        bench_files=kimi_bench_files(),
    )


_QWEN_TEXT = """\
[Unit]
Description=vLLM Qwen3-32B (TP=2)
After=network-online.target

[Service]
Environment="HF_HOME=/var/cache/huggingface" VLLM_LOGGING_LEVEL=INFO
Environment="VLLM_LOGGING_PREFIX=[qwen3] "
ExecStart={root}/opt/vllm/venv/bin/vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2 \\
    --max-model-len 32768 --gpu-memory-utilization 0.92 --enable-prefix-caching \\
    --host 127.0.0.1 --port {port}
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
"""


def qwen_node(
    root: Path | None = None,
    fast: bool = False,
    *,
    port: int = 8001,
    hostname: str = "gpu-node-2",
    traffic_tps: float = 900.0,
) -> NodeScenario:
    """A second, ready node: Qwen3-32B TP=2 on 2x H100 with steady traffic."""
    del root
    profile = (
        fast_profile(shards=17, model_gib=30.6, architecture="Qwen3ForCausalLM")
        if fast
        else LoadProfile(shards=17, seconds_per_shard=2.0, init_s=8, kv_s=10, compile_s=30,
                         model_gib=30.6, architecture="Qwen3ForCausalLM", started_ago_s=3 * 86400.0)
    )  # fmt: skip
    profile.traffic_tps = traffic_tps
    profile.running = 24 if traffic_tps else 0
    profile.kv_usage = 0.41 if traffic_tps else 0.0
    unit = UnitScenario(
        name=QWEN_UNIT,
        text=_QWEN_TEXT,
        port=port,
        profile=profile,
    )
    return NodeScenario(
        hostname=hostname,
        gpus=GpuSpec(count=2, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, power_limit_w=700.0,
                     idle_power_w=69.8),
        units=[unit],
        gpu_free_delay_s=0.5 if fast else 5.0,
        stop_timeout_s=3.0 if fast else 30.0,
        tick_s=0.25 if fast else 1.0,
    )  # fmt: skip


# Small units for tests of odd deployments -------------------------------------------------------------------


def bash_unit(name: str = "vllm-bash.service", *, port: int = 8002, fast: bool = True) -> UnitScenario:
    """``ExecStart=/bin/bash -c '...'``: bash expands the variables and execs the console script."""
    text = """\
[Unit]
Description=vLLM via bash wrapper

[Service]
Environment=MODEL=Qwen/Qwen3-0.6B "EXTRA_ARGS=--max-model-len 4096 --enforce-eager"
ExecStart=/bin/bash -c 'exec {root}/opt/vllm/venv/bin/vllm serve "$MODEL" $EXTRA_ARGS --port {port}'
Restart=no
"""
    return UnitScenario(name=name, text=text, port=port, profile=fast_profile(shards=1, model_gib=1.2) if fast
                        else LoadProfile(shards=1, model_gib=1.2))  # fmt: skip


def docker_unit(name: str = "vllm-docker.service", *, port: int = 8003, fast: bool = True) -> UnitScenario:
    """``ExecStart=/usr/bin/docker run ... image --model ...`` (the fake docker runs the fake vLLM)."""
    text = """\
[Unit]
Description=vLLM in docker
After=docker.service
Requires=docker.service

[Service]
ExecStartPre=-{root}/usr/bin/docker rm -f vllm-llama
ExecStart={root}/usr/bin/docker run --rm --name vllm-llama --gpus all --ipc=host -p {port}:8000 \\
    -e HF_TOKEN=hf_dockerSecretToken123 -e VLLM_LOGGING_LEVEL=INFO \\
    -v /srv/hf:/root/.cache/huggingface \\
    vllm/vllm-openai:v0.20.1 --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 16384
Restart=no
"""
    return UnitScenario(name=name, text=text, port=port, profile=fast_profile(shards=4, model_gib=15.0) if fast
                        else LoadProfile(shards=4, model_gib=15.0))  # fmt: skip


def file_log_unit(name: str = "vllm-filelog.service", *, port: int = 8004, fast: bool = True) -> UnitScenario:
    """``StandardOutput=append:/path``: the service's output goes to a file instead of the journal."""
    text = """\
[Unit]
Description=vLLM logging to a file

[Service]
ExecStart={root}/opt/vllm/venv/bin/vllm serve Qwen/Qwen3-0.6B --port {port}
StandardOutput=append:{root}/var/log/vllm/filelog.log
StandardError=inherit
"""
    return UnitScenario(name=name, text=text, port=port, profile=fast_profile(shards=2, model_gib=1.2) if fast
                        else LoadProfile(shards=2, model_gib=1.2))  # fmt: skip


def template_unit(instance: str = "8005", *, fast: bool = True) -> UnitScenario:
    """A template ``vllm@.service`` instantiated as ``vllm@8005.service`` (``%i`` is the port)."""
    text = """\
[Unit]
Description=vLLM instance %i

[Service]
ExecStart={root}/opt/vllm/venv/bin/vllm serve Qwen/Qwen3-0.6B --port %i
"""
    return UnitScenario(name=f"vllm@{instance}.service", file_name="vllm@.service", text=text,
                        port=int(instance) if instance.isdigit() else 8000,
                        profile=fast_profile(shards=1, model_gib=1.2) if fast
                        else LoadProfile(shards=1, model_gib=1.2))  # fmt: skip


# Launchers that are not `vllm serve` (issue 9): the settings must still be read ------------------------------

LAUNCHER_SECRET = "sk-lmcache-9d8c7b6a5f4e3d2c1b0a"
COMPILATION_CONFIG = '{"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}'
SPECULATIVE_CONFIG = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
KV_TRANSFER_CONFIG = (
    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both",'
    f'"kv_connector_extra_config":{{"api_key":"{LAUNCHER_SECRET}"}}}}'
)


def _small(fast: bool, **kw: object) -> LoadProfile:
    return fast_profile(shards=2, model_gib=1.2, **kw) if fast else LoadProfile(shards=2, model_gib=1.2)


def _unit(name: str, description: str, exec_start: str, *, port: int, fast: bool, extra: str = "",
          files: dict[str, str] | None = None, profile: LoadProfile | None = None) -> UnitScenario:
    text = (f"[Unit]\nDescription={description}\n\n[Service]\n{extra}ExecStart={exec_start}\nRestart=no\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
    return UnitScenario(name=name, text=text, port=port, files=files or {}, profile=profile or _small(fast))


_SERVE_ARGS = "/models/x --tensor-parallel-size 8 --max-model-len 8192 --served-model-name x-8b --port {port}"


def launcher_script_unit(name: str = "model-api.service", *, port: int = 8010, fast: bool = True) -> UnitScenario:
    """``python /opt/serve_model.py serve …``: a launcher script not called vllm, with vLLM's grammar."""
    return _unit(name, "Model API",
                 f"{{root}}/opt/vllm/venv/bin/python3 {{root}}/opt/serve_model.py serve {_SERVE_ARGS}",
                 port=port, fast=fast)  # fmt: skip


def serve_program_unit(name: str = "llm-serve.service", *, port: int = 8011, fast: bool = True) -> UnitScenario:
    """``/opt/bin/serve-model serve …``: an executable of another name (its shebang runs Python)."""
    return _unit(name, "LLM server", f"{{root}}/opt/bin/serve-model serve {_SERVE_ARGS}", port=port, fast=fast)


def fork_shell_unit(name: str = "llm-shell.service", *, port: int = 8012, fast: bool = True) -> UnitScenario:
    """A shell that does not exec: the server is the shell's child (the script goes on after it)."""
    script = "{root}/opt/vllm/venv/bin/vllm serve /models/y --max-model-len 4096 --port {port}; echo exited $?"
    return _unit(name, "LLM via shell", f"/bin/sh -c '{script}'", port=port, fast=fast)


def python_launcher_unit(name: str = "inference.service", *, port: int = 8013, fast: bool = True) -> UnitScenario:
    """A site's Python launcher that reads a JSON file and starts the server as its child."""
    cfg = json.dumps({"python": "{root}/opt/vllm/venv/bin/python3", "vllm": "{root}/opt/vllm/venv/bin/vllm",
                      "model": "/models/z", "args": ["--tensor-parallel-size", "4", "--max-model-len", "16384",
                                                     "--gpu-memory-utilization", "0.9", "--port", "{port}"]})
    return _unit(name, "Inference", "{root}/opt/vllm/venv/bin/python3 {root}/opt/launch.py {root}/etc/inference.json",
                 port=port, fast=fast, files={"{root}/etc/inference.json": cfg})  # fmt: skip


def sudo_unit(name: str = "vllm-sudo.service", *, port: int = 8014, fast: bool = True) -> UnitScenario:
    """``sudo -u vllm vllm serve …``: sudo stays as the parent and resets the environment."""
    return _unit(name, "vLLM as user vllm", "{root}/sim/bin/sudo -u vllm {root}/opt/vllm/venv/bin/vllm serve "
                 "/models/s --max-model-len 2048 --port {port}", port=port, fast=fast,
                 extra="Environment=NCCL_DEBUG=INFO\n")  # fmt: skip


def numactl_unit(name: str = "llm-numa.service", *, port: int = 8015, fast: bool = True) -> UnitScenario:
    """``numactl … taskset -c 0-31 python /opt/serve_model.py serve …``: prefixes that exec."""
    return _unit(name, "LLM pinned",
                 "{root}/usr/bin/numactl --cpunodebind=0 --membind=0 {root}/usr/bin/taskset -c 0-31 "
                 f"{{root}}/opt/vllm/venv/bin/python3 {{root}}/opt/serve_model.py serve {_SERVE_ARGS}",
                 port=port, fast=fast)  # fmt: skip


def uv_unit(name: str = "llm-uv.service", *, port: int = 8016, fast: bool = True) -> UnitScenario:
    """``uv run --project /opt/app vllm serve …``: uv stays as the parent."""
    return _unit(name, "LLM via uv", "{root}/usr/local/bin/uv run --project {root}/opt/app "
                 "{root}/opt/vllm/venv/bin/vllm serve /models/u -tp 2 --max-model-len 3072 --port {port}",
                 port=port, fast=fast)  # fmt: skip


def conda_unit(name: str = "llm-conda.service", *, port: int = 8017, fast: bool = True) -> UnitScenario:
    """``conda run -n vllm --no-capture-output python vllm serve …``: conda stays as the parent."""
    return _unit(name, "LLM via conda", "{root}/opt/conda/bin/conda run -n vllm --no-capture-output "
                 "{root}/opt/vllm/venv/bin/python3 {root}/opt/vllm/venv/bin/vllm serve /models/c "
                 "--enable-prefix-caching --max-model-len 6144 --port {port}", port=port, fast=fast)  # fmt: skip


def opaque_unit(name: str = "model-server.service", *, port: int = 8018, fast: bool = True,
                served_max_model_len: int | None = None) -> UnitScenario:
    """A launcher that runs vLLM in-process with arguments from a file: only the log and the API tell."""
    cfg = json.dumps({"model": "/models/opaque", "args": ["--tensor-parallel-size", "2", "--max-model-len", "12288",
                                                          "--api-key", LAUNCHER_SECRET, "--port", "{port}"]})
    profile = _small(fast, served_max_model_len=served_max_model_len) if fast else None
    return _unit(name, "Model server", "{root}/opt/vllm/venv/bin/python3 {root}/opt/model_server.py --settings "
                 "{root}/etc/model-server.json", port=port, fast=fast,
                 files={"{root}/etc/model-server.json": cfg}, profile=profile)  # fmt: skip


def json_flags_unit(name: str = "vllm-json.service", *, port: int = 8019, fast: bool = True,
                    served_max_model_len: int | None = None) -> UnitScenario:
    """JSON-valued flags in every spelling: ``--x='{…}'``, ``-cc``, ``-O3``, one with a secret inside."""
    return _unit(name, "vLLM with JSON flags",
                 "{root}/opt/vllm/venv/bin/vllm serve /models/j "
                 f"--compilation-config='{COMPILATION_CONFIG}' -O3 "
                 f"--speculative-config '{SPECULATIVE_CONFIG}' "
                 f"--kv-transfer-config '{KV_TRANSFER_CONFIG}' "
                 "--model-loader-extra-config '{\"num_threads\":8}' "
                 "--hf-overrides '{\"max_position_embeddings\":65536}' "
                 "--override-generation-config '{\"temperature\":0.6,\"top_p\":0.95}' "
                 "--max-model-len 65536 --port {port}",
                 port=port, fast=fast,
                 profile=_small(fast, served_max_model_len=served_max_model_len) if fast else None)  # fmt: skip


def cc_alias_unit(name: str = "vllm-cc.service", *, port: int = 8020, fast: bool = True) -> UnitScenario:
    """``-cc '{…}'``: the short alias of --compilation-config."""
    return _unit(name, "vLLM with -cc", f"{{root}}/opt/vllm/venv/bin/vllm serve /models/k -cc '{COMPILATION_CONFIG}' "
                 "--port {port}", port=port, fast=fast)  # fmt: skip


def launcher_node(units: list[UnitScenario], **kw: object) -> NodeScenario:
    """A node with small fast units of odd launchers, each on a GPU of its own."""
    for i, u in enumerate(units):
        u.gpu_indices = [i]
    base: dict[str, object] = {"hostname": "gpu-node-9", "gpus": GpuSpec(count=max(1, len(units))), "units": units,
                               "gpu_free_delay_s": 0.3, "stop_timeout_s": 3.0, "tick_s": 0.25}  # fmt: skip
    base.update(kw)
    return NodeScenario.model_validate(base)
