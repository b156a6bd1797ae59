"""Turn what the probe printed about a unit into a ``ServiceState``: state, settings, env, warnings.

Secrets are redacted here, as the raw text is interpreted: nothing downstream ever sees them.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime, timedelta
from typing import Literal

import yaml

from services import bench as bench_parser
from services import gpu as gpu_parser
from services import metrics as metrics_parser
from services import systemd, unitfile, vllm_args, vllm_log
from services.models import (
    BenchSummary,
    FlagValue,
    GpuInfo,
    GpuProcess,
    GpuProcessBrief,
    HttpProbe,
    LoadProgress,
    ServiceState,
    State,
    Throughput,
    UnitFile,
    UnitShow,
    VllmCommand,
)
from services.probe import NodeRaw, UnitRaw, environ_dict, split_nul
from services.redact import REDACTED, Redactor, is_secret_name, redact_value

# Variables that systemd, a login shell or a venv set by themselves: not part of the service's settings.
AMBIENT_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "INVOCATION_ID", "SYSTEMD_EXEC_PID",
    "JOURNAL_STREAM", "NOTIFY_SOCKET", "MANAGERPID", "PWD", "OLDPWD", "SHLVL", "VIRTUAL_ENV", "_",
    "TERM", "MAIL", "HOSTNAME", "LC_ALL", "MEMORY_PRESSURE_WATCH", "MEMORY_PRESSURE_WRITE",
    "CREDENTIALS_DIRECTORY", "RUNTIME_DIRECTORY", "STATE_DIRECTORY", "CACHE_DIRECTORY", "LOGS_DIRECTORY",
    "CONFIGURATION_DIRECTORY", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_PID", "WATCHDOG_USEC",
})
# Prefixes that matter for a vLLM server even when a wrapper (not the unit) sets them.
RELEVANT_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "HF_", "HUGGING_FACE_", "TORCH_", "PYTORCH_", "OMP_",
                     "TRANSFORMERS_", "NVIDIA_", "TOKENIZERS_", "RAY_", "UCX_", "GLOO_")
CRASH_LOOP_RESTARTS = 3
CRASH_LOOP_WINDOW = timedelta(minutes=2)


class NodeFacts:
    """Node-wide facts shared by every service on that node."""

    def __init__(self, raw: NodeRaw) -> None:
        self.raw = raw
        self.now = raw.now
        self.gpus: list[GpuInfo] = gpu_parser.parse_gpus(raw.gpus) if raw.gpus_rc == 0 else []
        self.gpu_error: str | None = None
        if raw.gpus_rc not in (0, None):
            first = raw.gpus.strip().splitlines()[0] if raw.gpus.strip() else ""
            self.gpu_error = (
                "nvidia-smi not found on the node" if raw.gpus_rc == 127 else f"nvidia-smi failed: {first}"
            )
        self.processes: list[GpuProcess] = (
            gpu_parser.parse_gpu_processes(raw.gpu_apps, self.gpus) if raw.gpu_apps_rc == 0 else []
        )


def _file_text(raw: UnitRaw, path: str) -> str | None:
    f = raw.files.get(path)
    if f is None or f.data is None:
        return None
    return f.data.decode("utf-8", "replace")


def _instance(unit: str) -> str | None:
    base = unit.removesuffix(".service")
    return base.split("@", 1)[1] if "@" in base else None


def _unit_env(raw: UnitRaw, unit: UnitFile, show: UnitShow, warnings: list[str]) -> dict[str, str]:
    """What the unit sets: Environment= then EnvironmentFile= (files override, as systemd does)."""
    env = dict(unit.environment or show.environment)
    files = unit.environment_files or show.environment_files
    for path, optional in files:
        text = _file_text(raw, path)
        if text is None:
            f = raw.files.get(path)
            if f is not None and not optional:
                warnings.append(
                    f"could not read EnvironmentFile {path} (permission denied or missing): its variables "
                    "are shown from the running process only"
                )
            continue
        env.update(unitfile.parse_env_file(text))
    return env


def _yaml_config(raw: UnitRaw, argv: list[str], warnings: list[str]) -> dict[str, object] | None:
    for i, tok in enumerate(argv[:-1]):
        if tok == "--config":
            path = argv[i + 1]
            text = _file_text(raw, path)
            if text is None:
                warnings.append(f"could not read the vLLM --config file {path}: its settings are not shown")
                return None
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                warnings.append(f"the vLLM --config file {path} is not valid YAML ({e.__class__.__name__})")
                return None
            return data if isinstance(data, dict) else None
    return None


def _parse_cmd(raw: UnitRaw, argv: list[str], warnings: list[str]) -> VllmCommand:
    cfg = _yaml_config(raw, argv, warnings)
    key = json.dumps(cfg, sort_keys=True, default=str) if cfg is not None else None
    return _parse_argv_cached(tuple(argv), key)


# A long-running bot asks the same nodes the same questions: the command line, the unit file and the
# bench files rarely change between two questions, so their (pure) parses are cached on the text.
@functools.lru_cache(maxsize=512)
def _parse_argv_cached(argv: tuple[str, ...], config_json: str | None) -> VllmCommand:
    cfg = json.loads(config_json) if config_json is not None else None
    return vllm_args.parse_vllm_argv(list(argv), cfg)


@functools.lru_cache(maxsize=512)
def _parse_unit_cached(text: str, instance: str | None, unit_name: str) -> UnitFile:
    return unitfile.parse_unit_cat(text, instance=instance, unit_name=unit_name)


@functools.lru_cache(maxsize=4096)
def _bench_records(path: str, text: str) -> tuple[dict[str, object], ...]:
    return tuple(bench_parser.parse_bench_extract(path, text))


def _docker_env(raw: UnitRaw, cmd: VllmCommand, host_env: dict[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for path in cmd.docker_env_files:
        text = _file_text(raw, path)
        if text is None:
            continue
        for k, v in unitfile.parse_docker_env_file(text).items():
            env[k] = v if v is not None else host_env.get(k, "")
    for k, v in cmd.docker_env.items():
        env[k] = v if v is not None else host_env.get(k, "")
    return env


def _redact_flags(flags: dict[str, FlagValue], redactor: Redactor) -> dict[str, FlagValue]:
    out: dict[str, FlagValue] = {}
    for k, v in flags.items():
        if isinstance(v, bool):
            out[k] = v
        elif isinstance(v, list):
            out[k] = [REDACTED if is_secret_name(k) else redactor.text(redact_value(k, x)) for x in v]
        else:
            out[k] = redactor.text(redact_value(k, v))
    return out


def _drift(running: VllmCommand, declared: VllmCommand, redactor: Redactor) -> list[str]:
    diffs: list[str] = []
    if running.model != declared.model:
        diffs.append(f"model {running.model} → {declared.model}")
    for key in list(dict.fromkeys([*running.flags, *declared.flags])):
        a, b = running.flags.get(key), declared.flags.get(key)
        if a != b:
            if is_secret_name(key):
                diffs.append(f"--{key} differs ({REDACTED})")
            else:
                before, after = vllm_args.format_flag_value(a), vllm_args.format_flag_value(b)
                diffs.append(f"--{key} {redactor.text(before)} → {redactor.text(after)}")
    return diffs


def _since(show: UnitShow, state: State) -> datetime | None:
    if state in ("loading", "ready", "unhealthy"):
        return show.active_enter or show.exec_main_start
    if state == "starting":
        return show.state_change or show.active_enter
    if state == "stopped":
        return show.inactive_enter or show.state_change
    return show.state_change or show.inactive_enter or show.active_enter


def classify(
    show: UnitShow, raw: UnitRaw, progress: LoadProgress, now: datetime | None
) -> tuple[State, str | None]:
    """The service state and, for every state but ready, a short reason."""
    if show.load_state == "not-found" or (raw.show_rc == 0 and not show.load_state and not show.active_state):
        return "failed", f"unit {raw.unit} not found on the node"
    if raw.show_rc != 0:
        first = raw.show.strip().splitlines()[0] if raw.show.strip() else f"exit {raw.show_rc}"
        return "failed", f"systemctl show failed: {first}"
    active, sub = show.active_state, show.sub_state
    if active == "activating":
        if sub == "auto-restart":
            result = show.result or "exit-code"
            return "failed", f"crash loop: restarting after Result={result} (restarts: {show.n_restarts})"
        if sub == "start-pre":
            return "starting", "ExecStartPre still running" + (
                " (waiting for GPU memory)" if progress.phase == "waiting_for_gpu" else ""
            )
        return "starting", f"activating ({sub})"
    if active == "failed":
        detail = f"Result={show.result or 'unknown'}"
        if show.result == "start-limit-hit":
            detail += " (started too often; run `systemctl reset-failed` before starting again)"
        elif show.exec_main_status:
            detail += f", exit status {show.exec_main_status}"
        return "failed", detail
    if active in ("inactive", "deactivating"):
        return "stopped", f"{active} ({sub})" if sub else active
    if active not in ("active", "reloading"):
        return "failed", f"{active} ({sub})"
    started = show.active_enter or show.exec_main_start
    if (
        show.n_restarts >= CRASH_LOOP_RESTARTS and now is not None and started is not None
        and now - started < CRASH_LOOP_WINDOW
    ):
        age = int((now - started).total_seconds())
        return "failed", f"keeps restarting: {show.n_restarts} restarts, current start {age}s ago"
    if progress.failed:
        return "failed", f"the load failed: {progress.failed}"
    health = raw.health
    if health is None:
        return "loading", "no API URL known for this service"
    was_ready = progress.phase == "ready"
    if health.status == 200:
        return "ready", None
    if health.status is not None:
        return "unhealthy", f"/health answered {health.status} on {raw.url}"
    reason = f"{health.error} on {raw.url}"
    if was_ready:
        return "unhealthy", f"{reason} (it was ready earlier in this start)"
    return "loading", reason


def assemble(
    service_name: str, node_name: str, raw: UnitRaw, facts: NodeFacts, known_secrets: list[str] | None = None
) -> ServiceState:
    """Interpret one unit's probe output."""
    warnings: list[str] = []
    show = systemd.parse_show(raw.show, tz_offset=facts.raw.tz) if raw.show_rc == 0 else UnitShow(id=raw.unit)
    unit = (
        _parse_unit_cached(raw.cat, _instance(raw.unit), raw.unit) if raw.cat_rc == 0 else UnitFile()
    )
    journal = raw.journal or ""
    progress = vllm_log.parse_load_progress(journal) if journal else LoadProgress()
    redactor = Redactor(known_secrets or [])

    unit_env = _unit_env(raw, unit, show, warnings)
    declared_argv = unitfile.expand_exec_start(unit, env=unit_env) if unit.exec_start else show.exec_start_argv
    declared = _parse_cmd(raw, declared_argv, warnings) if declared_argv else None

    running: VllmCommand | None = None
    process_env: dict[str, str] | None = None
    argv: list[str] = []
    source: Literal["process", "unit", "none"] = "none"
    if raw.cmdline is not None:
        if raw.cmdline.data is not None:
            argv = split_nul(raw.cmdline.data)
            running = _parse_cmd(raw, argv, warnings)
            source = "process"
        else:
            warnings.append(f"could not read /proc/{show.main_pid}/cmdline — settings are from the unit file")
    if raw.environ is not None:
        if raw.environ.data is not None:
            process_env = environ_dict(raw.environ.data)
        else:
            warnings.append(
                f"no permission to read /proc/{show.main_pid}/environ (sudo -n refused) — the environment is "
                "shown as the unit file declares it; see the README for the sudoers line that allows it"
            )
    cmd = running or declared
    if cmd is None:
        source = "none"
    elif running is None:
        source = "unit"

    # Every secret we can see is remembered, so it is also redacted where it appears in free text.
    secret_vals: list[str] = []
    for c in (running, declared):
        if c is not None:
            secret_vals += vllm_args.secret_values(c)
    for e in (unit_env, process_env or {}):
        secret_vals += [v for k, v in e.items() if is_secret_name(k)]
    redactor.add(*secret_vals)

    # The environment contract: names the service's own configuration sets, values the process got.
    declared_env = dict(unit_env)
    if cmd is not None and cmd.wrapper == "docker":
        declared_env.update(_docker_env(raw, cmd, process_env or {}))
    env_values: dict[str, str] = {}
    for name, value in declared_env.items():
        if cmd is not None and cmd.wrapper == "docker":
            env_values[name] = value
        elif process_env is not None and name in process_env:
            env_values[name] = process_env[name]
        else:
            env_values[name] = value
    if process_env is not None and (cmd is None or cmd.wrapper != "docker"):
        for name, value in process_env.items():
            if name not in env_values and name not in AMBIENT_ENV and name.startswith(RELEVANT_PREFIXES):
                env_values[name] = value
        for name, value in unit_env.items():
            if name in process_env and process_env[name] != value:
                shown = REDACTED if is_secret_name(name) else redactor.text(f"{process_env[name]} → {value}")
                warnings.append(
                    f"{name} differs between the running process and the unit ({shown}): "
                    "the unit was edited but the service not restarted"
                )
            elif name not in process_env:
                warnings.append(f"{name} is set in the unit but not in the running process: restart to apply")
    env_out = {k: redactor.text(redact_value(k, v)) for k, v in env_values.items()}

    if show.need_daemon_reload:
        warnings.append(
            "the unit file changed on disk but systemd was not reloaded (NeedDaemonReload=yes): run "
            "`systemctl daemon-reload`; a restart before that would still use the old unit"
        )
    if running is not None and declared is not None:
        diffs = _drift(running, declared, redactor)
        if diffs:
            warnings.append(
                "the running server's flags differ from the unit file (edited but not restarted): "
                + "; ".join(diffs)
            )
    if cmd is not None:
        warnings += vllm_args.removed_flag_warnings(cmd.flags)
        warnings += [redactor.text(n) for n in cmd.notes]
    warnings += vllm_args.removed_env_warnings(env_values)

    state, reason = classify(show, raw, progress, facts.now)
    version: str | None = None
    if raw.version is not None and raw.version.status == 200:
        try:
            v = json.loads(raw.version.body).get("version")
            version = str(v) if v else None
        except (ValueError, AttributeError):
            version = None
    if version is None and journal:
        version = vllm_log.parse_banner_version(journal)

    gpus = _visible_gpus(facts.gpus, env_values.get("CUDA_VISIBLE_DEVICES"))
    if facts.gpu_error:
        warnings.append(facts.gpu_error)

    active = f"{show.active_state} ({show.sub_state})" if show.active_state else ""
    st = ServiceState(
        service=service_name,
        node=node_name,
        unit=raw.unit,
        state=state,
        reason=redactor.text(reason) if reason else None,
        since=_since(show, state),
        active=active,
        main_pid=show.main_pid,
        restarts=show.n_restarts,
        model=redactor.text(cmd.model) if cmd and cmd.model else None,
        flags=_redact_flags(cmd.flags, redactor) if cmd else {},
        env=env_out,
        version=version,
        gpus=gpus,
        warnings=[redactor.text(w) for w in dict.fromkeys(warnings)],
        settings_source=source,
        wrapper=cmd.wrapper if cmd else None,
        api_url=raw.url,
        command=[redactor.text(a) for a in _redact_argv(argv or declared_argv)],
        invocation_id=show.invocation_id,
        phase=progress.phase if state in ("loading", "starting", "ready") else None,
    )
    if progress.total and state in ("loading", "starting"):
        fraction = round(progress.fraction or 0, 3)
        st.progress = {"done": progress.done or 0, "total": progress.total, "fraction": fraction}
    if state == "loading" and progress.phase == "loading_weights" and progress.weights_remaining_s is not None:
        # tqdm's own estimate for the shards left; the phases after the weights are added from history
        # by the handler when the store knows them.
        st.eta_seconds, st.eta_basis = progress.weights_remaining_s, "shard_rate"
    st.throughput = _throughput(raw, journal, facts)
    t = st.throughput
    if (
        state == "ready" and t is not None and t.source == "metrics" and (t.running or 0) > 0
        and t.generation_tps is not None and t.generation_tps == 0
    ):
        # /health only says the engine process is alive; a hung engine still answers 200.
        st.warnings.append(
            f"possibly hung: {t.running} request(s) running but no tokens generated during the sample window"
        )
    if raw.models is not None:
        st.served_models, st.models_error = _served_models(raw.models)
        if st.models_error:
            st.warnings.append(st.models_error)
    if raw.logs is not None:
        # Split on newlines only: a tqdm update starts with a carriage return but is part of its line.
        st.logs = [redactor.text(line.replace("\r", " ").rstrip()) for line in raw.logs.split("\n") if line.strip()]
    if raw.bench_files:
        records: list[dict[str, object]] = []
        for path, text in raw.bench_files.items():
            records += _bench_records(path, text)
        st.bench = bench_parser.summarize_bench(records)
    elif raw.bench_dir is not None:
        st.bench = BenchSummary()
    return st


