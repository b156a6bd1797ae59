"""Turn what the probe printed about a unit into a ``ServiceState``: state, settings, env, warnings.

Secrets are redacted here, as the raw text is interpreted: nothing downstream ever sees them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

from services.models import (
    BenchSummary,
    FlagValue,
    GpuInfo,
    GpuProcess,
    GpuProcessBrief,
    HttpProbe,
    LoadProgress,
    Phase,
    ReasonKind,
    ServiceState,
    SettingsSource,
    State,
    Throughput,
    UnitFile,
    UnitShow,
    VllmCommand,
    WarningKind,
    WarningLines,
)
from services.node.probe import NodeRaw, ProcRow, UnitRaw, environ_dict, split_nul
from services.parse import bench as bench_parser
from services.parse import gpu as gpu_parser
from services.parse import metrics as metrics_parser
from services.parse import systemd, unitfile, vllm_args, vllm_log
from services.redact import REDACTED, Redactor, collect_secret_values, is_secret_name, redact_value

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


def _unit_env(raw: UnitRaw, unit: UnitFile, show: UnitShow, warnings: WarningLines,
              sources: dict[str, str]) -> dict[str, str]:
    """What the unit sets: Environment= then EnvironmentFile= (files override, as systemd does).

    ``sources`` gets where each variable is set ("Environment= in the unit", "EnvironmentFile PATH").
    """
    env = dict(unit.environment or show.environment)
    sources.update(dict.fromkeys(env, "Environment= in the unit"))
    files = unit.environment_files or show.environment_files
    for path, optional in files:
        text = _file_text(raw, path)
        if text is None:
            f = raw.files.get(path)
            if f is not None and not optional:
                warnings.add(
                    "envfile-unreadable",
                    f"could not read EnvironmentFile {path} (permission denied or missing): its variables "
                    "are shown from the running process only"
                )
            continue
        from_file = unitfile.parse_env_file(text)
        env.update(from_file)
        sources.update(dict.fromkeys(from_file, f"EnvironmentFile {path}"))
    return env


def _yaml_config(raw: UnitRaw, argv: list[str], warnings: list[str]) -> dict[str, object] | None:
    for i, tok in enumerate(argv[:-1]):
        if tok == "--config":
            path = argv[i + 1]
            text = _file_text(raw, path)
            if text is None:
                warnings.append(f"could not read the vLLM --config file {path}: its settings are not shown")
                return None
            import yaml  # only a unit with --config pays for PyYAML (~10 ms to import)

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                warnings.append(f"the vLLM --config file {path} is not valid YAML ({e.__class__.__name__})")
                return None
            return data if isinstance(data, dict) else None
    return None


def _parse_cmd(raw: UnitRaw, argv: list[str], warnings: list[str]) -> VllmCommand:
    cfg = _yaml_config(raw, argv, warnings)
    # Key order is kept: vLLM turns a nested mapping into JSON in the file's order (a value as passed).
    key = json.dumps(cfg, default=str) if cfg is not None else None
    return _parse_argv_cached(tuple(argv), key)


# A long-running bot asks the same nodes the same questions: the command line, the unit file and the
# bench files rarely change between two questions, so their (pure) parses are cached on the text. The caches
# hold an entry per distinct text, about one per service: sized for fleets past 1,000 services (a cache
# smaller than the fleet misses on every question).
CACHE_ENTRIES = 2048


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _parse_argv_cached(argv: tuple[str, ...], config_json: str | None) -> VllmCommand:
    cfg = json.loads(config_json) if config_json is not None else None
    return vllm_args.parse_vllm_argv(list(argv), cfg)


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _parse_unit_cached(text: str, instance: str | None, unit_name: str) -> UnitFile:
    return unitfile.parse_unit_cat(text, instance=instance, unit_name=unit_name)


# The same holds for `systemctl show` (it only changes when the unit changes state), the ExecStart line
# expanded with the unit's environment and vLLM's logged arguments. What these return is shared between
# calls: assemble only reads it.
@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _parse_show_cached(text: str, tz: str) -> UnitShow:
    return systemd.parse_show(text, tz_offset=tz)


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _expand_exec_start_cached(cat: str, instance: str | None, unit_name: str,
                              env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(unitfile.expand_exec_start(_parse_unit_cached(cat, instance, unit_name), env=dict(env)))


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _parse_vargs_cached(text: str) -> dict[str, object] | None:
    return vllm_log.parse_non_default_args(text)


@functools.lru_cache(maxsize=4096)
def _bench_records(path: str, text: str) -> tuple[dict[str, object], ...]:
    return tuple(bench_parser.parse_bench_extract(path, text))


def _docker_env(raw: UnitRaw, cmd: VllmCommand, host_env: dict[str, str], sources: dict[str, str]
                ) -> dict[str, str]:
    env: dict[str, str] = {}
    for path in cmd.docker_env_files:
        text = _file_text(raw, path)
        if text is None:
            continue
        for k, v in unitfile.parse_docker_env_file(text).items():
            env[k] = v if v is not None else host_env.get(k, "")
            sources[k] = f"docker --env-file {path}"
    for k, v in cmd.docker_env.items():
        env[k] = v if v is not None else host_env.get(k, "")
        sources[k] = "docker run -e"
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


def _unit_missing(show: UnitShow, raw: UnitRaw) -> bool:
    return show.load_state == "not-found" or (raw.show_rc == 0 and not show.load_state and not show.active_state)


def classify(
    show: UnitShow, raw: UnitRaw, progress: LoadProgress, now: datetime | None
) -> tuple[State, str | None]:
    """The service state and, for every state but ready, a short reason."""
    if _unit_missing(show, raw):
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
    service_name: str, node_name: str, raw: UnitRaw, facts: NodeFacts, known_secrets: list[str] | None = None,
    settings: bool = True,
) -> ServiceState:
    """Interpret one unit's probe output.

    ``settings`` False: the probe did not ask what the settings are made of (``ProbeOptions.settings``: the
    watcher's probe, asked of every node every interval). Its answer is then read for the unit's state only
    (:func:`_status`: the same state, reason, times, PIDs, API facts and throughput), not for a settings view
    that such an answer could only take from ``systemctl show`` and that no reader of it looks at: model,
    flags, env, command, pending changes and the warnings about them stay empty.
    """
    if not settings and _status_only(raw):
        return _status(service_name, node_name, raw, facts, tuple(known_secrets or ()))
    warnings = WarningLines()
    show = _parse_show_cached(raw.show, facts.raw.tz) if raw.show_rc == 0 else UnitShow(id=raw.unit)
    unit = (
        _parse_unit_cached(raw.cat, _instance(raw.unit), raw.unit) if raw.cat_rc == 0 else UnitFile()
    )
    journal = raw.journal or ""
    progress = vllm_log.parse_load_progress(journal) if journal else LoadProgress()
    redactor = Redactor(known_secrets or [])

    env_sources: dict[str, str] = {}
    unit_env = _unit_env(raw, unit, show, warnings, env_sources)
    declared_argv = (list(_expand_exec_start_cached(raw.cat, _instance(raw.unit), raw.unit, tuple(unit_env.items())))
                     if unit.exec_start else show.exec_start_argv)
    declared = _parse_cmd(raw, declared_argv, warnings) if declared_argv else None

    running: VllmCommand | None = None
    process_env: dict[str, str] | None = None
    argv: list[str] = []
    source: SettingsSource = "none"
    main_cmd: VllmCommand | None = None
    if raw.cmdline is not None and raw.cmdline.data is not None:
        argv = split_nul(raw.cmdline.data)
        main_cmd = _parse_cmd(raw, argv, warnings)
    if raw.environ is not None:
        if raw.environ.data is not None:
            process_env = environ_dict(raw.environ.data)
        else:
            warnings.add(
                "environ-denied",
                f"no permission to read /proc/{show.main_pid}/environ (sudo -n refused) — the environment is "
                "shown as the unit file declares it; see the README for the sudoers line that allows it"
            )
    pick = _pick_server(raw, show.main_pid, main_cmd, warnings)
    settings_pid: int | None = None
    settings_note: str | None = None
    env_from_child = False
    if pick is not None:
        running, settings_pid, settings_note = pick.cmd, pick.pid, pick.note
        source = "process" if pick.pid == show.main_pid else "cgroup-process"
        if pick.pid != show.main_pid:
            argv = pick.argv
            env_file = raw.child_environ
            if env_file is not None and env_file.path == f"/proc/{pick.pid}/environ":
                if env_file.data is not None:
                    process_env = environ_dict(env_file.data)
                    env_from_child = True
                else:
                    warnings.append(f"could not read /proc/{pick.pid}/environ (the vLLM process): the environment "
                                    "is shown from the main process and the unit")
    log_args = _parse_vargs_cached(raw.vargs) if raw.vargs else None
    log_cmd = _log_command(log_args) if log_args else None
    api = _api_facts(raw)
    if running is None and log_cmd is not None and show.main_pid:
        running, source = log_cmd, "vllm-log"
    cmd: VllmCommand | None = running
    if running is None:
        if declared is not None and declared.wrapper != "unknown":
            cmd, source = declared, "unit"
        elif show.main_pid:
            source = "api" if api.answered else "none"
        elif declared is not None:
            cmd, source = declared, "unit"
    if source == "unit" and raw.cmdline is not None and raw.cmdline.data is None:
        warnings.append(f"could not read /proc/{show.main_pid}/cmdline — settings are from the unit file")
    tried: list[str] = []
    if source in ("vllm-log", "api") or (source == "none" and show.main_pid):
        tried = _what_was_tried(raw, show.main_pid, main_cmd, api)
        settings_note = _fallback_note(source)
    if log_cmd is not None and log_args is not None:
        redactor.add(*vllm_args.secret_values(log_cmd), *_nested_secrets(log_args))
        if running is not None and source != "vllm-log":
            warnings += _cross_check_log(running, log_cmd, settings_pid or show.main_pid)
    if running is not None:
        warnings += _cross_check_api(running, api)

    # Every secret we can see is remembered, so it is also redacted where it appears in free text.
    secret_vals: list[str] = []
    for c in (running, declared, log_cmd):
        if c is not None:
            secret_vals += vllm_args.secret_values(c)
            # Values under secret-named keys at any depth of JSON flags (and the --config file merged into
            # the flags), so a nested key's value is redacted wherever else it appears too.
            redactor.add_from(c.flags)
    for e in (unit_env, process_env or {}):
        secret_vals += [v for k, v in e.items() if is_secret_name(k)]
    redactor.add(*secret_vals)

    # What a restart would apply: running settings → the unit on disk (issue 14; None when unknown).
    pending: list[str] = []
    pending_known = False
    # The environment contract: names the service's own configuration sets, values the process got.
    declared_env = dict(unit_env)
    if cmd is not None and cmd.wrapper == "docker":
        declared_env.update(_docker_env(raw, cmd, process_env or {}, env_sources))
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
                env_sources[name] = "the running process only (not in the unit)"
        launcher = _launcher_text(main_cmd.launcher if main_cmd and main_cmd.launcher else argv[:1])
        for name, value in unit_env.items():
            if name in process_env and process_env[name] != value:
                shown = REDACTED if is_secret_name(name) else redactor.text(f"{process_env[name]} → {value}")
                why = (f"the main process ({launcher}) changed it" if env_from_child
                       else "the unit was edited but the service not restarted")
                warnings.append(f"{name} differs between the running process and the unit ({shown}): {why}")
                if not env_from_child:
                    pending.append(f"{name} {shown}")
            elif name not in process_env:
                if not env_from_child:
                    pending.append(f"{name} (unset) → " + (REDACTED if is_secret_name(name) else redactor.text(value)))
                if env_from_child:
                    warnings.append(f"{name} is set in the unit but the vLLM process (PID {settings_pid}) does not "
                                    f"have it: the wrapper the unit starts ({launcher}) did not pass it on")
                else:
                    warnings.append(f"{name} is set in the unit but not in the running process: restart to apply")
    env_out = {k: redactor.text(redact_value(k, v)) for k, v in env_values.items()}

    if show.need_daemon_reload:
        warnings.append(
            "the unit file changed on disk but systemd was not reloaded (NeedDaemonReload=yes): run "
            "`systemctl daemon-reload`; a restart before that would still use the old unit"
        )
    if running is not None and declared is not None and declared.wrapper != "unknown" and source != "vllm-log":
        diffs = _drift(running, declared, redactor)
        pending_known = True
        pending[:0] = diffs
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
    version = _version(raw, journal)

    gpus = _visible_gpus(facts.gpus, env_values.get("CUDA_VISIBLE_DEVICES"))
    if facts.gpu_error:
        warnings.add("gpu-query-failed", facts.gpu_error)

    shown_flags, redacted_flags = _shown_flags(cmd.flags, _redact_flags(cmd.flags, redactor)) if cmd else ({}, [])
    st = ServiceState(
        **_common(service_name, node_name, raw, show, state, reason, redactor, progress, api, version, gpus,
                  warnings),
        model=redactor.text(cmd.model) if cmd and cmd.model else (redactor.text(api.root) if api.root else None),
        flags=shown_flags,
        redacted_flags=redacted_flags,
        env=env_out,
        env_sources={k: env_sources[k] for k in env_out if k in env_sources},
        settings_source=source,
        settings_pid=settings_pid if source in ("process", "cgroup-process") else None,
        settings_note=redactor.text(settings_note) if settings_note else None,
        settings_tried=[redactor.text(t) for t in tried],
        wrapper=cmd.wrapper if cmd and source != "vllm-log" else None,
        command=[redactor.text(a) for a in _redact_argv(argv or declared_argv)],
    )
    _live(st, raw, journal, progress, show, facts, redactor)
    st.pending_changes = [redactor.text(p) for p in pending] if pending_known else None
    return st



class _Common(TypedDict):
    """What both readings of a unit's answer (:func:`assemble` and :func:`_status`) say alike."""

    service: str
    node: str
    unit: str
    state: State
    reason: str | None
    since: datetime | None
    active: str
    main_pid: int
    restarts: int
    version: str | None
    gpus: list[GpuInfo]
    warnings: list[str]
    warning_kinds: dict[str, WarningKind]
    reason_kind: ReasonKind | None
    api_model: str | None
    api_max_model_len: int | None
    api_url: str | None
    invocation_id: str
    phase: Phase | None


def _common(service_name: str, node_name: str, raw: UnitRaw, show: UnitShow, state: State, reason: str | None,
            redactor: Redactor, progress: LoadProgress, api: _Api, version: str | None, gpus: list[GpuInfo],
            warnings: WarningLines) -> _Common:
    """The fields of a ``ServiceState`` that the unit's state, the API and the warnings give, redacted."""
    return _Common(
        service=service_name,
        node=node_name,
        unit=raw.unit,
        state=state,
        reason=redactor.text(reason) if reason else None,
        since=_since(show, state),
        active=f"{show.active_state} ({show.sub_state})" if show.active_state else "",
        main_pid=show.main_pid,
        restarts=show.n_restarts,
        version=version,
        gpus=gpus,
        warnings=[redactor.text(w) for w in dict.fromkeys(warnings)],
        warning_kinds={redactor.text(w): k for w, k in warnings.kinds.items()},
        reason_kind="unit-not-found" if _unit_missing(show, raw) else None,
        api_model=redactor.text(api.root) if api.root else None,
        api_max_model_len=api.max_model_len,
        api_url=raw.url,
        invocation_id=show.invocation_id,
        phase=progress.phase if state in ("loading", "starting", "ready") else None,
    )


def _version(raw: UnitRaw, journal: str) -> str | None:
    """vLLM's version: what /version said, else the journal's start-up banner."""
    version: str | None = None
    if raw.version is not None and raw.version.status == 200:
        try:
            v = json.loads(raw.version.body).get("version")
            version = str(v) if v else None
        except (ValueError, AttributeError):
            version = None
    if version is None and journal:
        version = vllm_log.parse_banner_version(journal)
    return version


def _live(st: ServiceState, raw: UnitRaw, journal: str, progress: LoadProgress, show: UnitShow, facts: NodeFacts,
          redactor: Redactor) -> None:
    """What the unit is doing now, onto ``st``: load progress, throughput (and a hang it shows), the served
    models, the recent log lines, the benchmark results."""
    state = st.state
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
    if raw.models is not None and (raw.models_keyed or raw.models.status == 200):
        st.served_models, st.models_error = _served_models(raw.models)
        if st.models_error:
            st.warnings.append(st.models_error)
    if raw.logs is not None:
        # Split on newlines only: a tqdm update starts with a carriage return but is part of its line.
        # One call for all lines, so a PEM key spread over several journal lines goes whole.
        st.logs = redactor.lines([line.replace("\r", " ").rstrip() for line in raw.logs.split("\n") if line.strip()])
    st.need_daemon_reload = show.need_daemon_reload
    if raw.bench_files:
        records: list[dict[str, object]] = []
        for path, text in raw.bench_files.items():
            records += _bench_records(path, text)
        st.bench = bench_parser.summarize_bench(records)
    elif raw.bench_dir is not None:
        st.bench = BenchSummary()


def _status_only(raw: UnitRaw) -> bool:
    """True when the answer holds none of what settings are made of (the unit file, the files it reads, the
    processes' argv and environment, vLLM's logged arguments): what a probe without ``settings`` returns."""
    return (raw.cat == "" and raw.cat_rc == 0 and raw.cmdline is None and raw.environ is None
            and raw.child_environ is None and not raw.procs and raw.procs_src is None and raw.vargs is None
            and not raw.files)


def _status(service_name: str, node_name: str, raw: UnitRaw, facts: NodeFacts, known: tuple[str, ...]
            ) -> ServiceState:
    """:func:`assemble` of an answer without settings (see there): the unit's state only, redacted with the
    secrets the whole interpretation would have found in the same answer (:func:`_status_inputs`)."""
    shown = raw.show if raw.show_rc == 0 else None
    show = _parse_show_cached(shown, facts.raw.tz) if shown is not None else UnitShow(id=raw.unit)
    secrets, visible = _status_inputs(raw.unit, shown, facts.raw.tz, known)
    redactor = Redactor(secrets)
    journal = raw.journal or ""
    progress = vllm_log.parse_load_progress(journal) if journal else LoadProgress()
    api = _api_facts(raw)
    state, reason = classify(show, raw, progress, facts.now)
    warnings = WarningLines()
    if facts.gpu_error:
        warnings.add("gpu-query-failed", facts.gpu_error)
    st = ServiceState(**_common(service_name, node_name, raw, show, state, reason, redactor, progress, api,
                                _version(raw, journal), _visible_gpus(facts.gpus, visible), warnings))
    _live(st, raw, journal, progress, show, facts, redactor)
    return st


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _status_inputs(unit_name: str, show_text: str | None, tz: str, known: tuple[str, ...]
                   ) -> tuple[tuple[str, ...], str | None]:
    """For an answer without settings: every secret :func:`assemble` would redact (the configured keys, the
    secret values of the command the unit declares and of its secret-named variables) and the unit's
    CUDA_VISIBLE_DEVICES. They depend on ``systemctl show`` alone, which changes only with the unit: worked
    out once per distinct text, as the whole interpretation works them out."""
    raw = UnitRaw(unit=unit_name, show=show_text or "", show_rc=0 if show_text is not None else 1)
    show = _parse_show_cached(show_text, tz) if show_text is not None else UnitShow(id=unit_name)
    scratch = WarningLines()
    unit = _parse_unit_cached("", _instance(unit_name), unit_name)
    unit_env = _unit_env(raw, unit, show, scratch, {})
    argv = show.exec_start_argv
    declared = _parse_cmd(raw, argv, scratch) if argv else None
    # The command assemble() reads the settings from when the answer has no process to read: the declared one.
    cmd = declared if declared is not None and (declared.wrapper != "unknown" or not show.main_pid) else None
    env = dict(unit_env)
    if cmd is not None and cmd.wrapper == "docker":
        env.update(_docker_env(raw, cmd, {}, {}))
    secrets = list(known)
    if declared is not None:
        secrets += vllm_args.secret_values(declared)
        secrets += collect_secret_values(declared.flags)
    secrets += [v for k, v in unit_env.items() if is_secret_name(k)]
    return tuple(secrets), env.get("CUDA_VISIBLE_DEVICES")


@dataclass
class _Pick:
    """The process the settings are read from, its parsed command line and why it was chosen."""

    pid: int
    argv: list[str]
    cmd: VllmCommand
    note: str | None


def _short(argv: list[str], limit: int = 90) -> str:
    text = " ".join(_redact_argv(argv))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _launcher_text(words: list[str]) -> str:
    """``sudo -u vllm``, ``uv run --project /opt/app``: program paths shortened to their names."""
    shown = [w.rsplit("/", 1)[-1] if i == 0 or (w.startswith("/") and "/bin/" in w) else w
             for i, w in enumerate(_redact_argv(words))]
    text = " ".join(shown)
    return text if len(text) <= 60 else text[:59] + "…"


_ENTRY_RANK = {"vllm": 2, "module": 2, "serve-subcommand": 1}


def _depth(pid: int, main_pid: int, parents: dict[int, int]) -> int:
    d, seen = 0, set()
    while pid != main_pid and pid in parents and pid not in seen:
        seen.add(pid)
        pid, d = parents[pid], d + 1
    return d


def _pick_server(raw: UnitRaw, main_pid: int, main_cmd: VllmCommand | None, warnings: list[str]) -> _Pick | None:
    """The vLLM API server among the unit's processes.

    The main process wins when it is vLLM itself (``vllm serve``, the api_server module, the docker CLI
    whose container the unit runs). Otherwise (a wrapper that forks: sudo, uv run, conda run, a shell or a
    Python launcher that does not exec; a launcher that hides the arguments) every other process of the
    unit is read with vLLM's grammar, and the best one wins: no wrapper in front, vLLM's own entry point
    over a ``serve`` subcommand, the parent over its children (vLLM renames its engine and workers
    ``VLLM::…``, and multiprocessing children carry no server arguments).
    """
    main_argv = split_nul(raw.cmdline.data) if raw.cmdline is not None and raw.cmdline.data is not None else []
    if main_cmd is not None and main_cmd.wrapper != "unknown" and (
        main_cmd.wrapper == "docker" or (main_cmd.wrapper != "bash" and not vllm_args.is_wrapped(main_cmd))
    ):
        return _Pick(main_pid, main_argv, main_cmd, None)
    parents = {p.pid: p.ppid for p in raw.procs}
    best: tuple[tuple[int, int, int, int], ProcRow, VllmCommand, list[str]] | None = None
    for p in raw.procs:
        if p.pid == main_pid or not p.argv or p.argv[0].startswith("VLLM::") or p.comm.startswith("VLLM::"):
            continue
        scratch: list[str] = []
        c = _parse_cmd(raw, p.argv, scratch)
        if c.wrapper == "unknown":
            continue
        rank = (0 if c.launcher else 1, _ENTRY_RANK.get(c.entry or "", 0), -_depth(p.pid, main_pid, parents), -p.pid)
        if best is None or rank > best[0]:
            best = (rank, p, c, scratch)
    if best is not None:
        _rank, p, c, scratch = best
        warnings += scratch
        where = ("a child of the main process" if raw.procs_src == "ppid"
                 else "a process in the unit's cgroup")
        if main_cmd is None or main_cmd.wrapper == "unknown":
            why = "does not run vLLM itself"
        elif main_cmd.wrapper == "bash":
            why = "is a shell that starts it without exec"
        else:
            why = f"is a wrapper ({_launcher_text(main_cmd.launcher)})"
        return _Pick(p.pid, p.argv or [], c, f"settings from PID {p.pid} ({_short(p.argv or [])}), {where}: "
                     f"the main process (PID {main_pid}, {_short(main_argv, 50)}) {why}")
    if main_cmd is not None and main_cmd.wrapper != "unknown":
        note: str | None = None
        if main_cmd.launcher:
            note = (f"settings from the main process (PID {main_pid}), read after its wrapper "
                    f"({_launcher_text(main_cmd.launcher)})")
        return _Pick(main_pid, main_argv, main_cmd, note)
    return None


@dataclass
class _Api:
    """What vLLM's own API says about the settings."""

    answered: bool = False
    root: str | None = None
    ids: tuple[str, ...] = ()
    max_model_len: int | None = None
    models_status: int | None = None


def _api_facts(raw: UnitRaw) -> _Api:
    api = _Api()
    for probe in (raw.health, raw.version, raw.models):
        if probe is not None and probe.status is not None:
            api.answered = True
    m = raw.models
    api.models_status = m.status if m is not None else None
    if m is None or m.status != 200:
        return api
    try:
        cards = json.loads(m.body).get("data") or []
    except (ValueError, AttributeError):
        return api
    base = [c for c in cards if isinstance(c, dict) and not c.get("parent")]
    if not base:
        return api
    first = base[0]
    api.root = str(first.get("root") or first.get("id") or "") or None
    api.ids = tuple(str(c.get("id")) for c in base if c.get("id"))
    mml = first.get("max_model_len")
    api.max_model_len = mml if isinstance(mml, int) and not isinstance(mml, bool) else None
    return api


_LOG_SKIP = frozenset({"model", "model_tag", "config", "subparser", "dispatch_function"})


def _py_flag(value: object) -> FlagValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, list | tuple):
        return [json.dumps(v) if isinstance(v, dict | list) else str(v) for v in value]
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _nested_secrets(value: object, name: str = "") -> list[str]:
    """Values under a secret-named key at any depth of the logged arguments (a connector's ``api_key``)."""
    if isinstance(value, dict):
        return [v for k, x in value.items() for v in _nested_secrets(x, str(k))]
    if isinstance(value, list | tuple):
        return [v for x in value for v in _nested_secrets(x, name)]
    if name and is_secret_name(name) and not isinstance(value, bool) and value is not None:
        return [str(value)]
    return []


