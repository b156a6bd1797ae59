"""Where a running service's settings are read from: its main process, another process of its unit (the main
one is a wrapper), vLLM's start-up log, its API, or the unit file — and what each place gave."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.models import SettingsSource, UnitShow, VllmCommand, Warnings
from services.node import parse_cache
from services.node.api_facts import ApiFacts
from services.node.logged_command import log_command
from services.node.probe import ProcRow, UnitRaw, environ_dict, split_nul
from services.node.redacted_view import launcher_text, short
from services.parse import vllm_args


@dataclass
class Settings:
    """What was read of a service's settings, and from where."""

    declared: VllmCommand | None  # the command the unit declares
    declared_argv: list[str]
    main_cmd: VllmCommand | None = None  # the main process's command line, read with vLLM's grammar
    running: VllmCommand | None = None  # what the server runs with, where a process or its log said it
    cmd: VllmCommand | None = None  # what the settings are shown from: the running command, else the declared
    argv: list[str] = field(default_factory=list)  # the command line shown
    source: SettingsSource = "none"
    pid: int | None = None  # the process the settings were read from
    note: str | None = None  # why that source, in one line
    tried: list[str] = field(default_factory=list)  # every place looked at, when no command line was readable
    process_env: dict[str, str] | None = None  # the environment of the process read (None: not readable)
    env_from_child: bool = False  # ... of a process the main one started, not of the main one
    logged: dict[str, object] | None = None  # vLLM's ``non-default args``
    log_cmd: VllmCommand | None = None  # the same, as a command


def read_settings(raw: UnitRaw, show: UnitShow, declared_argv: list[str], api: ApiFacts,
                  warnings: Warnings) -> Settings:
    """The settings of the unit's server from the best place that could be read (see the module)."""
    declared = parse_cache.command(raw, declared_argv, warnings) if declared_argv else None
    s = Settings(declared=declared, declared_argv=declared_argv)
    _read_processes(raw, show.main_pid, s, warnings)
    s.logged = parse_cache.logged_args(raw.vargs) if raw.vargs else None
    s.log_cmd = log_command(s.logged) if s.logged else None
    _fall_back(raw, show.main_pid, api, s, warnings)
    return s


def _read_processes(raw: UnitRaw, main_pid: int, s: Settings, warnings: Warnings) -> None:
    """The main process's command line and environment, and the vLLM server among the unit's processes."""
    if raw.cmdline is not None and raw.cmdline.data is not None:
        s.argv = split_nul(raw.cmdline.data)
        s.main_cmd = parse_cache.command(raw, s.argv, warnings)
    if raw.environ is not None:
        if raw.environ.data is not None:
            s.process_env = environ_dict(raw.environ.data)
        else:
            warnings.add(
                f"no permission to read /proc/{main_pid}/environ (sudo -n refused) — the environment is "
                "shown as the unit file declares it; see the README for the sudoers line that allows it",
                "environ-denied",
            )
    pick = pick_server(raw, main_pid, s.main_cmd, warnings)
    if pick is None:
        return
    s.running, s.pid, s.note = pick.cmd, pick.pid, pick.note
    s.source = "process" if pick.pid == main_pid else "cgroup-process"
    if pick.pid == main_pid:
        return
    s.argv = pick.argv
    env_file = raw.child_environ
    if env_file is not None and env_file.path == f"/proc/{pick.pid}/environ":
        if env_file.data is not None:
            s.process_env = environ_dict(env_file.data)
            s.env_from_child = True
        else:
            warnings.add(f"could not read /proc/{pick.pid}/environ (the vLLM process): the environment "
                         "is shown from the main process and the unit")


def _fall_back(raw: UnitRaw, main_pid: int, api: ApiFacts, s: Settings, warnings: Warnings) -> None:
    """No process had a readable vLLM command line: vLLM's start-up log, the unit file, or only the API."""
    if s.running is None and s.log_cmd is not None and main_pid:
        s.running, s.source = s.log_cmd, "vllm-log"
    s.cmd = s.running
    if s.running is None:
        if s.declared is not None and s.declared.wrapper != "unknown":
            s.cmd, s.source = s.declared, "unit"
        elif main_pid:
            s.source = "api" if api.answered else "none"
        elif s.declared is not None:
            s.cmd, s.source = s.declared, "unit"
    if s.source == "unit" and raw.cmdline is not None and raw.cmdline.data is None:
        warnings.add(f"could not read /proc/{main_pid}/cmdline — settings are from the unit file")
    if s.source in ("vllm-log", "api") or (s.source == "none" and main_pid):
        s.tried = what_was_tried(raw, main_pid, api)
        s.note = fallback_note(s.source)


@dataclass
class Pick:
    """The process the settings are read from, its parsed command line and why it was chosen."""

    pid: int
    argv: list[str]
    cmd: VllmCommand
    note: str | None


_ENTRY_RANK = {"vllm": 2, "module": 2, "serve-subcommand": 1}


def _depth(pid: int, main_pid: int, parents: dict[int, int]) -> int:
    d, seen = 0, set()
    while pid != main_pid and pid in parents and pid not in seen:
        seen.add(pid)
        pid, d = parents[pid], d + 1
    return d


