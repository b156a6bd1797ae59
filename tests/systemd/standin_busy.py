"""A loaded, busy vLLM as the real-systemd tier's stand-in plays it (``STANDIN_BUSY=1``; stdlib only).

What a node serving a 1T MoE on 8 GPUs for a while shows, in vLLM's own formats (``shared/reference``): the
journal of a whole start — the banner, ``non-default args``, the engine's config line, each tensor-parallel
worker's start-up lines, 119 shard-progress lines of tqdm (each behind a carriage return, as journald keeps
them), the KV cache and CUDA-graph lines (the graph capture's tqdm bar with every update in one journal line),
the routes, uvicorn's "Application startup complete." — then the traffic so far: access-log lines, the
periodic stats line, a few warnings; and more of both every second while it runs. Its ``/metrics`` is a
busy V1 engine's whole exposition (every vLLM family with its histograms' buckets, the HTTP instrumentator's,
the process and GC collectors'), whose counters grow with the traffic. Eight worker processes hold the
"GPUs": a fake ``nvidia-smi`` lists them from the file this writes (:data:`GPU_APPS`). Busy when
``STANDIN_BUSY`` is set or :data:`BUSY_FLAG` exists (so the unit's environment stays a real deployment's).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time

GEN_TPS, PROMPT_TPS, REQ_PS = 1450.0, 4380.0, 2.9  # the traffic the counters and stats lines follow
TP = 8
SHARDS = 119
ROUTES = ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/health", "/load", "/ping", "/tokenize",
          "/detokenize", "/v1/models", "/version", "/v1/responses", "/v1/responses/{response_id}",
          "/v1/responses/{response_id}/cancel", "/v1/chat/completions", "/v1/completions", "/v1/embeddings",
          "/pooling", "/classify", "/score", "/v1/score", "/v1/audio/transcriptions", "/v1/audio/translations",
          "/rerank", "/v1/rerank", "/v2/rerank", "/scale_elastic_ep", "/is_scaling_elastic_ep", "/invocations",
          "/metrics")
BUSY_FLAG = "/etc/inferbot/standin-busy"
GPU_APPS = "/run/standin-gpu-apps.csv"
CLIENTS = ("10.1.230.15", "10.1.230.16", "10.1.231.40", "10.1.232.7")


class Journal:
    """vLLM's log lines on stdout (the unit's journal), with each process's prefix."""

    def __init__(self, pid: int, workers: list[int]) -> None:
        self.pid, self.workers, self.engine = pid, workers, pid + 1

    def line(self, who: str, level: str, src: str, msg: str) -> None:
        pid = {"api": self.pid, "engine": self.engine}.get(who)
        name = {"api": "APIServer", "engine": "EngineCore"}.get(who, who)
        if pid is None:  # "Worker_TP3"
            pid = self.workers[int(who.rsplit("TP", 1)[1])]
        print(f"({name} pid={pid}) {level} {time.strftime('%m-%d %H:%M:%S')} [{src}] {msg}")

    def raw(self, who: str, text: str) -> None:
        pid = self.workers[0] if who.startswith("Worker") else self.pid
        print(f"({who} pid={pid}) {text}")

    def access(self, rng: random.Random) -> None:
        path = rng.choice(("/v1/chat/completions",) * 8 + ("/v1/completions", "/v1/models"))
        method = "GET" if path == "/v1/models" else "POST"
        print(f'(APIServer pid={self.pid}) INFO:     {rng.choice(CLIENTS)}:{rng.randint(32768, 60999)} - '
              f'"{method} {path} HTTP/1.1" 200 OK')

    def stats(self, rng: random.Random) -> None:
        running = rng.randint(18, 26)
        self.line("api", "INFO", "loggers.py:271",
                  f"Engine 000: Avg prompt throughput: {PROMPT_TPS * rng.uniform(0.8, 1.2):.1f} tokens/s, Avg "
                  f"generation throughput: {GEN_TPS * rng.uniform(0.9, 1.1):.1f} tokens/s, Running: {running} reqs, "
                  f"Waiting: {rng.randint(0, 3)} reqs, GPU KV cache usage: {40 + running * 1.3:.1f}%, Prefix cache "
                  f"hit rate: {rng.uniform(35, 42):.1f}%")