def _log_command(args: dict[str, object]) -> VllmCommand:
    """vLLM's ``non-default args`` as a command: argparse dests back to long flag names."""
    model = args.get("model") or args.get("model_tag")
    flags: dict[str, FlagValue] = {}
    for key, value in args.items():
        if key in _LOG_SKIP or value is None:
            continue
        flags[key.replace("_", "-")] = _py_flag(value)
    return VllmCommand(wrapper="unknown", model=str(model) if model else None, flags=flags)


_HUMAN_INT = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4, "K": 1024, "M": 1024**2, "G": 1024**3,
              "T": 1024**4}  # fmt: skip


def _comparable(value: FlagValue) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    text = value.strip()
    if text[-1:] in _HUMAN_INT and text[:-1].replace(".", "", 1).isdigit():
        return float(text[:-1]) * _HUMAN_INT[text[-1]]
    try:
        parsed: object = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, int | float) and not isinstance(parsed, bool):
        return float(parsed)
    return parsed


def _cross_check_log(running: VllmCommand, logged: VllmCommand, pid: int) -> list[str]:
    """Where vLLM's own start-up log disagrees with the command line read from the process."""
    diffs: list[str] = []
    if running.model and logged.model and running.model != logged.model:
        diffs.append(f"model {running.model} (command line) vs {logged.model} (log)")
    for key, lv in logged.flags.items():
        rv = running.flags.get(key)
        if rv is None or "." in key or _comparable(rv) == _comparable(lv):
            continue
        if is_secret_name(key):
            diffs.append(f"--{key} differs ({REDACTED})")
        else:
            fmt = vllm_args.format_flag_value
            diffs.append(f"--{key} {fmt(rv)} (command line) vs {fmt(lv)} (log)")
    if not diffs:
        return []
    return [f"vLLM's start-up log (`non-default args`) disagrees with the command line of PID {pid}: "
            + "; ".join(diffs)]


