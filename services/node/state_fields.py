"""The fields of a ``ServiceState`` that both readings of a unit's answer (with settings and without) fill
alike: the unit's state, the API's facts and the warnings, redacted."""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from services.models import GpuInfo, LoadProgress, Phase, ReasonKind, State, UnitShow, WarningKind, Warnings
from services.node.api_facts import ApiFacts
from services.node.classify import since, unit_missing
from services.node.probe import UnitRaw
from services.redact import Redactor


class StateFields(TypedDict):
    """What both readings of a unit's answer say alike."""

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


def state_fields(service_name: str, node_name: str, raw: UnitRaw, show: UnitShow, state: tuple[State, str | None],
                 redactor: Redactor, progress: LoadProgress, api: ApiFacts, version: str | None,
                 gpus: list[GpuInfo], warnings: Warnings) -> StateFields:
    """The fields that the unit's ``state`` (and its reason), the API and the warnings give, redacted."""
    now_state, reason = state
    return StateFields(
        service=service_name,
        node=node_name,
        unit=raw.unit,
        state=now_state,
        reason=redactor.text(reason) if reason else None,
        since=since(show, now_state),
        active=f"{show.active_state} ({show.sub_state})" if show.active_state else "",
        main_pid=show.main_pid,
        restarts=show.n_restarts,
        version=version,
        gpus=gpus,
        warnings=[redactor.text(w) for w in warnings.texts()],
        # A tool finds a warning's kind by the warning as shown (ServiceState.warning_kinds).
        warning_kinds={redactor.text(w.text): w.kind for w in warnings.items if w.kind is not None},
        reason_kind="unit-not-found" if unit_missing(show, raw) else None,
        api_model=redactor.text(api.root) if api.root else None,
        api_max_model_len=api.max_model_len,
        api_url=raw.url,
        invocation_id=show.invocation_id,
        phase=progress.phase if now_state in ("loading", "starting", "ready") else None,
    )
