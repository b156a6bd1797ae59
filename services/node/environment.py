"""A service's environment: what its unit (and a container's ``-e``) sets, what the running process got, and
where the two differ."""

from __future__ import annotations

from services.models import UnitFile, UnitShow, VllmCommand, Warnings
from services.node.parse_cache import file_text
from services.node.probe import UnitRaw
from services.node.redacted_view import launcher_text
from services.node.settings_source import Settings
from services.parse import unitfile
from services.redact import REDACTED, Redactor, is_secret_name

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


def unit_env(raw: UnitRaw, unit: UnitFile, show: UnitShow, warnings: Warnings,
             sources: dict[str, str] | None = None) -> dict[str, str]:
    """What the unit sets: Environment= then EnvironmentFile= (files override, as systemd does).

    ``sources`` (when given) gets where each variable is set ("Environment= in the unit", "EnvironmentFile PATH").
    """
    sources = {} if sources is None else sources
    env = dict(unit.environment or show.environment)
    sources.update(dict.fromkeys(env, "Environment= in the unit"))
    files = unit.environment_files or show.environment_files
    for path, optional in files:
        text = file_text(raw, path)
        if text is None:
            f = raw.files.get(path)
            if f is not None and not optional:
                warnings.add(
                    f"could not read EnvironmentFile {path} (permission denied or missing): its variables "
                    "are shown from the running process only",
                    "envfile-unreadable",
                )
            continue
        from_file = unitfile.parse_env_file(text)
        env.update(from_file)
        sources.update(dict.fromkeys(from_file, f"EnvironmentFile {path}"))
    return env


def docker_env(raw: UnitRaw, cmd: VllmCommand, host_env: dict[str, str],
               sources: dict[str, str] | None = None) -> dict[str, str]:
    """What ``docker run`` passes into the container: ``--env-file`` files, then ``-e`` (a bare ``-e NAME`` takes
    the value the docker CLI has); ``sources`` (when given) gets where each is set."""
    sources = {} if sources is None else sources
    env: dict[str, str] = {}
    for path in cmd.docker_env_files:
        text = file_text(raw, path)
        if text is None:
            continue
        for k, v in unitfile.parse_docker_env_file(text).items():
            env[k] = v if v is not None else host_env.get(k, "")
            sources[k] = f"docker --env-file {path}"
    for k, v in cmd.docker_env.items():
        env[k] = v if v is not None else host_env.get(k, "")
        sources[k] = "docker run -e"
    return env


def env_values(raw: UnitRaw, s: Settings, declared: dict[str, str],
               sources: dict[str, str] | None = None) -> dict[str, str]:
    """The environment contract: the names the service's own configuration sets (``declared``, the unit's),
    with the values the process got; and the variables that matter to vLLM that a wrapper set. ``sources``
    (when given) gets where each of those is set."""
    sources = {} if sources is None else sources
    cmd, process_env = s.cmd, s.process_env
    in_docker = cmd is not None and cmd.wrapper == "docker"
    names = dict(declared)
    if in_docker and cmd is not None:
        names.update(docker_env(raw, cmd, process_env or {}, sources))
    values: dict[str, str] = {}
    for name, value in names.items():
        if not in_docker and process_env is not None and name in process_env:
            values[name] = process_env[name]
        else:
            values[name] = value
    if process_env is not None and not in_docker:
        for name, value in process_env.items():
            if name not in values and name not in AMBIENT_ENV and name.startswith(RELEVANT_PREFIXES):
                values[name] = value
                sources[name] = "the running process only (not in the unit)"
    return values


def env_differences(s: Settings, declared: dict[str, str], redactor: Redactor, warnings: Warnings) -> list[str]:
    """Warn of each variable the unit sets that the running process has otherwise or not at all; return what a
    restart would change (none when the process read is not the main one: its wrapper changed them)."""
    process_env = s.process_env
    if process_env is None or (s.cmd is not None and s.cmd.wrapper == "docker"):
        return []
    pending: list[str] = []
    main_cmd = s.main_cmd
    launcher = launcher_text(main_cmd.launcher if main_cmd and main_cmd.launcher else s.argv[:1])
    for name, value in declared.items():
        if name in process_env and process_env[name] != value:
            shown = REDACTED if is_secret_name(name) else redactor.text(f"{process_env[name]} → {value}")
            why = (f"the main process ({launcher}) changed it" if s.env_from_child
                   else "the unit was edited but the service not restarted")
            warnings.add(f"{name} differs between the running process and the unit ({shown}): {why}")
            if not s.env_from_child:
                pending.append(f"{name} {shown}")
        elif name not in process_env:
            if s.env_from_child:
                warnings.add(f"{name} is set in the unit but the vLLM process (PID {s.pid}) does not "
                             f"have it: the wrapper the unit starts ({launcher}) did not pass it on")
            else:
                pending.append(f"{name} (unset) → " + (REDACTED if is_secret_name(name) else redactor.text(value)))
                warnings.add(f"{name} is set in the unit but not in the running process: restart to apply")
    return pending
