"""Turn what the probe printed about a unit into a ``ServiceState``: state, settings, env, warnings.

Secrets are redacted here, as the raw text is interpreted: nothing downstream ever sees them. The steps
each have a module of their own: the state (``classify``), where the settings are read from
(``settings_source``), the environment (``environment``), the cross-checks between sources
(``cross_checks``), what the unit is doing now (``activity``, ``throughput``), the GPUs (``gpu_owners``), and
the reading of an answer without settings (``state_only``).
"""

from __future__ import annotations

from typing import TypedDict

from services.models import FlagValue, LoadProgress, ServiceState, SettingsSource, UnitShow, Warnings
from services.node import cross_checks, parse_cache
from services.node.activity import add_activity
from services.node.api_facts import ApiFacts, api_facts, version
from services.node.classify import classify
from services.node.environment import env_differences, env_values, unit_env
from services.node.gpu_owners import attach_gpu_owners, visible_gpus
from services.node.logged_command import nested_secrets
from services.node.node_facts import NodeFacts
from services.node.probe import UnitRaw
from services.node.redacted_view import redact_argv, redact_flags, shown_flags
from services.node.settings_source import Settings, read_settings
from services.node.state_fields import state_fields
from services.node.state_only import assemble_state, is_state_only
from services.parse import vllm_args, vllm_log
from services.redact import Redactor, is_secret_name, redact_value

__all__ = ["NodeFacts", "assemble", "attach_gpu_owners", "expected_model"]


def assemble(
    service_name: str, node_name: str, raw: UnitRaw, facts: NodeFacts, known_secrets: list[str] | None = None,
    settings: bool = True,
) -> ServiceState:
    """Interpret one unit's probe output.

    ``settings`` False: the probe did not ask what the settings are made of (``ProbeOptions.settings``: the
    watcher's probe, asked of every node every interval). Its answer is then read for the unit's state only
    (:func:`services.node.state_only.assemble_state`: the same state, reason, times, PIDs, API facts and
    throughput), not for a settings view that such an answer could only take from ``systemctl show`` and that
    no reader of it looks at: model, flags, env, command, pending changes and the warnings about them stay
    empty.
    """
    if not settings and is_state_only(raw):
        return assemble_state(service_name, node_name, raw, facts, tuple(known_secrets or ()))
    warnings = Warnings()
    show = parse_cache.show(raw, facts.raw.tz)
    unit = parse_cache.unit_file(raw)
    journal = raw.journal or ""
    progress = vllm_log.parse_load_progress(journal) if journal else LoadProgress()
    redactor = Redactor(known_secrets or [])
    env_sources: dict[str, str] = {}
    declared_env = unit_env(raw, unit, show, warnings, env_sources)
    api = api_facts(raw)
    s = read_settings(raw, show, parse_cache.declared_argv(raw, unit, show, declared_env), api, warnings)
    _cross_check(s, api, show.main_pid, redactor, warnings)
    _learn_secrets(s, declared_env, redactor)
    env = env_values(raw, s, declared_env, env_sources)
    pending = env_differences(s, declared_env, redactor, warnings)
    pending_known = _unit_checks(show, s, env, pending, redactor, warnings)
    state = classify(show, raw, progress, facts.now)
    gpus = visible_gpus(facts.gpus, env.get("CUDA_VISIBLE_DEVICES"))
    if facts.gpu_error:
        warnings.add(facts.gpu_error, "gpu-query-failed")
    st = ServiceState(
        **state_fields(service_name, node_name, raw, show, state, redactor, progress, api, version(raw, journal),
                       gpus, warnings),
        **_settings_fields(s, api, env, env_sources, redactor),
    )
    add_activity(st, raw, journal, progress, show, facts, redactor)
    st.pending_changes = [redactor.text(p) for p in pending] if pending_known else None
    return st


def _cross_check(s: Settings, api: ApiFacts, main_pid: int, redactor: Redactor, warnings: Warnings) -> None:
    """Warn where vLLM's start-up log or its API disagree with the command line read."""
    if s.log_cmd is not None and s.logged is not None:
        redactor.add(*vllm_args.secret_values(s.log_cmd), *nested_secrets(s.logged))
        if s.running is not None and s.source != "vllm-log":
            warnings.extend(cross_checks.against_log(s.running, s.log_cmd, s.pid or main_pid))
    if s.running is not None:
        warnings.extend(cross_checks.against_api(s.running, api))


