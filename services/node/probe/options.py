"""What a probe asks: the units (``ProbeTarget``), the question (``ProbeOptions``), and the fixed lists the
script filters with on the node."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from services.models import Model

SHOW_PROPERTIES = (
    "Id,Description,LoadState,ActiveState,SubState,Result,MainPID,ExecMainStartTimestamp,"
    "ActiveEnterTimestamp,StateChangeTimestamp,InactiveEnterTimestamp,NRestarts,NeedDaemonReload,"
    "FragmentPath,DropInPaths,Environment,EnvironmentFiles,ExecStart,ExecMainStatus,InvocationID,ControlGroup"
)
# The unit's other processes (a wrapper's child may be the vLLM server): at most this many, and this many
# bytes of each one's argv.
MAX_PROCS = 64
MAX_ARGV_BYTES = 16384
# The journal lines the parsers read (services/parse/vllm_log.py): phase markers, shard progress, the stats
# line, the version banner and failure markers. The node scans the current start's journal and sends
# only these, so a busy server's access-log lines neither cost transfer and parsing nor push the phase
# markers out of the window.
JOURNAL_FILTER = "|".join((
    r"Completed \|", "Loading (safetensors|pt|np_cache|weights)", "Multi-thread loading", "Starting to load model",
    "Filesystem type for checkpoints", "Model loading took", "KV cache", "Memory profiling", "init engine",
    "Dynamo bytecode", r"torch\.compile", "CUDA graphs", "Compiling a graph", "Graph capturing", "Starting vLLM",
    "Available routes", "Started server process", "application startup", "Application startup", "HTTP server",
    "Waiting for GPU memory", "throughput: ", "version", "Error", "error:", "Traceback", "OutOfMemory",
    "out of memory", "Timed out", "Main process exited", "unrecognized arguments", "Failed", "failed",
))
JOURNAL_SCAN = 3000  # lines of the current start looked at on the node
ARGS_SCAN = 400  # first lines of a start searched for vLLM's "non-default args" line
# What makes a unit or a process a vLLM server for discovery (an extended regex, matched by awk).
DISCOVER_PATTERN = (
    r"vllm|VLLM::|[ =/]serve .*(--(tensor-parallel-size|max-model-len|gpu-memory-utilization|served-model-name|"
    r"kv-cache-dtype|enable-prefix-caching|max-num-seqs|tool-call-parser|reasoning-parser)|-tp [0-9])"
)
# With ProbeOptions.metrics_filter the node sends only the /metrics lines the watcher samples for charts
# (token counters, request and KV-cache gauges) and the status code line: a server's histograms are most
# of the body, and the watcher scrapes every service every interval. (An awk ERE: no {n}, which mawk
# before 1.3.4-20200717 reads literally.)
METRICS_FILTER = (
    r"^(vllm:(prompt_tokens_total|generation_tokens_total|num_requests_running|num_requests_waiting|"
    r"kv_cache_usage_perc|gpu_cache_usage_perc)[{ ]|[0-9][0-9][0-9]$)"
)
# With ProbeOptions.metrics_read the node sends only the /metrics lines a question's answer reads
# (services/parse/metrics.py): the watcher's, and the buckets of the TTFT and inter-token latency histograms.
# A busy server's whole exposition is ~50 kB, its other histograms and collectors most of it, scraped twice
# for a rate: sent, decoded and cut down for every node of a status or throughput question.
METRICS_READ_FILTER = (
    r"^(vllm:(prompt_tokens_total|generation_tokens_total|num_requests_running|num_requests_waiting|"
    r"kv_cache_usage_perc|gpu_cache_usage_perc|(time_to_first_token_seconds|inter_token_latency_seconds|"
    r"time_per_output_token_seconds)_bucket)[{ ]|[0-9][0-9][0-9]$)"
)
BENCH_KEYS = (
    "date|max_concurrency|output_throughput|request_rate|model_id|completed|num_prompts|mean_tpot_ms|"
    "median_ttft_ms|p99_ttft_ms|max_output_tokens_per_s|backend|label"
)
# The summary values read from each benchmark result file (awk's match(), in bench.awk).
BENCH_RE = '"(' + BENCH_KEYS + ')": ?("[^"]*"|[-0-9.eE+]+|null)'


class ProbeTarget(Model):
    """One unit to look at; every field comes from the validated config."""

    # Frozen (hashable): the remote command is built once per distinct set of targets (``probe_command``).
    model_config = ConfigDict(extra="forbid", frozen=True)
    unit: str
    api_url: str | None = None
    log_file: str | None = None
    bench_dir: str | None = None
    models: bool = False  # list /v1/models with the API key the bot sends on stdin (never on a command line)


class ProbeOptions(Model):
    """What a question needs from the node; numbers only, chosen by handlers."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # hashable, like ProbeTarget
    gpus: bool = True
    journal_lines: int = Field(default=300, ge=0, le=5000)  # the newest lines that match JOURNAL_FILTER
    metrics_samples: int = Field(default=0, ge=0, le=2)
    metrics_interval_s: float = Field(default=1.0, ge=0.1, le=10.0)
    log_lines: int = Field(default=0, ge=0, le=200)
    bench: bool = False
    http_timeout_s: float = Field(default=3.0, ge=0.5, le=30.0)
    discover: bool = False
    models: bool = False  # ask /v1/models for services whose API key the bot holds
    metrics_filter: bool = False  # only the /metrics lines of METRICS_FILTER (the watcher's samples)
    metrics_read: bool = False  # only the /metrics lines of METRICS_READ_FILTER (what an answer reads)
    # What settings are made of: the unit file (systemctl cat), the files it and the command read, the main
    # process's argv and environment, the unit's other processes. The watcher needs none of it.
    settings: bool = True
    api_info: bool = True  # /version and /v1/models of a server whose /health answered
    # Asked again and again (the watcher, every interval): a pool that keeps sessions (the scheduler's leader)
    # runs it on one long-lived channel, answered once per newline (build_script's ``session``), instead of
    # sending the script on a new channel each time. What the node answers is the same.
    persistent: bool = False

    @model_validator(mode="after")
    def _session_reads_no_key(self) -> ProbeOptions:
        if self.persistent and self.api_info:
            raise ValueError("a persistent probe cannot ask /v1/models: its stdin is the trigger, not the API key")
        return self
