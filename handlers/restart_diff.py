"""What a restart will change, shown before anyone confirms: settings, daemon-reload, leftovers.

The probe reads both what runs (the process's argv and environment) and what the unit on disk will start
(``systemctl cat``); :mod:`services.node.assemble` puts the differences in ``ServiceState.pending_changes``.
Leftover vLLM processes outside the unit hold GPU memory the new start needs: they are listed too, and
named again in the ❌ of a load that ran out of memory.
"""

from __future__ import annotations

from config.models import AccessPolicy, Service
from handlers.reply import Section
from services import leftovers
from services.models import ServiceState
from services.node.restart import build_reload_command

NO_CHANGES = "no setting changes"


def applies_text(st: ServiceState | None) -> str:
    """``--max-model-len 131072 → 65536; NCCL_PROTO LL → Simple``, "no setting changes", or why unknown."""
    if st is not None and st.pending_changes is None and not st.main_pid:
        return "nothing runs now — it starts what the unit on disk says"
    if st is None or st.pending_changes is None:
        return "unknown — the running settings or the unit file could not be read"
    if not st.pending_changes:
        return NO_CHANGES
    return "; ".join(st.pending_changes)


def plan(st: ServiceState | None, policy: AccessPolicy) -> tuple[list[tuple[str, str]], dict[str, object]]:
    """Confirmation fields (what the restart applies; the reload it runs first) and the same facts as data."""
    fields = [("this restart applies", applies_text(st))]
    data: dict[str, object] = {"applies": st.pending_changes if st is not None else None,
                               "applies_text": applies_text(st)}
    reload_first = bool(st is not None and st.need_daemon_reload)
    data["reload_first"] = reload_first
    if reload_first:
        command = build_reload_command(policy)
        fields.append(("unit on disk", f"changed without daemon-reload — the restart runs `{command}` first, "
                                       "so it starts what is on disk"))
        data["reload_command"] = command
    return fields, data


def leftover_section(st: ServiceState | None, service: Service) -> tuple[list[Section], list[dict[str, object]]]:
    """A warning section listing vLLM processes outside the unit that hold GPU memory (none: nothing)."""
    found = leftovers.vllm_leftovers(st) if st is not None else []
    rows: list[dict[str, object]] = [{"pid": p.pid, "gpu": p.gpu_index, "mib": p.memory_mib, "name": p.name}
                                     for p in found]
    if not found:
        return [], rows
    text = (f"⚠️ GPU memory is held by vLLM processes outside {service.unit}: {leftovers.describe(found)} "
            f"({leftovers.total_mib(found):,} MiB in all). The new start may run out of memory — stop them "
            f"first (`gpus on {service.node}`; on the node `pgrep -af 'VLLM::'`).")
    return [Section(kind="text", title="Leftover GPU processes", text=text)], rows


def oom_leftover_sections(reason: str, st: ServiceState | None) -> list[Section]:
    """For a load that ran out of memory: the leftover vLLM processes that held the GPUs (none: nothing)."""
    if st is None:
        return []
    text = reason + "\n" + "\n".join(st.logs or [])
    if not leftovers.looks_like_oom(text):
        return []
    found = leftovers.vllm_leftovers(st)
    if not found:
        return []
    return [Section(kind="text", title="Leftover GPU processes",
                    text=f"Out of memory while vLLM processes outside {st.unit} held GPU memory: "
                         f"{leftovers.describe(found)} ({leftovers.total_mib(found):,} MiB in all). Stop them, "
                         f"then restart.")]