def _bar(desc: str, k: int, n: int, secs: float) -> str:
    done = int(10 * k / n)
    rate = k / secs if secs else 0.0
    left = (n - k) / rate if rate else 0.0
    return (f"{desc}: {100 * k // n:3d}%|{'█' * done}{' ' * (10 - done)}| {k}/{n} "
            f"[00:{int(secs):02d}<00:{int(left):02d}, {rate:5.2f}it/s]")


def startup(j: Journal, model: str, args: dict[str, object], port: int, version: str) -> None:
    """The journal of the start, as vLLM logs it (the load itself already done)."""
    art = ["", "       █     █     █▄   ▄█", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}",
           f"  █▄█▀ █     █     █     █  model   {model}", "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀", ""]
    for a in art:
        j.line("api", "INFO", "utils.py:299", a)
    j.line("api", "INFO", "utils.py:253", f"non-default args: {args!r}")
    j.line("api", "INFO", "model.py:547", "Resolved architecture: DeepseekV3ForCausalLM")
    j.line("api", "INFO", "model.py:1510", f"Using max model len {args.get('max_model_len', 131072)}")
    j.line("api", "INFO", "scheduler.py:205", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    j.line("api", "INFO", "vllm.py:609", "Asynchronous scheduling is enabled.")
    j.line("engine", "INFO", "core.py:93",
           f"Initializing a V1 LLM engine (v{version}) with config: model='{model}', speculative_config=None, "
           f"tokenizer='{model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
           "trust_remote_code=True, dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, load_format=auto, "
           "tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, "
           "quantization=compressed-tensors, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, "
           "served_model_name=kimi-k2.5, enable_prefix_caching=True, enable_chunked_prefill=True, "
           "compilation_config={'level': 3, 'mode': 3, 'cudagraph_mode': [2, 1], 'max_cudagraph_capture_size': 512}")
    for r in range(TP):
        w = f"Worker_TP{r}"
        j.line(w, "INFO", "parallel_state.py:1208", f"rank {r} in world size 8 is assigned as DP rank 0, PP rank 0, "
                                                     f"TP rank {r}, EP rank {r}")
        j.line(w, "INFO", "pynccl.py:111", "vLLM is using nccl==2.27.5")
        j.line(w, "WARNING", "custom_all_reduce.py:154", "Custom allreduce is disabled because your platform lacks "
                                                        "GPU P2P capability or P2P test failed.")
        j.line(w, "INFO", "cuda.py:366", "Using FlashMLA backend on V1 engine.")
    j.line("Worker_TP0", "INFO", "gpu_model_runner.py:2911", f"Starting to load model {model}...")
    j.line("Worker_TP0", "INFO", "weight_utils.py:412", "Filesystem type for checkpoints: NFS. Checkpoint size: "
                                                        "554.23 GiB. Available RAM: 1843.51 GiB.")
    for k in range(SHARDS + 1):
        secs = k * 13.8
        rate = f"{13.8:5.2f}s/it" if k else "?it/s"
        left = f"{int((SHARDS - k) * 13.8) // 60:02d}:{int((SHARDS - k) * 13.8) % 60:02d}" if k else "?"
        j.raw("Worker_TP0", f"\rLoading safetensors checkpoint shards: {100 * k // SHARDS:3d}% Completed | "
                            f"{k}/{SHARDS} [{int(secs) // 60:02d}:{int(secs) % 60:02d}<{left}, {rate}]")
    j.line("Worker_TP0", "INFO", "default_loader.py:267", "Loading weights took 1642.37 seconds")
    j.line("Worker_TP0", "INFO", "gpu_model_runner.py:2940", "Model loading took 67.14 GiB memory and 1651.533210 "
                                                             "seconds")
    j.line("Worker_TP0", "INFO", "backends.py:548", "Dynamo bytecode transform time: 14.07 s")
    j.line("Worker_TP0", "INFO", "monitor.py:34", "torch.compile takes 61.69 s in total")
    for r in range(TP):
        j.line(f"Worker_TP{r}", "INFO", "gpu_worker.py:298", "Available KV cache memory: 21.22 GiB")
    j.line("engine", "INFO", "kv_cache_utils.py:1087", "GPU KV cache size: 317,915 tokens")
    j.line("engine", "INFO", "kv_cache_utils.py:1091", "Maximum concurrency for 131,072 tokens per request: 2.43x")
    for desc, n in (("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 67), ("Capturing CUDA graphs "
                                                                                       "(decode, FULL)", 35)):
        j.raw("Worker_TP0", "".join("\r" + _bar(desc, k, n, k / 9.5) for k in range(n + 1)))
    j.line("Worker_TP0", "INFO", "gpu_model_runner.py:3787", "Graph capturing finished in 11 secs, took 0.95 GiB")
    j.line("engine", "INFO", "core.py:228", "init engine (profile, create kv cache, warmup model) took 98.31 s")
    j.line("api", "INFO", "api_server.py:1730", "Supported tasks: ['generate']")
    j.line("api", "INFO", "api_server.py:2005", f"Starting vLLM server on http://0.0.0.0:{port}")
    j.line("api", "INFO", "launcher.py:37", "Available routes are:")
    for route in ROUTES:
        j.line("api", "INFO", "launcher.py:45", f"Route: {route}, Methods: {'POST' if 'v1/' in route else 'GET'}")


def traffic_so_far(j: Journal, rng: random.Random, lines: int = 320) -> None:
    """What the journal gathered since the start: access lines, a stats line every 10 s, a few warnings."""
    for i in range(lines):
        j.access(rng)
        if i % 10 == 9:
            j.stats(rng)
        if i % 97 == 50:
            j.line("api", "WARNING", "serving_chat.py:198", "The following fields were present in the request but "
                                                           "ignored: {'stream_options'}")


def spawn_workers(gpu_apps: str | None) -> list[subprocess.Popen[bytes]]:
    """Eight worker processes in the unit's cgroup, listed as the GPUs' compute apps for the fake nvidia-smi."""
    # Each ends with its parent (outside systemd nothing else would stop them).
    procs = [subprocess.Popen([sys.executable, "-c", "import os, time\np = os.getppid()\n"
                                                     "while os.getppid() == p: time.sleep(1)"])
             for _ in range(TP)]
    if gpu_apps:
        with open(gpu_apps, "w") as f:
            for r, p in enumerate(procs):
                f.write(f"{p.pid}, VLLM::Worker_TP{r}, 91126, GPU-{r}a1b2c3d-{r}e5f-6a7b-8c9d-0e1f2a3b4c0{r}\n")
    return procs


class Metrics:
    """A busy V1 engine's /metrics, its counters following the traffic since ``start``."""

    LAT = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
           960.0, 1920.0, 7680.0)
    TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0, 160.0, 640.0, 2560.0)
    ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
    TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
    STEPS = (1, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176,
             184, 192, 200, 208, 216, 224, 232, 240, 248, 256, 272, 288, 304, 320, 336, 352, 368, 384, 400, 416, 432,
             448, 464, 480, 496, 512, 8192)
    HTTP = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 7.5, 10.0,
            30.0, 60.0)

    def __init__(self, model: str, start: float) -> None:
        self.lab = f'engine="0",model_name="{model}"'
        self.start = start
        self.created = f"{start:.7e}"

    def text(self) -> str:
        """The exposition now."""
        t = max(time.time() - self.start, 1.0)
        reqs = REQ_PS * t
        out: list[str] = []
        self._process(out, t)
        self._gauges(out)
        self._counters(out, t, reqs)
        self._histograms(out, t, reqs)
        self._cache_config(out)
        self._http(out, t)
        return "\n".join(out) + "\n"

    def _gauges(self, out: list[str]) -> None:
        lab = self.lab
        for name, kind, help_, value in (
            ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", 22),
            ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 1),
            ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", 0.6712),
        ):
            self._family(out, name, kind, help_, [f"{name}{{{lab}}} {float(value)}"])
        self._family(out, "vllm:num_requests_waiting_by_reason", "gauge", "Number of requests waiting, by reason.",
                     [f'vllm:num_requests_waiting_by_reason{{{lab},reason="{r}"}} {v}'
                      for r, v in (("capacity", 1.0), ("deferred", 0.0))])
        self._family(out, "vllm:engine_sleep_state", "gauge", "Engine sleep state; awake = 0 means engine is "
                      "sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; "
                      "discard_all = 1 means sleep level 2.",
                      [f'vllm:engine_sleep_state{{{lab},sleep_state="{s}"}} {v}'
                       for s, v in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0))])

    def _counters(self, out: list[str], t: float, reqs: float) -> None:
        for name, help_, value in (
            ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
             PROMPT_TPS * 1.6 * t),
            ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", PROMPT_TPS * 0.6 * t),
            ("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector cross-instance "
             "cache sharing, in terms of number of queried tokens.", 0.0),
            ("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector cross-instance cache "
             "sharing, in terms of number of cached tokens.", 0.0),
            ("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.", 0.0),
            ("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", 0.0),
            ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", 17.0),
            ("vllm:prompt_tokens", "Number of prefill tokens processed.", PROMPT_TPS * t),
            ("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local prefix cache hits).",
             PROMPT_TPS * 0.6 * t),
            ("vllm:generation_tokens", "Number of generation tokens processed.", GEN_TPS * t),
        ):
            self._counter(out, name, help_, [("", value)])
        self._counter(out, "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.",
                      [(f',source="{s}"', PROMPT_TPS * f * t) for s, f in (("local_compute", 1.0),
                                                                            ("local_cache_hit", 0.6),
                                                                            ("external_kv_transfer", 0.0))])
        self._counter(out, "vllm:request_success", "Count of successfully processed requests.",
                      [(f',finished_reason="{r}"', reqs * f) for r, f in (("stop", 0.93), ("length", 0.06),
                                                                          ("abort", 0.01), ("error", 0.0),
                                                                          ("repetition", 0.0))])

    def _histograms(self, out: list[str], t: float, reqs: float) -> None:
        lab = self.lab
        for name, help_, buckets, count, mean in (
            ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", self.TOKENS, reqs, 1510.0),
            ("vllm:request_generation_tokens", "Number of generation tokens processed.", self.TOKENS, reqs, 500.0),
            ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", self.STEPS, t * 38.0,
             150.0),
            ("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
             self.TOKENS, reqs, 4096.0),
            ("vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20), reqs, 1.0),
            ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", self.TOKENS, reqs,
             4096.0),
            ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.TTFT, reqs,
             0.42),
            ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.ITL, GEN_TPS * t,
             0.016),
            ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
             self.ITL, reqs, 0.016),
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", self.LAT, reqs, 8.4),
            ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", self.LAT,
             reqs, 0.05),
            ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
             self.LAT, reqs, 8.3),
            ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", self.LAT,
             reqs, 0.38),
            ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", self.LAT,
             reqs, 7.9),
            ("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill "
             "(excluding cached tokens).", self.TOKENS, reqs, 910.0),
        ):
            self._histogram(out, name, help_, buckets, count, mean, lab)

    def _cache_config(self, out: list[str]) -> None:
        self._family(out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", [
            'vllm:cache_config_info{block_size="64",cache_dtype="auto",calculate_kv_scales="False",'
            'enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.95",is_attention_free="False",'
            'kv_cache_memory_bytes="None",kv_offloading_backend="None",kv_offloading_size="None",'
            'mamba_block_size="None",mamba_cache_dtype="auto",mamba_page_size_padded="None",num_cpu_blocks="None",'
            'num_gpu_blocks="4967",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",'
            'sliding_window="None",user_specified_block_size="False"} 1.0'])

    def _family(self, out: list[str], name: str, kind: str, help_: str, lines: list[str]) -> None:
        out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", *lines]

    def _counter(self, out: list[str], name: str, help_: str, series: list[tuple[str, float]]) -> None:
        lines = [f"{name}_total{{{self.lab}{extra}}} {float(int(v))}" for extra, v in series]
        lines += [f"{name}_created{{{self.lab}{extra}}} {self.created}" for extra, _ in series]
        self._family(out, name, "counter", help_, lines)

    def _histogram(self, out: list[str], name: str, help_: str, buckets: tuple[float, ...], count: float,
                   mean: float, lab: str) -> None:
        n = int(count)
        lines = []
        sep, braces = ("," if lab else ""), (f"{{{lab}}}" if lab else "")
        for le in buckets:
            # A log-normal-ish spread around the mean: the share at or below ``le``.
            share = 1.0 - 1.0 / (1.0 + (le / mean) ** 2.2)
            lines.append(f'{name}_bucket{{{lab}{sep}le="{float(le)}"}} {float(int(n * share))}')
        lines += [f'{name}_bucket{{{lab}{sep}le="+Inf"}} {float(n)}', f"{name}_count{braces} {float(n)}",
                  f"{name}_sum{braces} {n * mean:.1f}", f"{name}_created{braces} {self.created}"]
        self._family(out, name, "histogram", help_, lines)

    def _process(self, out: list[str], t: float) -> None:
        self._family(out, "python_gc_objects_collected", "counter", "Objects collected during gc",
                     [f'python_gc_objects_collected_total{{generation="{g}"}} {v}'
                      for g, v in ((0, float(48213 + int(t))), (1, 9312.0), (2, 1044.0))])
        self._family(out, "python_gc_objects_uncollectable", "counter", "Uncollectable objects found during GC",
                     [f'python_gc_objects_uncollectable_total{{generation="{g}"}} 0.0' for g in range(3)])
        self._family(out, "python_gc_collections", "counter", "Number of times this generation was collected",
                     [f'python_gc_collections_total{{generation="{g}"}} {v}'
                      for g, v in ((0, 1311.0 + int(t / 3)), (1, 119.0), (2, 7.0))])
        self._family(out, "python_info", "gauge", "Python platform information",
                     ['python_info{implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"} '
                      "1.0"])
        for name, help_, value in (
            ("process_virtual_memory_bytes", "Virtual memory size in bytes.", 3.2451375104e+10),
            ("process_resident_memory_bytes", "Resident memory size in bytes.", 4.87120896e+09),
            ("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", self.start),
            ("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", 612.4 + t * 0.35),
            ("process_open_fds", "Number of open file descriptors.", 211.0),
            ("process_max_fds", "Maximum number of open file descriptors.", 1048576.0),
        ):
            kind = "counter" if name.endswith("_total") else "gauge"
            self._family(out, name.removesuffix("_total"), kind, help_, [f"{name} {value}"])

    def _http(self, out: list[str], t: float) -> None:
        handlers = (("/v1/chat/completions", "POST", 0.86), ("/v1/completions", "POST", 0.1),
                    ("/v1/models", "GET", 0.04))
        lines = [f'http_requests_total{{handler="{h}",method="{m}",status="2xx"}} {float(int(REQ_PS * t * f))}'
                 for h, m, f in handlers]
        lines += [f'http_requests_created{{handler="{h}",method="{m}",status="2xx"}} {self.created}'
                  for h, m, _ in handlers]
        self._family(out, "http_requests", "counter", "Total number of requests by method, status and handler.",
                     lines)
        for name, help_, per in (("http_request_size_bytes", "Content length of incoming requests by handler.",
                                  6100.0),
                                 ("http_response_size_bytes", "Content length of outgoing responses by handler.",
                                  2300.0)):
            lines = []
            for h, _m, f in handlers:
                n = int(REQ_PS * t * f)
                lines += [f'{name}_count{{handler="{h}"}} {float(n)}', f'{name}_sum{{handler="{h}"}} {n * per}',
                          f'{name}_created{{handler="{h}"}} {self.created}']
            self._family(out, name, "summary", help_, lines)
        self._histogram(out, "http_request_duration_highr_seconds", "Latency with many buckets but no API specific "
                        "labels. Made for more accurate percentile calculations.", self.HTTP, REQ_PS * t, 8.4, "")
        for h, m, f in handlers:
            self._histogram(out, "http_request_duration_seconds", "Latency with only few buckets by handler. Made to "
                            "be only used if aggregation by handler is important.", (0.1, 0.5, 1.0),
                            REQ_PS * t * f, 8.4 if m == "POST" else 0.002, f'handler="{h}",method="{m}"')


