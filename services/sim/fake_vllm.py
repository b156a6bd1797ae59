"""A fake ``vllm serve`` process: logs like vLLM, takes real time to load, then serves vLLM's HTTP API.

Started by the simulated node through a console script (``<root>/opt/vllm/venv/bin/vllm``) with the unit's
real argv, so ``/proc/PID/cmdline`` and ``environ`` look like a real deployment. Its knobs come from the
JSON file named by ``INFERBOT_SIM_PROFILE`` (a :class:`services.sim.scenarios.LoadProfile`).

With ``INFERBOT_SIM_SIDEBAND=1`` every stdout line carries a sideband header the node strips:
``\\x1eL <epoch> <pid>\\x1f<message>`` (a log line: its timestamp, which may be backdated, and the PID of
the process that "wrote" it) or ``\\x1eC <json>`` (memory held on the GPUs, worker PIDs, phase).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Profile:
    """The fields of :class:`services.sim.scenarios.LoadProfile`, read without importing pydantic (start-up time)."""

    version: str
    architecture: str
    shards: int
    seconds_per_shard: float
    init_s: float
    kv_s: float
    compile_s: float
    api_s: float
    model_gib: float
    graph_gib: float
    ascii_banner: bool
    tqdm_desc: str
    fail_at: str | None
    fail_shard: int | None
    exit_code: int
    health_503_after_s: float | None
    engine_death_exit: int | None
    hang_connections: bool
    started_ago_s: float
    traffic_tps: float
    prompt_tps: float | None
    running: int | None
    waiting: int
    kv_usage: float | None
    hung: bool
    stats_interval_s: float
    old_metric_names: bool
    shutdown_s: float
    gpu_total_mib: int
    gpu_uuids: list[str]
    served_max_model_len: int | None
    completion_fail: bool
    completion_hang: bool

    def __init__(self, data: dict[str, Any]) -> None:
        missing = set(type(self).__annotations__) - set(data)
        if missing:
            raise ValueError(f"profile lacks {sorted(missing)}")
        for k, v in data.items():
            setattr(self, k, v)

    @classmethod
    def load(cls, path: str | None) -> Profile:
        if path:
            return cls(json.loads(Path(path).read_text()))
        from services.sim.scenarios import LoadProfile

        return cls(LoadProfile().model_dump())

# Flags that never take a value (everything else with a following non-flag word takes it).
_BOOL_FLAGS = {
    "enable-auto-tool-choice", "trust-remote-code", "enforce-eager", "enable-prefix-caching",
    "no-enable-prefix-caching", "disable-log-stats", "disable-log-requests", "enable-log-requests",
    "enable-chunked-prefill", "no-enable-chunked-prefill", "enable-expert-parallel", "disable-uvicorn-access-log",
    "disable-custom-all-reduce", "enable-lora", "headless", "async-scheduling", "disable-frontend-multiprocessing",
}  # fmt: skip
_ALIASES = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size",
            "q": "quantization", "e": "enable-expert-parallel", "cc": "compilation-config",
            "sc": "speculative-config", "ac": "attention-config"}  # fmt: skip
_NARGS = {"served-model-name", "api-key", "middleware", "allowed-origins"}
# Order of vLLM's parser (serve args first, then engine args) for the keys we know.
_ORDER = [
    "model_tag", "host", "port", "api_key", "enable_auto_tool_choice", "tool_call_parser", "model",
    "trust_remote_code", "max_model_len", "served_model_name", "reasoning_parser", "tensor_parallel_size",
    "pipeline_parallel_size", "gpu_memory_utilization", "enable_prefix_caching", "enforce_eager",
]  # fmt: skip


@dataclass
class ServeArgs:
    model: str = "facebook/opt-125m"
    positional: bool = False
    host: str | None = None
    port: int = 8000
    tp: int = 1
    max_model_len: int | None = None
    gpu_util: float = 0.9
    served: list[str] = field(default_factory=list)
    api_keys: list[str] = field(default_factory=list)
    non_default: dict[str, Any] = field(default_factory=dict)
    host_port: int | None = None  # docker -p HOST:CONTAINER: the port to bind on the host


def _py_value(raw: str) -> Any:
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        return float(raw) if any(c in raw for c in ".eE") and raw[0] in "0123456789.-" else raw
    except ValueError:
        pass
    if raw[:1] in "{[":
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def parse_serve_args(args: list[str]) -> ServeArgs:
    """A forgiving reading of ``vllm serve`` arguments (enough to behave like the real server)."""
    sa = ServeArgs()
    found: dict[str, Any] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            if "model" not in found:
                found["model_tag"] = a
                found["model"] = a
                sa.positional = True
            i += 1
            continue
        name, eq, val = a.lstrip("-").partition("=")
        if len(name) == 2 and name[0] == "O" and name[1].isdigit():
            found["optimization_level"] = int(name[1])
            i += 1
            continue
        name = _ALIASES.get(name, name)
        key = name.replace("-", "_")
        if name in _BOOL_FLAGS and not eq:
            found[key] = not name.startswith("no-")
            i += 1
            continue
        if eq:
            values = [val]
            i += 1
        else:
            values = []
            i += 1
            while i < len(args) and not (args[i].startswith("--") or (args[i].startswith("-") and len(args[i]) <= 3
                                                                       and not args[i][1:].isdigit())):
                values.append(args[i])
                i += 1
                if name not in _NARGS:
                    break
        if not values:
            found[key] = True
        elif name in _NARGS:
            found[key] = values
        else:
            found[key] = _py_value(values[0])
    sa.model = str(found.get("model", sa.model))
    sa.host = found.get("host")
    sa.port = int(found.get("port", 8000))
    sa.tp = int(found.get("tensor_parallel_size", 1))
    sa.max_model_len = found.get("max_model_len")
    sa.gpu_util = float(found.get("gpu_memory_utilization", 0.9))
    sa.served = list(found.get("served_model_name", []))
    sa.api_keys = list(found.get("api_key", []))
    ordered = {k: found[k] for k in _ORDER if k in found}
    ordered.update({k: v for k, v in found.items() if k not in ordered})
    sa.non_default = ordered
    return sa


def parse_docker_run(args: list[str]) -> tuple[ServeArgs, dict[str, str]]:
    """``docker run [opts] IMAGE [vllm args]`` for the vllm/vllm-openai image (entrypoint ``vllm serve``)."""
    env: dict[str, str] = {}
    ports: dict[int, int] = {}
    i = 1 if args[:1] == ["run"] else 0
    with_value = {"-p", "--publish", "-e", "--env", "--name", "--gpus", "-v", "--volume", "--env-file",
                  "--shm-size", "--ipc", "--network", "--runtime", "-u", "--user", "--entrypoint", "-w"}  # fmt: skip
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        opt, eq, val = a.partition("=")
        if opt in with_value and not eq:
            val = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        if opt in ("-p", "--publish"):
            parts = val.split(":")
            if len(parts) >= 2 and parts[-1].isdigit() and parts[-2].isdigit():
                ports[int(parts[-1])] = int(parts[-2])
        elif opt in ("-e", "--env"):
            name, _, value = val.partition("=")
            env[name] = value if _ else os.environ.get(name, "")
        i += 1
    rest = args[i + 1 :]  # after the image
    sa = parse_serve_args(rest)
    sa.host_port = ports.get(sa.port, sa.port)
    return sa, env


# ---------------------------------------------------------------------------------------------------------


class FakeVllm:
    def __init__(self, sa: ServeArgs, profile: Profile, env: dict[str, str]) -> None:
        self.sa = sa
        self.p = profile
        self.env = env
        self.pid = os.getpid()
        self.sideband = env.get("INFERBOT_SIM_SIDEBAND") == "1"
        self.name = sa.served[0] if sa.served else sa.model
        self.api_keys = sa.api_keys or ([env["VLLM_API_KEY"]] if env.get("VLLM_API_KEY") else [])
        self.real_start = time.time()
        self.v0 = self.real_start - profile.started_ago_s  # epoch of the (virtual) process start
        self.children: list[subprocess.Popen[bytes]] = []
        self.engine_pid = self.pid
        self.worker_pids: list[int] = []
        self.ready = False
        self.engine_dead = False
        self.stopping = False
        self.sock: socket.socket | None = None
        self.hang_server: asyncio.Server | None = None
        self.hang_conns: list[asyncio.StreamWriter] = []
        self.created = time.time()
        # counters
        self.prompt_tokens = 0.0
        self.gen_tokens = 0.0
        self.requests_ok = 0
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.ttft_obs: list[float] = []
        self.itl_obs: list[float] = []
        self.ttft_sum = 0.0
        self.itl_sum = 0.0
        self.ttft_count = 0
        self.itl_count = 0
        self.mem_mib = 0.0
        self.ready_at = 0.0
        # Live changes to a running server (SimNode.set_live): a JSON file next to the profile.
        self.live_path = Path(env["INFERBOT_SIM_PROFILE"] + ".live") if env.get("INFERBOT_SIM_PROFILE") else None
        self.live_mtime = -1
        self.base_hung = profile.hung
        self.health_override: int | None = None
        self.chat_content: str | None = None  # live: a structured chat's answer, whatever the schema says
        self.chat_delay_s = 0.0  # live: how long a structured chat takes

    # -- output ------------------------------------------------------------------------------------------
    def _write(self, data: str) -> None:
        os.write(1, data.encode("utf-8", "replace"))

    def raw(self, t: float, pid: int, message: str) -> None:
        if self.sideband:
            self._write(f"\x1eL {t:.6f} {pid}\x1f{message}\n")
        else:
            self._write(message + "\n")

    def control(self, **data: Any) -> None:
        if self.sideband:
            self._write("\x1eC " + json.dumps(data) + "\n")

    def log(self, t: float, who: str, message: str, *, level: str = "INFO", src: str = "api_server.py:1") -> None:
        pid = {"api": self.pid, "engine": self.engine_pid}.get(who, self.worker_pids[0] if self.worker_pids
                                                               else self.engine_pid)  # fmt: skip
        title = {"api": "APIServer", "engine": "EngineCore"}.get(who, "Worker_TP0")
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(t))
        prefix = self.env.get("VLLM_LOGGING_PREFIX", "")
        for line in message.split("\n"):
            self.raw(t, pid, f"({title} pid={pid}) {prefix}{level} {stamp} [{src}] {line}")

    def uvicorn(self, t: float, message: str, level: str = "INFO") -> None:
        self.raw(t, self.pid, f"(APIServer pid={self.pid}) {level + ':':<9} {message}")

    # -- processes -----------------------------------------------------------------------------------------
    def spawn_children(self) -> None:
        sleep = shutil.which("sleep") or "/bin/sleep"
        titles = ["VLLM::EngineCore"] + ([f"VLLM::Worker_TP{i}" for i in range(self.sa.tp)] if self.sa.tp > 1 else [])
        for title in titles:
            child = subprocess.Popen([title, "infinity"], executable=sleep, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            self.children.append(child)
        self.engine_pid = self.children[0].pid
        self.worker_pids = [c.pid for c in self.children[1:]]
        holders = [[p, f"VLLM::Worker_TP{i}"] for i, p in enumerate(self.worker_pids)] or [
            [self.engine_pid, "VLLM::EngineCore"]
        ]
        self.control(holders=holders, engine=self.engine_pid, workers=self.worker_pids)

    def kill_children(self, sig: int = signal.SIGKILL) -> None:
        for c in self.children:
            try:
                c.send_signal(sig)
                c.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def set_mem(self, mib: float) -> None:
        if abs(mib - self.mem_mib) >= 1 or mib == 0:
            self.mem_mib = mib
            self.control(mem=round(mib))

    # -- the load timeline -----------------------------------------------------------------------------------
    async def at(self, offset: float) -> float:
        """Wait until ``offset`` seconds after the virtual start; returns that moment's epoch."""
        t = self.v0 + offset
        delay = t - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        return t

    def _bind(self) -> socket.socket:
        host = self.sa.host if self.sa.host not in (None, "") else "0.0.0.0"
        port = self.sa.host_port or self.sa.port
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((host, port))
        return s

    def _gpu_busy_by_others(self) -> float:
        """MiB held on one of our GPUs by live processes that are not ours (e.g. leftover workers of a crash)."""
        root = self.env.get("INFERBOT_SIM_ROOT")
        if not root:
            return 0.0
        try:
            lines = Path(root, "state", "apps.tsv").read_text().splitlines()[1:]
        except OSError:
            return 0.0
        ours = {self.engine_pid, *self.worker_pids}
        busy: dict[str, float] = {}
        for line in lines:
            cols = line.split("\t")
            if len(cols) >= 4 and cols[0].isdigit() and int(cols[0]) not in ours and cols[3] in self.p.gpu_uuids:
                busy[cols[3]] = busy.get(cols[3], 0.0) + float(cols[2])
        return max(busy.values(), default=0.0)

    async def fail(self, t: float, kind: str, detail: str) -> None:
        src = "core.py:708"
        e = "engine"
        self.log(t, e, "EngineCore failed to start.", level="ERROR", src=src)
        tb = [
            "Traceback (most recent call last):",
            '  File "/opt/vllm/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, **kwargs)",
            '  File "/opt/vllm/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 498, in __init__',
            "    super().__init__(vllm_config, executor_class, log_stats,",
            '  File "/opt/vllm/venv/lib/python3.12/site-packages/vllm/v1/executor/multiproc_executor.py", line 166, '
            "in _init_executor",
            '    self.collective_rpc("load_model")' if kind == "oom"
            else "    self._initialize_kv_caches(vllm_config)",
            detail,
        ]
        for line in tb:
            self.log(t, e, line, level="ERROR", src=src)
        self.raw(t, self.pid, f"(APIServer pid={self.pid}) Traceback (most recent call last):")
        self.raw(t, self.pid, f'(APIServer pid={self.pid})   File "/opt/vllm/venv/bin/vllm", line 10, in <module>')
        self.raw(t, self.pid, f"(APIServer pid={self.pid})     sys.exit(main())")
        self.raw(t, self.pid, f"(APIServer pid={self.pid}) RuntimeError: Engine core initialization failed. See root "
                              "cause above. Failed core proc(s): {'EngineCore': 1}")  # fmt: skip
        self.control(phase="failed")
        self.kill_children()
        self.set_mem(0)
        sys.stdout.flush()
        os._exit(self.p.exit_code)

    async def load(self) -> None:
        p, sa = self.p, self.sa
        t = await self.at(0.0)
        if p.ascii_banner:
            art = ["", "       █     █     █▄   ▄█", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {p.version}",
                   f"  █▄█▀ █     █     █     █  model   {sa.model}", "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀", ""]  # fmt: skip
            for line in art:
                self.log(t, "api", line, src="utils.py:299")
        else:
            self.log(t, "api", f"vLLM server version {p.version}, serving model {sa.model}", src="api_server.py:1952")
        self.log(t, "api", f"non-default args: {sa.non_default!r}", src="utils.py:253")
        self.log(t, "api", f"Resolved architecture: {p.architecture}", src="model.py:547")
        mml = sa.max_model_len or 32768
        self.log(t, "api", f"Using max model len {mml}", src="model.py:1510")
        self.log(t, "api", "Chunked prefill is enabled with max_num_batched_tokens=8192.", src="scheduler.py:205")
        self.control(phase="loading")
        t = await self.at(p.init_s * 0.3)
        self.spawn_children()
        if p.fail_at == "startup":
            await self.fail(t, "startup", "ValueError: invalid configuration (simulated start-up failure)")
        served = sa.served[0] if sa.served else sa.model
        self.log(
            t, "engine",
            f"Initializing a V1 LLM engine (v{p.version}) with config: model={sa.model!r}, speculative_config=None, "
            f"tokenizer={sa.model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            f"tokenizer_revision=None, trust_remote_code={bool(sa.non_default.get('trust_remote_code'))}, "
            f"dtype=torch.bfloat16, max_seq_len={mml}, download_dir=None, load_format=auto, "
            f"tensor_parallel_size={sa.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
            "disable_custom_all_reduce=False, quantization=compressed-tensors, enforce_eager=False, "
            "kv_cache_dtype=auto, device_config=cuda, seed=0, "
            f"served_model_name={served}, enable_prefix_caching=True, enable_chunked_prefill=True, "
            "pooler_config=None, compilation_config={'level': 3, 'mode': 3, 'cudagraph_mode': "
            "[2, 1], 'use_inductor_graph_partition': False, 'max_cudagraph_capture_size': 512}",
            src="core.py:93",
        )  # fmt: skip
        busy = self._gpu_busy_by_others()
        total_gib = p.gpu_total_mib / 1024
        if busy > p.gpu_total_mib * (1 - sa.gpu_util):
            free = (p.gpu_total_mib - busy) / 1024
            await self.fail(
                t, "startup",
                f"ValueError: Free memory on device cuda:0 ({free:.2f}/{total_gib:.2f} GiB) on startup is less than "
                f"desired GPU memory utilization ({sa.gpu_util}, {sa.gpu_util * total_gib:.2f} GiB). Decrease GPU "
                "memory utilization or reduce GPU memory used by other processes.",
            )  # fmt: skip
        self.set_mem(560)
        t = await self.at(p.init_s)
        w0 = p.init_s
        self.log(t, "worker", f"Starting to load model {sa.model}...", src="gpu_model_runner.py:2911")
        n = p.shards
        fail_shard = (p.fail_shard if p.fail_shard is not None else n // 2) if p.fail_at == "oom" else None
        for k in range(n + 1):
            t = await self.at(w0 + k * p.seconds_per_shard)
            if fail_shard is not None and k == fail_shard:
                used = 560 + k / n * p.model_gib * 1024
                await self.fail(
                    t, "oom",
                    f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total "
                    f"capacity of {total_gib:.2f} GiB of which 1.02 GiB is free. Including non-PyTorch memory, this "
                    f"process has {used / 1024:.2f} GiB memory in use. Of the allocated memory {used / 1024 - 1.4:.2f} "
                    "GiB is allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated. If reserved "
                    "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
                    "avoid fragmentation.  See documentation for Memory Management  "
                    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                )  # fmt: skip
            self._tqdm(t, k, n, k * p.seconds_per_shard)
            self.set_mem(560 + k / n * p.model_gib * 1024)
        weights_s = n * p.seconds_per_shard
        self.log(t, "worker", f"Loading weights took {weights_s:.2f} seconds", src="default_loader.py:267")
        self.log(t, "worker", f"Model loading took {p.model_gib:.2f} GiB memory and {weights_s + p.init_s * 0.7:.6f} "
                              "seconds", src="gpu_model_runner.py:2940")  # fmt: skip
        k0 = w0 + weights_s
        t = await self.at(k0 + p.kv_s * 0.5)
        if p.fail_at == "kv":
            await self.fail(t, "kv", "ValueError: No available memory for the cache blocks. Try increasing "
                                     "`gpu_memory_utilization` when initializing the engine.")  # fmt: skip
        kv_gib = max(sa.gpu_util * total_gib - p.model_gib - p.graph_gib - 1.5, 0.5)
        tokens = int(kv_gib * 1024 * 1024 / 70)
        self.log(t, "worker", f"Available KV cache memory: {kv_gib:.2f} GiB", src="gpu_worker.py:298")
        self.log(t, "engine", f"GPU KV cache size: {tokens:,} tokens", src="kv_cache_utils.py:1087")
        self.log(t, "engine", f"Maximum concurrency for {mml:,} tokens per request: {tokens / mml:.2f}x",
                 src="kv_cache_utils.py:1091")  # fmt: skip
        self.set_mem((sa.gpu_util * total_gib - p.graph_gib) * 1024)
        c0 = k0 + p.kv_s
        t = await self.at(c0)
        self.log(t, "worker", f"Dynamo bytecode transform time: {p.compile_s * 0.1:.2f} s", src="backends.py:548")
        t = await self.at(c0 + p.compile_s * 0.6)
        self.log(t, "worker", f"torch.compile takes {p.compile_s * 0.6:.2f} s in total", src="monitor.py:34")
        t = await self.at(c0 + p.compile_s)
        bar = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
        secs = max(int(p.compile_s * 0.4), 1)
        self.raw(t, self.worker_pids[0] if self.worker_pids else self.engine_pid,
                 f"(Worker_TP0 pid={self.worker_pids[0] if self.worker_pids else self.engine_pid}) "
                 f"\r{bar}:   0%|          | 0/51 [00:00<?, ?it/s]\r{bar}:  49%|████▉     | 25/51 "
                 f"[00:{secs // 2:02d}<00:{secs // 2:02d}, {51 / secs:5.2f}it/s]\r{bar}: 100%|██████████| 51/51 "
                 f"[00:{secs:02d}<00:00, {51 / secs:5.2f}it/s]")  # fmt: skip
        self.log(t, "worker", f"Graph capturing finished in {secs} secs, took {p.graph_gib:.2f} GiB",
                 src="gpu_model_runner.py:3787")  # fmt: skip
        self.set_mem(sa.gpu_util * total_gib * 1024)
        init_total = p.kv_s + p.compile_s
        self.log(t, "engine", f"init engine (profile, create kv cache, warmup model) took {init_total:.2f} s",
                 src="core.py:228")  # fmt: skip
        a0 = c0 + p.compile_s
        t = await self.at(a0 + p.api_s * 0.3)
        host = sa.host or "0.0.0.0"
        self.log(t, "api", "Supported tasks: ['generate']", src="api_server.py:1730")
        self.log(t, "api", f"Starting vLLM server on http://{host}:{sa.port}", src="api_server.py:2005")
        self.log(t, "api", "Available routes are:", src="launcher.py:37")
        for route, methods in (("/health", "GET"), ("/metrics", "GET"), ("/version", "GET"), ("/v1/models", "GET"),
                               ("/v1/chat/completions", "POST"), ("/v1/completions", "POST")):  # fmt: skip
            self.log(t, "api", f"Route: {route}, Methods: {methods}", src="launcher.py:45")
        t = await self.at(a0 + p.api_s)
        self.uvicorn(t, f"Started server process [{self.pid}]")
        self.uvicorn(t, "Waiting for application startup.")
        await self.serve()
        self.uvicorn(time.time(), "Application startup complete.")
        self.ready = True
        self.ready_at = time.time()
        self.control(phase="ready")

    def _tqdm(self, t: float, k: int, n: int, elapsed: float) -> None:
        pct = f"{100 * k / n:3.0f}%" if n else "100%"
        if k == 0 or elapsed <= 0:
            times = f"[{_fmt_tqdm(elapsed)}<?, ?it/s]"
        else:
            rate = k / elapsed
            remaining = (n - k) / rate
            rate_s = f"{1 / rate:5.2f}s/it" if rate < 1 else f"{rate:5.2f}it/s"
            times = f"[{_fmt_tqdm(elapsed)}<{_fmt_tqdm(remaining)}, {rate_s}]"
        pid = self.worker_pids[0] if self.worker_pids else self.engine_pid
        who = "Worker_TP0" if self.worker_pids else "EngineCore"
        self.raw(t, pid, f"({who} pid={pid}) \r{self.p.tqdm_desc}: {pct} Completed | {k}/{n} {times}")

    # -- HTTP ------------------------------------------------------------------------------------------------
    async def serve(self) -> None:
        await asyncio.to_thread(importlib.import_module, "aiohttp.web")  # usually preloaded by run()
        from aiohttp import web

        @web.middleware
        async def access_log(request: web.Request, handler: Any) -> web.StreamResponse:
            resp: web.StreamResponse = await handler(request)
            peer = request.transport.get_extra_info("peername") if request.transport else None
            addr = f"{peer[0]}:{peer[1]}" if peer else "-"
            reason = {200: "OK", 401: "Unauthorized", 404: "Not Found", 503: "Service Unavailable"}.get(resp.status, "")
            self.uvicorn(time.time(), f'{addr} - "{request.method} {request.path_qs} HTTP/1.1" {resp.status} {reason}')
            return resp

        app = web.Application(middlewares=[access_log])
        app.router.add_get("/health", self.h_health)
        app.router.add_get("/ping", self.h_health)
        app.router.add_get("/version", self.h_version)
        app.router.add_get("/load", self.h_load)
        app.router.add_get("/metrics", self.h_metrics)
        app.router.add_get("/v1/models", self.h_models)
        app.router.add_post("/v1/chat/completions", self.h_complete)
        app.router.add_post("/v1/completions", self.h_complete)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        if self.hang_server is not None:
            self.hang_server.close()
            self.sock = self._bind()
        assert self.sock is not None
        site = web.SockSite(runner, self.sock)
        await site.start()

    def _authorized(self, request: Any) -> bool:
        if not self.api_keys:
            return True
        header = request.headers.get("Authorization", "")
        return header.startswith("Bearer ") and header[7:] in self.api_keys

    async def h_health(self, request: Any) -> Any:
        from aiohttp import web

        if self.health_override is not None:
            return web.Response(status=self.health_override)
        return web.Response(status=503 if self.engine_dead else 200)

    async def h_version(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"version": self.p.version})

    async def h_load(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"server_load": self.running})

    async def h_models(self, request: Any) -> Any:
        from aiohttp import web

        if not self._authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        created = int(time.time())
        names = self.sa.served or [self.sa.model]
        data = [
            {"id": n, "object": "model", "created": created, "owned_by": "vllm", "root": self.sa.model, "parent": None,
             "max_model_len": self.p.served_max_model_len or self.sa.max_model_len or 32768,
             "permission": [{"id": f"modelperm-{os.urandom(16).hex()}", "object": "model_permission",
                             "created": created, "allow_create_engine": False, "allow_sampling": True,
                             "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                             "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}]}
            for n in names
        ]  # fmt: skip
        return web.json_response({"object": "list", "data": data})

    async def h_complete(self, request: Any) -> Any:
        from aiohttp import web

        if not self._authorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        if self.engine_dead:
            return web.json_response({"error": "EngineCore encountered an issue."}, status=500)
        if request.path == "/v1/completions":
            return await self.h_text_complete(request)
        try:
            body = await request.json()
        except ValueError:
            body = {}
        fmt = body.get("response_format") if isinstance(body, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return await self.h_structured_chat(body, fmt)
        self.prompt_tokens += 20
        self.gen_tokens += 16
        self.requests_ok += 1
        return web.json_response({"id": f"cmpl-{os.urandom(8).hex()}", "object": "chat.completion",
                                  "model": self.name, "choices": [{"index": 0, "finish_reason": "length",
                                  "message": {"role": "assistant", "content": "simulated " * 16}}],
                                  "usage": {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36}})

    async def h_structured_chat(self, body: dict[str, Any], fmt: dict[str, Any]) -> Any:
        """``/v1/chat/completions`` with ``response_format`` ``json_schema``: the keyword classifier's answer
        (``services/sim/fake_classifier.py``). The live file can make it slow (``chat_delay_s``) or answer any
        text instead (``chat_content``: a broken or talked-into-it model)."""
        from aiohttp import web

        from services.sim.fake_classifier import classify

        if body.get("model") not in (self.sa.served or [self.sa.model]):
            return web.json_response({"error": {
                "message": f"The model `{body.get('model')}` does not exist.", "type": "NotFoundError",
                "param": "model", "code": 404}}, status=404)
        self.apply_live(time.time())
        if self.chat_delay_s:
            await asyncio.sleep(self.chat_delay_s)
        spec = fmt.get("json_schema")
        found = spec.get("schema") if isinstance(spec, dict) else None
        schema: dict[str, Any] = found if isinstance(found, dict) else {}
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        content = self.chat_content if self.chat_content is not None else classify(schema, messages)
        self.prompt_tokens += 200
        self.gen_tokens += 16
        self.requests_ok += 1
        return web.json_response({"id": f"chatcmpl-{os.urandom(8).hex()}", "object": "chat.completion",
                                  "created": int(time.time()), "model": body.get("model"),
                                  "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                               "message": {"role": "assistant", "content": content,
                                                           "tool_calls": []}}],
                                  "usage": {"prompt_tokens": 200, "completion_tokens": 16, "total_tokens": 216}})

    async def h_text_complete(self, request: Any) -> Any:
        """``/v1/completions`` in vLLM's shape; the profile can make it fail (500) or hang."""
        from aiohttp import web

        try:
            body = await request.json()
        except ValueError:
            body = {}
        if self.p.completion_hang:
            await asyncio.sleep(3600)
        if self.p.completion_fail:
            self.log(time.time(), "api", "Error in completion: CUDA error: an illegal memory access was encountered",
                     level="ERROR", src="serving_completion.py:312")
            return web.json_response({"error": {
                "message": "CUDA error: an illegal memory access was encountered", "type": "InternalServerError",
                "param": None, "code": 500}}, status=500)
        if body.get("model") not in (self.sa.served or [self.sa.model]):
            return web.json_response({"error": {
                "message": f"The model `{body.get('model')}` does not exist.", "type": "NotFoundError",
                "param": "model", "code": 404}}, status=404)
        n = max(1, min(int(body.get("max_tokens") or 16), 4096))
        await asyncio.sleep(0.04 + 0.002 * n)  # prefill, then each token: benchmarks measure a real rate
        self.prompt_tokens += 20
        self.gen_tokens += n
        self.requests_ok += 1
        return web.json_response({"id": f"cmpl-{os.urandom(8).hex()}", "object": "text_completion",
                                  "created": int(time.time()), "model": body.get("model"),
                                  "choices": [{"index": 0, "text": " simulated" * n, "logprobs": None,
                                               "finish_reason": "length", "stop_reason": None}],
                                  "usage": {"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}})

    async def h_metrics(self, request: Any) -> Any:
        from aiohttp import web

        return web.Response(body=self.metrics_text().encode(),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})  # fmt: skip

    def metrics_text(self) -> str:
        lab = f'engine="0",model_name="{self.name}"'
        out: list[str] = []

        def metric(name: str, kind: str, help_: str, lines: list[str]) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(lines)

        metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               [f"vllm:num_requests_running{{{lab}}} {_go(self.running)}"])
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
               [f"vllm:num_requests_waiting{{{lab}}} {_go(self.waiting)}"])
        kv_name = "vllm:gpu_cache_usage_perc" if self.p.old_metric_names else "vllm:kv_cache_usage_perc"
        metric(kv_name, "gauge", "KV-cache usage. 1 means 100 percent usage.",
               [f"{kv_name}{{{lab}}} {_go(self.kv_usage)}"])
        for cname, value, help_ in (
            ("vllm:prompt_tokens", self.prompt_tokens, "Number of prefill tokens processed."),
            ("vllm:generation_tokens", self.gen_tokens, "Number of generation tokens processed."),
        ):
            metric(f"{cname}_total", "counter", help_, [f"{cname}_total{{{lab}}} {_go(math.floor(value))}"])
            metric(f"{cname}_created", "gauge", help_, [f"{cname}_created{{{lab}}} {_go(self.created)}"])
        metric("vllm:request_success_total", "counter", "Count of successfully processed requests.",
               [f'vllm:request_success_total{{{lab},finished_reason="stop"}} {_go(self.requests_ok)}',
                f'vllm:request_success_total{{{lab},finished_reason="length"}} 0.0'])
        ttft_buckets = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
        itl_buckets = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                       40.0, 80.0]
        itl_name = ("vllm:time_per_output_token_seconds" if self.p.old_metric_names
                    else "vllm:inter_token_latency_seconds")
        for hname, buckets, obs, total, count, help_ in (
            ("vllm:time_to_first_token_seconds", ttft_buckets, self.ttft_obs, self.ttft_sum, self.ttft_count,
             "Histogram of time to first token in seconds."),
            (itl_name, itl_buckets, self.itl_obs, self.itl_sum, self.itl_count,
             "Histogram of inter-token latency in seconds."),
        ):  # fmt: skip
            lines = []
            for le in [*buckets, math.inf]:
                frac = sum(1 for o in obs if o <= le) / len(obs) if obs else 0.0
                lines.append(f'{hname}_bucket{{{lab},le="{_go(le)}"}} {_go(round(frac * count))}')
            lines.append(f"{hname}_count{{{lab}}} {_go(count)}")
            lines.append(f"{hname}_sum{{{lab}}} {_go(total)}")
            metric(hname, "histogram", help_, lines)
        total_mib = self.p.gpu_total_mib
        blocks = int((self.sa.gpu_util * total_mib - self.p.model_gib * 1024) * 1024 / 70 / 16)
        info = (f'block_size="16",cache_dtype="auto",calculate_kv_scales="False",enable_prefix_caching="True",'
                f'{lab},gpu_memory_utilization="{self.sa.gpu_util}",is_attention_free="False",'
                f'kv_cache_memory_bytes="None",num_cpu_blocks="None",num_gpu_blocks="{max(blocks, 1)}",'
                f'num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",sliding_window="None"')
        metric("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig",
               [f"vllm:cache_config_info{{{info}}} 1.0"])
        return "\n".join(out) + "\n"

    # -- after ready -------------------------------------------------------------------------------------------
    async def traffic(self) -> None:
        p = self.p
        tps = p.traffic_tps
        ptps = p.prompt_tps if p.prompt_tps is not None else tps * 3
        last_t = time.time()
        last_stats = last_t
        last_prompt, last_gen = self.prompt_tokens, self.gen_tokens
        prev_zero = False
        dead_at = (self.ready_at + p.health_503_after_s) if p.health_503_after_s is not None else None
        while not self.stopping:
            await asyncio.sleep(min(0.25, p.stats_interval_s))
            now = time.time()
            dt = now - last_t
            last_t = now
            self.apply_live(now)
            if dead_at is not None and now >= dead_at and not self.engine_dead:
                self.die_engine(now)
            flowing = (tps > 0 or p.hung) and not self.engine_dead
            self.running = (p.running if p.running is not None else max(1, int(tps / 40))) if flowing else 0
            self.waiting = p.waiting if flowing else 0
            self.kv_usage = (p.kv_usage if p.kv_usage is not None else min(0.05 + self.running * 0.02, 0.97)) \
                if flowing else 0.0
            if flowing and not p.hung:
                self.gen_tokens += tps * dt
                self.prompt_tokens += ptps * dt
                reqs = max(1, int(dt * tps / 400))
                for _ in range(reqs):
                    self.ttft_obs = [*self.ttft_obs, random.uniform(0.15, 0.9)][-200:]
                    self.ttft_sum += self.ttft_obs[-1]
                    self.ttft_count += 1
                steps = int(tps * dt)
                itl = max(self.running, 1) / max(tps, 1)
                self.itl_obs = [*self.itl_obs, itl * random.uniform(0.8, 1.3)][-200:]
                self.itl_sum += itl * steps
                self.itl_count += steps
                self.requests_ok += reqs
            if now - last_stats >= p.stats_interval_s:
                span = now - last_stats
                pt = (self.prompt_tokens - last_prompt) / span
                gt = (self.gen_tokens - last_gen) / span
                zero = pt == 0 and gt == 0
                if not (zero and prev_zero):
                    self.log(now, "api",
                             f"Engine 000: Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: "
                             f"{gt:.1f} tokens/s, Running: {self.running} reqs, Waiting: {self.waiting} reqs, "
                             f"GPU KV cache usage: {self.kv_usage * 100:.1f}%, Prefix cache hit rate: "
                             f"{(37.5 if self.running else 0.0):.1f}%", src="loggers.py:271")  # fmt: skip
                prev_zero = zero
                last_stats, last_prompt, last_gen = now, self.prompt_tokens, self.gen_tokens

    def apply_live(self, now: float) -> None:
        """Read the live file when it changed: ``hung``, ``health_status`` (None: normal), ``die`` (engine now),
        ``chat_content`` and ``chat_delay_s`` (a structured chat's answer and delay)."""
        if self.live_path is None:
            return
        try:
            mtime = self.live_path.stat().st_mtime_ns
            # Written before this process started: meant for an earlier run.
            data = json.loads(self.live_path.read_text()) if mtime >= self.real_start * 1e9 else {}
        except (OSError, ValueError):
            mtime, data = 0, {}
        if mtime == self.live_mtime:
            return
        self.live_mtime = mtime
        self.p.hung = bool(data.get("hung", self.base_hung))
        status = data.get("health_status")
        self.health_override = int(status) if isinstance(status, int) else None
        content = data.get("chat_content")
        self.chat_content = content if isinstance(content, str) else None
        delay = data.get("chat_delay_s")
        self.chat_delay_s = float(delay) if isinstance(delay, (int, float)) else 0.0
        if data.get("die") and not self.engine_dead:
            self.die_engine(now)

    def die_engine(self, now: float) -> None:
        self.engine_dead = True
        self.log(now, "engine", "EngineCore encountered a fatal error.", level="ERROR", src="core.py:811")
        self.log(now, "engine", "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
                 level="ERROR", src="core.py:811")  # fmt: skip
        self.log(now, "api", "AsyncLLM output_handler failed.", level="ERROR", src="async_llm.py:480")
        self.log(now, "api", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
                             "trace (above) for the root cause.", level="ERROR", src="async_llm.py:480")  # fmt: skip
        if self.children:
            try:
                self.children[0].kill()
                self.children[0].wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.control(phase="engine_dead")
        if self.p.engine_death_exit is not None:
            # vLLM's API server shuts itself down once its engine is dead, and exits with status 0: a unit
            # with Restart=on-failure is then simply stopped.
            self.log(now, "api", "Engine core proc EngineCore_0 died unexpectedly, shutting down client.",
                     level="ERROR", src="core_client.py:564")
            self.uvicorn(now, "Shutting down")
            self.uvicorn(now, "Waiting for application shutdown.")
            self.uvicorn(now, "Application shutdown complete.")
            self.uvicorn(now, f"Finished server process [{self.pid}]")
            self.kill_children(signal.SIGKILL)
            self.control(phase="exited")
            time.sleep(0.05)  # let the node's pump read the last lines
            os._exit(self.p.engine_death_exit)

    async def shutdown(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        now = time.time()
        if self.ready:
            self.uvicorn(now, "Shutting down")
        else:
            self.log(now, "api", "Received SIGTERM, shutting down engine core.", src="launcher.py:99")
        await asyncio.sleep(self.p.shutdown_s)
        if self.ready:
            self.uvicorn(time.time(), "Waiting for application shutdown.")
            self.uvicorn(time.time(), "Application shutdown complete.")
        self.kill_children(signal.SIGTERM)
        self.control(phase="exited")
        os._exit(0)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        preload = asyncio.create_task(asyncio.to_thread(importlib.import_module, "aiohttp.web"))
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(self.shutdown()))
        try:
            self.sock = self._bind()
        except OSError as exc:
            t = time.time()
            self.log(t, "api", f"OSError: [Errno {exc.errno}] {exc.strerror}", level="ERROR")
            self.control(phase="failed")
            os._exit(1)
        if self.p.hang_connections:
            self.sock.listen(128)

            async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                self.hang_conns.append(writer)

            self.hang_server = await asyncio.start_server(hold, sock=self.sock)
        watchdog = asyncio.create_task(self.watch_parent())
        await self.load()
        await self.traffic()
        await asyncio.gather(preload, watchdog)

    async def watch_parent(self) -> None:
        """Exit with our children when the node that started us is gone (no orphans after a killed test)."""
        parent = os.getppid()
        while True:
            await asyncio.sleep(1.0)
            if os.getppid() != parent:
                self.kill_children()
                os._exit(1)