def _learn_secrets(s: Settings, declared_env: dict[str, str], redactor: Redactor) -> None:
    """Every secret we can see is remembered, so it is also redacted where it appears in free text."""
    secret_vals: list[str] = []
    for c in (s.running, s.declared, s.log_cmd):
        if c is not None:
            secret_vals += vllm_args.secret_values(c)
            # Values under secret-named keys at any depth of JSON flags (and the --config file merged into
            # the flags), so a nested key's value is redacted wherever else it appears too.
            redactor.add_from(c.flags)
    for e in (declared_env, s.process_env or {}):
        secret_vals += [v for k, v in e.items() if is_secret_name(k)]
    redactor.add(*secret_vals)


def _unit_checks(show: UnitShow, s: Settings, env: dict[str, str], pending: list[str], redactor: Redactor,
                 warnings: Warnings) -> bool:
    """Warn of a unit that changed and was not reloaded or restarted, of removed flags and variables; put the
    flags a restart would change in front of ``pending``. True when what a restart applies is known."""
    if show.need_daemon_reload:
        warnings.add(
            "the unit file changed on disk but systemd was not reloaded (NeedDaemonReload=yes): run "
            "`systemctl daemon-reload`; a restart before that would still use the old unit"
        )
    known = False
    running, declared = s.running, s.declared
    if running is not None and declared is not None and declared.wrapper != "unknown" and s.source != "vllm-log":
        # What a restart would apply: running settings → the unit on disk (None when unknown).
        diffs = cross_checks.drift(running, declared, redactor)
        known = True
        pending[:0] = diffs
        if diffs:
            warnings.add(
                "the running server's flags differ from the unit file (edited but not restarted): "
                + "; ".join(diffs)
            )
    if s.cmd is not None:
        warnings.extend(vllm_args.removed_flag_warnings(s.cmd.flags))
        warnings.extend(redactor.text(n) for n in s.cmd.notes)
    warnings.extend(vllm_args.removed_env_warnings(env))
    return known


class SettingsFields(TypedDict):
    """The settings view of a ``ServiceState``."""

    model: str | None
    flags: dict[str, FlagValue]
    redacted_flags: list[str]
    env: dict[str, str]
    env_sources: dict[str, str]
    settings_source: SettingsSource
    settings_pid: int | None
    settings_note: str | None
    settings_tried: list[str]
    wrapper: str | None
    command: list[str]


def _settings_fields(s: Settings, api: ApiFacts, env: dict[str, str], env_sources: dict[str, str],
                     redactor: Redactor) -> SettingsFields:
    """The settings view, redacted: model, flags, env (and where each variable is set), where they were read,
    the command line."""
    cmd = s.cmd
    flags, redacted = shown_flags(cmd.flags, redact_flags(cmd.flags, redactor)) if cmd else ({}, [])
    model = cmd.model if cmd and cmd.model else api.root
    return SettingsFields(
        model=redactor.text(model) if model else None,
        flags=flags,
        redacted_flags=redacted,
        env={k: redactor.text(redact_value(k, v)) for k, v in env.items()},
        env_sources={k: env_sources[k] for k in env if k in env_sources},
        settings_source=s.source,
        settings_pid=s.pid if s.source in ("process", "cgroup-process") else None,
        settings_note=redactor.text(s.note) if s.note else None,
        settings_tried=[redactor.text(t) for t in s.tried],
        wrapper=cmd.wrapper if cmd and s.source != "vllm-log" else None,
        command=[redactor.text(a) for a in redact_argv(s.argv or s.declared_argv)],
    )


def expected_model(st: ServiceState) -> str | None:
    """The name the server should list: the first ``--served-model-name``, else the model."""
    names = st.flags.get("served-model-name")
    if isinstance(names, list) and names:
        return names[0]
    if isinstance(names, str):
        return names
    return st.model
