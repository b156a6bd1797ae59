"""The reading of an answer without settings (the watcher's probe): the unit's state only, redacted as the
whole reading would redact it."""

from __future__ import annotations

import functools

from services.models import LoadProgress, ServiceState, UnitShow, Warnings
from services.node import parse_cache
from services.node.activity import add_activity
from services.node.api_facts import api_facts, version
from services.node.classify import classify
from services.node.environment import docker_env, unit_env
from services.node.gpu_owners import visible_gpus
from services.node.node_facts import NodeFacts
from services.node.probe import UnitRaw
from services.node.state_fields import state_fields
from services.parse import vllm_args, vllm_log
from services.redact import Redactor, collect_secret_values, is_secret_name


def is_state_only(raw: UnitRaw) -> bool:
    """True when the answer holds none of what settings are made of (the unit file, the files it reads, the
    processes' argv and environment, vLLM's logged arguments): what a probe without ``settings`` returns."""
    return (raw.cat == "" and raw.cat_rc == 0 and raw.cmdline is None and raw.environ is None
            and raw.child_environ is None and not raw.procs and raw.procs_src is None and raw.vargs is None
            and not raw.files)


def assemble_state(service_name: str, node_name: str, raw: UnitRaw, facts: NodeFacts, known: tuple[str, ...]
                   ) -> ServiceState:
    """:func:`services.node.assemble.assemble` of an answer without settings: the unit's state only, redacted
    with the secrets the whole reading would have found in the same answer (:func:`status_inputs`)."""
    shown = raw.show if raw.show_rc == 0 else None
    show = parse_cache.parse_show(shown, facts.raw.tz) if shown is not None else UnitShow(id=raw.unit)
    secrets, visible = status_inputs(raw.unit, shown, facts.raw.tz, known)
    redactor = Redactor(secrets)
    journal = raw.journal or ""
    progress = vllm_log.parse_load_progress(journal) if journal else LoadProgress()
    warnings = Warnings()
    if facts.gpu_error:
        warnings.add(facts.gpu_error, "gpu-query-failed")
    st = ServiceState(**state_fields(service_name, node_name, raw, show, classify(show, raw, progress, facts.now),
                                     redactor, progress, api_facts(raw), version(raw, journal),
                                     visible_gpus(facts.gpus, visible), warnings))
    add_activity(st, raw, journal, progress, show, facts, redactor)
    return st


@functools.lru_cache(maxsize=parse_cache.CACHE_ENTRIES)
def status_inputs(unit_name: str, show_text: str | None, tz: str, known: tuple[str, ...]
                  ) -> tuple[tuple[str, ...], str | None]:
    """For an answer without settings: every secret the whole reading would redact (the configured keys, the
    secret values of the command the unit declares and of its secret-named variables) and the unit's
    CUDA_VISIBLE_DEVICES. They depend on ``systemctl show`` alone, which changes only with the unit: worked
    out once per distinct text, as the whole reading works them out."""
    raw = UnitRaw(unit=unit_name, show=show_text or "", show_rc=0 if show_text is not None else 1)
    show = parse_cache.parse_show(show_text, tz) if show_text is not None else UnitShow(id=unit_name)
    scratch = Warnings()
    unit = parse_cache.parse_unit("", parse_cache.instance(unit_name), unit_name)
    env = unit_env(raw, unit, show, scratch)
    argv = show.exec_start_argv
    declared = parse_cache.command(raw, argv, scratch) if argv else None
    # The command the whole reading takes the settings from when the answer has no process to read: the
    # declared one.
    cmd = declared if declared is not None and (declared.wrapper != "unknown" or not show.main_pid) else None
    visible = dict(env)
    if cmd is not None and cmd.wrapper == "docker":
        visible.update(docker_env(raw, cmd, {}))
    secrets = list(known)
    if declared is not None:
        secrets += vllm_args.secret_values(declared)
        secrets += collect_secret_values(declared.flags)
    secrets += [v for k, v in env.items() if is_secret_name(k)]
    return tuple(secrets), visible.get("CUDA_VISIBLE_DEVICES")