def _fmt_tqdm(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _go(value: float) -> str:
    """prometheus_client's floatToGoString."""
    d = float(value)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def fake_bench(args: list[str]) -> int:
    """``vllm bench serve``: really sends the requests to the server, then saves a result in vLLM's format."""
    import argparse

    ap = argparse.ArgumentParser(prog="vllm bench serve")
    for name in ("--backend", "--base-url", "--endpoint", "--model", "--served-model-name", "--dataset-name",
                 "--label", "--result-dir", "--result-filename"):
        ap.add_argument(name)
    for name in ("--random-input-len", "--random-output-len", "--num-prompts", "--max-concurrency", "--seed"):
        ap.add_argument(name, type=int)
    ap.add_argument("--save-result", action="store_true")
    a, _unknown = ap.parse_known_args(args)
    return asyncio.run(_bench(a))


async def _bench(a: Any) -> int:
    import aiohttp

    key = os.environ.get("OPENAI_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = (a.base_url or "http://127.0.0.1:8000").rstrip("/") + (a.endpoint or "/v1/completions")
    name = a.served_model_name or a.model
    n, conc, out_len = a.num_prompts or 1000, a.max_concurrency or 1, a.random_output_len or 128
    body = {"model": name, "prompt": "hi " * 16, "max_tokens": out_len, "temperature": 0}
    tokens: list[int] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(conc)
    async with aiohttp.ClientSession() as session:

        async def one() -> None:
            async with gate, session.post(url, json=body, headers=headers) as r:
                data = await r.json(content_type=None)
                if r.status == 200:
                    tokens.append(int(data["usage"]["completion_tokens"]))
                else:
                    errors.append(str(data))

        try:
            await one()  # vLLM's initial test run
        except aiohttp.ClientError as e:
            errors.append(repr(e))
        if errors:
            print("Traceback (most recent call last):", file=sys.stderr)
            print(f"ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
                  f"specified. Error: {errors[0]}", file=sys.stderr)
            return 1
        tokens.clear()
        started = time.monotonic()
        await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
        duration = max(time.monotonic() - started, 1e-6)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = a.label or a.backend or "openai"
    result = {
        "date": stamp, "endpoint_type": a.backend or "openai", "backend": a.backend or "openai", "label": label,
        "model_id": a.model, "tokenizer_id": a.model, "num_prompts": n, "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": a.max_concurrency, "duration": round(duration, 6), "completed": len(tokens),
        "failed": n - len(tokens), "total_input_tokens": n * (a.random_input_len or 1024),
        "total_output_tokens": sum(tokens), "request_throughput": round(len(tokens) / duration, 6),
        "request_goodput": None, "output_throughput": round(sum(tokens) / duration, 4),
        "total_token_throughput": round(sum(tokens) / duration * 1.5, 4),
        "max_output_tokens_per_s": round(sum(tokens) / duration * 1.2, 1), "max_concurrent_requests": conc,
    }
    print("============ Serving Benchmark Result ============")
    print(f"Successful requests:                     {len(tokens)}")
    print(f"Output token throughput (tok/s):         {result['output_throughput']:.2f}")
    if a.save_result:
        base = a.model.rsplit("/", 1)[-1]
        fname = a.result_filename or f"{label}-infqps-concurrency{conc}-{base}-{stamp}.json"
        target = Path(a.result_dir or ".") / fname
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result))
    return 0


def main() -> int:
    prog = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    env = dict(os.environ)
    if prog == "docker":
        if args[:1] in (["rm"], ["stop"], ["kill"]):
            return 0  # `docker rm -f NAME` in ExecStartPre: nothing to remove
        sa, docker_env = parse_docker_run(args)
        env.update(docker_env)
    else:
        if args[:2] == ["bench", "serve"]:
            return fake_bench(args[2:])
        if args[:1] == ["--version"]:
            print("0.20.1")
            return 0
        if args[:1] != ["serve"]:
            print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...", file=sys.stderr)
            return 2
        # A bad value stops vLLM before anything loads (argparse: exit 2, its message on stderr).
        from services.sim.vllm_cli import check

        check(args[1:])
        sa = parse_serve_args(args[1:])
    profile_path = env.get("INFERBOT_SIM_PROFILE")
    profile = Profile.load(profile_path)
    asyncio.run(FakeVllm(sa, profile, env).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