def _cross_check_api(running: VllmCommand, api: _Api) -> list[str]:
    """Where ``/v1/models`` disagrees with the command line (a resolved value, e.g. an auto-fit length)."""
    out: list[str] = []
    if api.root and running.model and running.model != api.root and running.model not in api.ids:
        out.append(f"/v1/models says the server loaded {api.root}, but the settings name {running.model}")
    flag = running.flags.get("max-model-len")
    if api.max_model_len is not None and isinstance(flag, str):
        asked = _comparable(flag)
        if isinstance(asked, float) and asked > 0 and int(asked) != api.max_model_len:
            out.append(f"/v1/models reports max_model_len {api.max_model_len}, but the settings say "
                       f"--max-model-len {flag}: vLLM resolved another value than the one passed")
    return out


def _what_was_tried(raw: UnitRaw, main_pid: int, main_cmd: VllmCommand | None, api: _Api) -> list[str]:
    """Each place a command line or setting was looked for, and what it gave."""
    out: list[str] = []
    if raw.cmdline is None:
        out.append(f"/proc/{main_pid}/cmdline (main process): not read")
    elif raw.cmdline.data is None:
        out.append(f"/proc/{main_pid}/cmdline (main process): not readable, and sudo -n refused")
    else:
        argv = split_nul(raw.cmdline.data)
        out.append(f"/proc/{main_pid}/cmdline (main process): `{_short(argv, 70)}` is no vLLM server command line")
    others = [p for p in raw.procs if p.pid != main_pid]
    if raw.procs_src is None:
        out.append("the unit's other processes: not listed")
    else:
        where = ("under the main process (no cgroup.procs file was readable)" if raw.procs_src == "ppid"
                 else f"in {raw.procs_src}")
        names = ", ".join(f"{p.pid} ({p.comm})" for p in others[:8]) + (" …" if len(others) > 8 else "")
        out.append(f"{len(others)} other process(es) {where}" + (f": {names}" if others else "")
                   + ": none is a vLLM API server command line")
    if raw.vargs:
        out.append("vLLM's start-up line `non-default args`: read")
    elif raw.journal_src is None:
        out.append("the journal: not read")
    elif not raw.journal:
        out.append(f"the journal ({raw.journal_src}): empty or not readable "
                   "(not in the systemd-journal group, sudo -n refused)")
    else:
        out.append(f"the journal ({raw.journal_src}): no `non-default args` line in this start")
    if raw.url is None:
        out.append("vLLM's API: no URL known")
    else:
        v = raw.version
        out.append(f"{raw.url}/version: " + (v.body.strip()[:60] if v is not None and v.status == 200
                                             else "no answer" if v is None else f"{v.error or v.status}"))
        if api.models_status == 200:
            out.append(f"{raw.url}/v1/models: {api.root}, max_model_len {api.max_model_len}")
        elif api.models_status == 401:
            out.append(f"{raw.url}/v1/models: 401 (it needs an API key the bot does not hold: set api_key_env)")
        elif raw.models is not None:
            out.append(f"{raw.url}/v1/models: {raw.models.error or raw.models.status}")
        else:
            out.append(f"{raw.url}/v1/models: not asked (/health did not answer)")
    return out