def pick_server(raw: UnitRaw, main_pid: int, main_cmd: VllmCommand | None, warnings: Warnings) -> Pick | None:
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
        return Pick(main_pid, main_argv, main_cmd, None)
    best = _best_other(raw, main_pid)
    if best is not None:
        p, c, scratch = best
        warnings.take(scratch)
        where = ("a child of the main process" if raw.procs_src == "ppid"
                 else "a process in the unit's cgroup")
        if main_cmd is None or main_cmd.wrapper == "unknown":
            why = "does not run vLLM itself"
        elif main_cmd.wrapper == "bash":
            why = "is a shell that starts it without exec"
        else:
            why = f"is a wrapper ({launcher_text(main_cmd.launcher)})"
        return Pick(p.pid, p.argv or [], c, f"settings from PID {p.pid} ({short(p.argv or [])}), {where}: "
                    f"the main process (PID {main_pid}, {short(main_argv, 50)}) {why}")
    if main_cmd is not None and main_cmd.wrapper != "unknown":
        note: str | None = None
        if main_cmd.launcher:
            note = (f"settings from the main process (PID {main_pid}), read after its wrapper "
                    f"({launcher_text(main_cmd.launcher)})")
        return Pick(main_pid, main_argv, main_cmd, note)
    return None


def _best_other(raw: UnitRaw, main_pid: int) -> tuple[ProcRow, VllmCommand, Warnings] | None:
    """The best vLLM server command line among the unit's other processes (see :func:`pick_server`), with the
    warnings reading it gave."""
    parents = {p.pid: p.ppid for p in raw.procs}
    best: tuple[tuple[int, int, int, int], ProcRow, VllmCommand, Warnings] | None = None
    for p in raw.procs:
        if p.pid == main_pid or not p.argv or p.argv[0].startswith("VLLM::") or p.comm.startswith("VLLM::"):
            continue
        scratch = Warnings()
        c = parse_cache.command(raw, p.argv, scratch)
        if c.wrapper == "unknown":
            continue
        rank = (0 if c.launcher else 1, _ENTRY_RANK.get(c.entry or "", 0), -_depth(p.pid, main_pid, parents), -p.pid)
        if best is None or rank > best[0]:
            best = (rank, p, c, scratch)
    return best[1:] if best is not None else None


def what_was_tried(raw: UnitRaw, main_pid: int, api: ApiFacts) -> list[str]:
    """Each place a command line or setting was looked for, and what it gave."""
    out = [_main_process_tried(raw, main_pid), _other_processes_tried(raw, main_pid)]
    if raw.vargs:
        out.append("vLLM's start-up line `non-default args`: read")
    elif raw.journal_src is None:
        out.append("the journal: not read")
    elif not raw.journal:
        out.append(f"the journal ({raw.journal_src}): empty or not readable "
                   "(not in the systemd-journal group, sudo -n refused)")
    else:
        out.append(f"the journal ({raw.journal_src}): no `non-default args` line in this start")
    return out + _api_tried(raw, api)


def _main_process_tried(raw: UnitRaw, main_pid: int) -> str:
    if raw.cmdline is None:
        return f"/proc/{main_pid}/cmdline (main process): not read"
    if raw.cmdline.data is None:
        return f"/proc/{main_pid}/cmdline (main process): not readable, and sudo -n refused"
    argv = split_nul(raw.cmdline.data)
    return f"/proc/{main_pid}/cmdline (main process): `{short(argv, 70)}` is no vLLM server command line"


def _other_processes_tried(raw: UnitRaw, main_pid: int) -> str:
    others = [p for p in raw.procs if p.pid != main_pid]
    if raw.procs_src is None:
        return "the unit's other processes: not listed"
    where = ("under the main process (no cgroup.procs file was readable)" if raw.procs_src == "ppid"
             else f"in {raw.procs_src}")
    names = ", ".join(f"{p.pid} ({p.comm})" for p in others[:8]) + (" …" if len(others) > 8 else "")
    return (f"{len(others)} other process(es) {where}" + (f": {names}" if others else "")
            + ": none is a vLLM API server command line")


def _api_tried(raw: UnitRaw, api: ApiFacts) -> list[str]:
    if raw.url is None:
        return ["vLLM's API: no URL known"]
    v = raw.version
    out = [f"{raw.url}/version: " + (v.body.strip()[:60] if v is not None and v.status == 200
                                      else "no answer" if v is None else f"{v.error or v.status}")]
    if api.models_status == 200:
        out.append(f"{raw.url}/v1/models: {api.root}, max_model_len {api.max_model_len}")
    elif api.models_status == 401:
        out.append(f"{raw.url}/v1/models: 401 (it needs an API key the bot does not hold: set api_key_env)")
    elif raw.models is not None:
        out.append(f"{raw.url}/v1/models: {raw.models.error or raw.models.status}")
    else:
        out.append(f"{raw.url}/v1/models: not asked (/health did not answer)")
    return out


def fallback_note(source: SettingsSource) -> str:
    """Why the settings come from where they come from, when no command line could be read."""
    if source == "vllm-log":
        return ("settings from vLLM's own start-up log line `non-default args` (values as vLLM resolved them, "
                "not as passed): no process of the unit has a readable vLLM command line")
    if source == "api":
        return ("only vLLM's API could be read: the model and max_model_len are from /v1/models; no command "
                "line or start-up log was readable")
    return "no settings could be read from the running service"
