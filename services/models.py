"""Typed records that services return: raw command results, parsed node facts, and service state.

Every parser returns one of these; handlers only ever see these, never strings from a node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.redact import redact_patterns

State = Literal["stopped", "starting", "loading", "ready", "unhealthy", "failed", "unreachable"]
Phase = Literal["waiting_for_gpu", "loading_weights", "kv_cache", "compiling", "starting_api", "ready"]
FlagValue = str | bool | list[str]
# Where a running service's settings were read: its main process, another process of its cgroup (the main
# one is a wrapper), vLLM's own start-up log, only its API, the unit file, or nowhere.
SettingsSource = Literal["process", "cgroup-process", "vllm-log", "api", "unit", "none"]
# "busy": the bot itself had too many questions waiting for the node, which was not asked (not the node's fault).
NodeErrorKind = Literal[
    "refused", "timeout", "host_key", "auth", "dns", "unit_not_found", "permission", "protocol", "other", "busy"
]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CommandResult(Model):
    """What one remote command returned (after asyncssh's ``SSHCompletedProcess``)."""

    exit_status: int | None
    stdout: str
    stderr: str
    elapsed_s: float = 0.0


class NodeError(Model):
    """Why a node could not be asked, and what to do about it."""

    kind: NodeErrorKind
    reason: str
    fix: str = ""

    @field_validator("reason", "fix")
    @classmethod
    def _redacted(cls, v: str) -> str:
        # Reasons quote exception texts and the node's own output (a shell's first line): never a secret.
        return redact_patterns(v)


class UnitShow(Model):
    """The properties of ``systemctl show UNIT`` that inferbot reads."""

    id: str
    load_state: str = ""  # loaded | not-found | masked ...
    active_state: str = ""  # active | activating | deactivating | inactive | failed | reloading | maintenance
    sub_state: str = ""  # running | start-pre | auto-restart | dead | failed ...
    result: str = ""  # success | exit-code | signal | start-limit-hit | ...
    main_pid: int = 0
    exec_main_start: datetime | None = None
    active_enter: datetime | None = None
    state_change: datetime | None = None
    inactive_enter: datetime | None = None
    n_restarts: int = 0
    need_daemon_reload: bool = False
    fragment_path: str = ""
    drop_in_paths: list[str] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # the Environment= property, unquoted
    environment_files: list[tuple[str, bool]] = Field(default_factory=list)  # (path, optional)
    exec_start_argv: list[str] = Field(default_factory=list)  # lossy: joined with spaces by systemd
    exec_main_status: int | None = None
    invocation_id: str = ""
    description: str = ""


class UnitFile(Model):
    """A unit as ``systemctl cat`` prints it: fragment plus drop-ins, effective values."""

    paths: list[str] = Field(default_factory=list)
    exec_start: list[str] = Field(default_factory=list)  # effective ExecStart argv, systemd-unquoted
    exec_start_pre: list[list[str]] = Field(default_factory=list)
    environment: dict[str, str] = Field(default_factory=dict)  # Environment= lines, in order, later wins
    environment_files: list[tuple[str, bool]] = Field(default_factory=list)  # (path, optional "-")
    description: str = ""
    user: str = ""
    working_directory: str = ""
    restart: str = ""
    exec_start_lines: list[str] = Field(default_factory=list)  # raw effective ExecStart= values, after resets
    specifiers: dict[str, str] = Field(default_factory=dict)  # %-specifiers used ({"i": "8004", "n": ...})


class VllmCommand(Model):
    """A vLLM server command line, unwrapped and normalised the way vLLM's parser reads it."""

    wrapper: Literal["vllm-serve", "api-server-module", "bash", "docker", "unknown"]
    model: str | None = None
    model_source: Literal["positional", "flag", "config"] | None = None  # where `model` came from
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    config_file: str | None = None  # the --config YAML path, if any (already merged into flags)
    docker_image: str | None = None
    docker_env: dict[str, str] = Field(default_factory=dict)  # -e NAME=VALUE / -e NAME (from host env)
    docker_env_files: list[str] = Field(default_factory=list)
    unknown_flags: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # parse caveats worth telling the user
    launcher: list[str] = Field(default_factory=list)  # wrapper words before the vLLM program (sudo -u x, …)
    # How the vLLM part was recognised: its own entry points, or a `serve` subcommand with vLLM-only flags.
    entry: Literal["vllm", "module", "serve-subcommand"] | None = None


class GpuProcessBrief(Model):
    pid: int | None
    name: str
    memory_mib: int | None = None


class GpuInfo(Model):
    index: int
    name: str
    uuid: str = ""
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    utilization_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    processes: list[GpuProcessBrief] = Field(default_factory=list)


class GpuProcess(Model):
    pid: int | None
    name: str
    memory_mib: int | None = None
    gpu_uuid: str = ""
    gpu_index: int | None = None


class HttpProbe(Model):
    """One HTTP GET made from the node with curl."""

    url: str
    status: int | None = None  # HTTP status, None when no response
    curl_exit: int = 0  # 0 ok, 7 refused, 28 timeout, ...
    body: str = ""

    @property
    def error(self) -> str | None:
        """A short human reason when no HTTP status was received."""
        if self.status:
            return None
        return {
            7: "connection refused",
            28: "timed out",
            6: "host not resolved",
            52: "empty reply",
            56: "connection reset",
            127: "curl not installed on the node",
        }.get(self.curl_exit, f"curl exit {self.curl_exit}")


class LoadProgress(Model):
    """Where a load is, from the journal since the current start."""

    phase: Phase | None = None
    done: int | None = None
    total: int | None = None
    fraction: float | None = None
    weights_elapsed_s: float | None = None
    weights_remaining_s: float | None = None  # tqdm's own estimate for the shards left
    last_line: str = ""
    failed: str | None = None  # a failure marker seen in the log


class StatsLine(Model):
    """vLLM's periodic stats line (``loggers.py``), newest one."""

    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    kv_cache_usage: float | None = None  # fraction 0..1
    prefix_cache_hit_rate: float | None = None  # fraction 0..1
    at: datetime | None = None


class MetricsSample(Model):
    """The parts of one ``/metrics`` scrape inferbot uses (old and new names folded together)."""

    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # fraction 0..1
    ttft_buckets: list[tuple[float, float]] = Field(default_factory=list)  # (le, cumulative count)
    itl_buckets: list[tuple[float, float]] = Field(default_factory=list)
    model_name: str | None = None


class Throughput(Model):
    generation_tps: float | None = None
    prompt_tps: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None
    source: Literal["metrics", "log"] | None = None
    age_seconds: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None


class BenchResult(Model):
    output_throughput: float
    max_concurrency: int | None
    date: str  # YYYY-MM-DD
    file: str


class BenchSummary(Model):
    single_stream: BenchResult | None = None
    peak: BenchResult | None = None


WarningKind = Literal["environ-denied", "envfile-unreadable", "gpu-query-failed"]
"""The warnings a tool acts on (``inferbot check`` gives each its fix), by code, as ``NodeError.kind``."""
ReasonKind = Literal["unit-not-found", "busy"]
"""Codes of a record's reason: "busy" when the bot had too many questions waiting to ask the node (NodeError)."""


@dataclass(frozen=True, slots=True)
class ServiceWarning:
    """One warning about a service: its words, and its kind when a tool acts on it (``None``: words only)."""

    text: str
    kind: WarningKind | None = None


class Warnings:
    """One answer's warnings in the order they were found, each a :class:`ServiceWarning`."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[ServiceWarning] = []

    def add(self, text: str, kind: WarningKind | None = None) -> None:
        """Append a warning (of ``kind``, when a tool acts on it)."""
        self.items.append(ServiceWarning(text, kind))

    def extend(self, texts: Iterable[str]) -> None:
        """Append warnings that only have words."""
        self.items += [ServiceWarning(t) for t in texts]

    def take(self, other: Warnings) -> None:
        """Append every warning of ``other``, kinds kept."""
        self.items += other.items

    def texts(self) -> list[str]:
        """The words of each warning, once each, in order."""
        return list(dict.fromkeys(w.text for w in self.items))


class ServiceState(Model):
    """Everything inferbot knows about one vLLM service at one moment (the ``--json`` contract)."""

    service: str
    node: str
    unit: str
    state: State
    reason: str | None = None
    since: datetime | None = None
    active: str = ""  # "active (running)" as systemd says it
    main_pid: int = 0
    restarts: int = 0
    model: str | None = None
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    # Where each variable of ``env`` is set ("EnvironmentFile /etc/vllm/kimi.env"); answers about one variable
    # say it. Not in the JSON of a service (``data.env_var`` carries it).
    env_sources: dict[str, str] = Field(default_factory=dict, exclude=True)
    version: str | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    # Codes of the warnings above (by their shown text) and of the reason; for tools, not in the JSON answer.
    warning_kinds: dict[str, WarningKind] = Field(default_factory=dict, exclude=True)
    reason_kind: ReasonKind | None = Field(default=None, exclude=True)
    settings_source: SettingsSource = "none"
    settings_pid: int | None = None  # the process the settings were read from (process / cgroup-process)
    settings_note: str | None = None  # why that source, in one line ("settings from PID 4242 (…), …")
    settings_tried: list[str] = Field(default_factory=list)  # every place looked at, when the command line was not
    redacted_flags: list[str] = Field(default_factory=list)  # flags whose value redaction changed
    api_model: str | None = None  # the model /v1/models says is loaded (its root)
    api_max_model_len: int | None = None  # max_model_len as /v1/models reports it (resolved by vLLM)
    wrapper: str | None = None
    api_url: str | None = None
    command: list[str] = Field(default_factory=list)  # the running argv, redacted
    invocation_id: str = ""
    # live state (status / throughput issue)
    phase: Phase | None = None
    progress: dict[str, float | int] | None = None
    eta_seconds: float | None = None
    eta_basis: Literal["shard_rate", "history"] | None = None
    throughput: Throughput | None = None
    # The newest /metrics scrape of this probe, parsed once here for every reader (the watcher's chart samples
    # and hang check); not in the JSON answer, whose ``throughput`` says what it means.
    metrics: MetricsSample | None = Field(default=None, exclude=True)
    bench: BenchSummary | None = None
    leftovers: list[GpuProcess] = Field(default_factory=list)
    need_daemon_reload: bool = False  # the unit changed on disk and systemd was not reloaded
    pending_changes: list[str] | None = None  # what a restart applies (running → unit on disk); None: unknown
    logs: list[str] | None = None
    served_models: list[str] | None = None  # ids and roots /v1/models listed (None: not asked)
    models_error: str | None = None  # why /v1/models could not confirm the model
    fix: str | None = None
