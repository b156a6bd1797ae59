"""services/node/state_fields.py and the typed warnings (services/models.py ``Warnings``): a warning keeps its
kind through redaction, and tools find it by the text they are shown."""

from __future__ import annotations

from services.models import LoadProgress, ServiceState, Warnings
from services.node import parse_cache
from services.node.api_facts import api_facts
from services.node.classify import classify
from services.node.probe import UnitRaw
from services.node.state_fields import state_fields
from services.redact import REDACTED, Redactor
from tests.unit.services.node.recorded import KIMI_KEY, KIMI_MAIN_PID, KIMI_UNIT, node, unit, with_show

READY = unit("settings-ready")


def fields(u: UnitRaw, warnings: Warnings, secrets: list[str] | None = None) -> ServiceState:
    show = parse_cache.show(u, "+0000")
    state = classify(show, u, LoadProgress(phase="ready"), node("settings-ready").now)
    return ServiceState(**state_fields("kimi", "gpu-a", u, show, state, Redactor(secrets or []),
                                       LoadProgress(phase="ready"), api_facts(u), "0.20.1", [], warnings))


def test_the_recorded_unit() -> None:
    st = fields(READY, Warnings())
    assert (st.unit, st.state, st.reason, st.main_pid, st.restarts) == (KIMI_UNIT, "ready", None, KIMI_MAIN_PID, 0)
    assert st.active == "active (running)" and st.invocation_id == "90b78dcbb72d18161e8eeb3c5c654622"
    assert st.phase == "ready" and st.api_url == "http://127.0.0.1:34767" and st.reason_kind is None


def test_warnings_keep_their_kind_and_order_once_each() -> None:
    w = Warnings()
    w.add(f"could not read /etc/vllm/kimi.env holding {KIMI_KEY}", "envfile-unreadable")
    w.add("the unit file changed on disk")
    w.extend(["the unit file changed on disk", "nvidia-smi not found on the node"])
    w.add("nvidia-smi not found on the node", "gpu-query-failed")
    st = fields(READY, w, [KIMI_KEY])
    shown = f"could not read /etc/vllm/kimi.env holding {REDACTED}"
    assert st.warnings == [shown, "the unit file changed on disk", "nvidia-smi not found on the node"]
    assert st.warning_kinds == {shown: "envfile-unreadable", "nvidia-smi not found on the node": "gpu-query-failed"}
    assert "warning_kinds" not in st.model_dump(mode="json")  # for tools, not in the JSON answer


def test_a_missing_unit_is_a_reason_of_its_kind() -> None:
    st = fields(with_show(READY, LoadState="not-found", ActiveState="inactive", SubState="dead"), Warnings())
    assert (st.state, st.reason_kind) == ("failed", "unit-not-found")