def _fallback_note(source: SettingsSource) -> str:
    if source == "vllm-log":
        return ("settings from vLLM's own start-up log line `non-default args` (values as vLLM resolved them, "
                "not as passed): no process of the unit has a readable vLLM command line")
    if source == "api":
        return ("only vLLM's API could be read: the model and max_model_len are from /v1/models; no command "
                "line or start-up log was readable")
    return "no settings could be read from the running service"


def _shown_flags(
    original: dict[str, FlagValue], redacted: dict[str, FlagValue]
) -> tuple[dict[str, FlagValue], list[str]]:
    """The flags to show: each value exactly as passed unless redaction changed what it says.

    A JSON value whose redacted form parses to the same object as the original lost no secret: the
    original text is kept (key order, spacing), so the answer shows the value as the process received it.
    """
    shown: dict[str, FlagValue] = {}
    changed: list[str] = []
    for key, before in original.items():
        after = redacted.get(key, before)
        if isinstance(before, str) and isinstance(after, str) and after != before and _same_json(before, after):
            after = before
        shown[key] = after
        if after != before:
            changed.append(key)
    return shown, changed


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


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


# The GPU records of a service have every field set, and pydantic keeps a set of the names set per record
# (728 bytes for GpuInfo's nine, as much as the rest of the record; eight GPUs per service, hundreds of
# services per answer). They share one set each: an assignment only ever adds a name already in it.
_GPU_FIELDS = set(GpuInfo.model_fields)
_BRIEF_FIELDS = set(GpuProcessBrief.model_fields)


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
                GpuProcessBrief.model_construct(_BRIEF_FIELDS, pid=p.pid, name=p.name, memory_mib=p.memory_mib)
            )
    for st in states:
        # Each service its own records (the node's list, its report's, stays without processes); built from
        # validated records, so constructed, not validated again, as model_copy did.
        st.gpus = [GpuInfo.model_construct(_GPU_FIELDS, **{**dict(g), "processes": by_index.get(g.index, [])})
                   for g in st.gpus]
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