def live(j: Journal, rng: random.Random) -> None:
    """The traffic while the server runs: access lines each second, a stats line every 10 s."""
    n = 0
    while True:
        time.sleep(1.0)
        for _ in range(3):
            j.access(rng)
        n += 1
        if n % 10 == 0:
            j.stats(rng)
        sys.stdout.flush()


def run(model: str, served: str, args: dict[str, object], port: int, version: str) -> Metrics:
    """Log the start and the traffic so far, start the workers and the live traffic; the /metrics to serve."""
    rng = random.Random(26)
    if str(args.get("max_model_len", "")).isdigit():
        args = {**args, "max_model_len": int(str(args["max_model_len"]))}  # vLLM's parser makes it an int
    workers = spawn_workers(os.environ.get("STANDIN_GPU_APPS", GPU_APPS))
    j = Journal(os.getpid(), [p.pid for p in workers])
    startup(j, model, args, port, version)
    print(f"(APIServer pid={j.pid}) INFO:     Started server process [{j.pid}]")
    print(f"(APIServer pid={j.pid}) INFO:     Waiting for application startup.")
    print(f"(APIServer pid={j.pid}) INFO:     Application startup complete.")
    traffic_so_far(j, rng)
    sys.stdout.flush()
    threading.Thread(target=live, args=(j, rng), daemon=True).start()
    return Metrics(served, time.time() - 5400.0)