def _served_models(probe: HttpProbe) -> tuple[list[str] | None, str | None]:
    """Model ids and roots from ``/v1/models`` (asked with the bot's API key), or why there are none."""
    if probe.status == 401:
        return None, "/v1/models refused the API key the bot holds for this service (401): check api_key_env"
    if probe.status != 200:
        return None, f"/v1/models did not answer ({probe.error or probe.status})"
    try:
        cards = json.loads(probe.body).get("data") or []
    except (ValueError, AttributeError):
        return None, "/v1/models answered something that is not the OpenAI model list"
    names = [str(c.get(k)) for c in cards if isinstance(c, dict) for k in ("id", "root") if c.get(k)]
    return list(dict.fromkeys(names)), None


def expected_model(st: ServiceState) -> str | None:
    """The name the server should list: the first ``--served-model-name``, else the model."""
    names = st.flags.get("served-model-name")
    if isinstance(names, list) and names:
        return names[0]
    if isinstance(names, str):
        return names
    return st.model


def _redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    secret_next = False
    for tok in argv:
        if secret_next and not tok.startswith("-"):
            out.append(REDACTED)
            continue
        secret_next = False
        name, eq, _value = tok.partition("=")
        if tok.startswith("--") and is_secret_name(name.lstrip("-")):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(tok)
                secret_next = True
            continue
        out.append(tok)
    return out


def attach_gpu_owners(states: list[ServiceState], facts: NodeFacts) -> list[GpuProcess]:
    """Fill ``gpus[].processes`` and return the GPU processes that belong to no running service."""
    parents = facts.raw.parents
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    owned: set[int] = set()
    for st in states:
        if st.main_pid and st.state not in ("stopped", "failed", "unreachable"):
            stack = [st.main_pid]
            while stack:
                pid = stack.pop()
                if pid not in owned:
                    owned.add(pid)
                    stack += children.get(pid, [])
    # A container's processes are not descendants of the docker CLI that the unit runs.
    containers_running = any(st.wrapper == "docker" and st.main_pid for st in states)
    leftovers = [
        p for p in facts.processes
        if p.pid is not None and p.pid not in owned and not containers_running and (p.memory_mib or 0) > 0
    ]
    by_index: dict[int, list[GpuProcessBrief]] = {}
    for p in facts.processes:
        if p.gpu_index is not None:
            by_index.setdefault(p.gpu_index, []).append(
                GpuProcessBrief(pid=p.pid, name=p.name, memory_mib=p.memory_mib)
            )
    for st in states:
        st.gpus = [g.model_copy(update={"processes": by_index.get(g.index, [])}) for g in st.gpus]
        st.leftovers = list(leftovers)
        if leftovers and st.state in ("stopped", "failed", "starting"):
            total = sum(p.memory_mib or 0 for p in leftovers)
            st.warnings.append(
                f"{len(leftovers)} GPU process(es) ({', '.join(sorted({p.name for p in leftovers}))}) hold "
                f"{total:,} MiB but belong to no running service — leftovers of a crash? Check with "
                "`pgrep -af 'VLLM::'` on the node and stop them before starting again"
            )
    return leftovers


def _visible_gpus(gpus: list[GpuInfo], visible: str | None) -> list[GpuInfo]:
    if not visible:
        return gpus
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    picked = [g for g in gpus if str(g.index) in wanted or g.uuid in wanted]
    return picked or gpus


def _throughput(raw: UnitRaw, journal: str, facts: NodeFacts) -> Throughput | None:
    now = facts.now
    from_metrics: Throughput | None = None
    ok = [m for m in raw.metrics if m.probe.status == 200]
    if len(ok) >= 2:
        try:
            a = metrics_parser.parse_metrics(ok[0].probe.body)
            b = metrics_parser.parse_metrics(ok[-1].probe.body)
            from_metrics = metrics_parser.throughput_from_samples(a, b, max(0.001, ok[-1].at - ok[0].at))
        except ValueError:
            from_metrics = None
    if from_metrics is not None:
        return from_metrics
    if journal and now is not None:
        line = vllm_log.parse_stats_lines(journal, year=now.year, tz_offset=facts.raw.tz)
        if line is not None:
            return metrics_parser.throughput_from_stats(line, now)
    if len(ok) == 1:
        try:
            s = metrics_parser.parse_metrics(ok[0].probe.body)
        except ValueError:
            return None
        return Throughput(
            running=int(s.running) if s.running is not None else None,
            waiting=int(s.waiting) if s.waiting is not None else None,
            kv_cache_usage=s.kv_cache_usage, source="metrics", age_seconds=0,
        )
    return None
