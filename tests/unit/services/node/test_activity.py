"""services/node/activity.py: what the recorded Kimi unit is doing now, with recorded /metrics scrapes."""

from __future__ import annotations

from services.models import HttpProbe, LoadProgress, ServiceState
from services.node import parse_cache
from services.node.activity import add_activity
from services.node.node_facts import NodeFacts
from services.node.probe import MetricsScrape, UnitRaw
from services.redact import Redactor
from tests.unit.services.node.recorded import KIMI_UNIT, SAMPLES, node, unit

NODE = node("settings-ready")
READY = unit("settings-ready")


def scrape(name: str, at: float) -> MetricsScrape:
    return MetricsScrape(at=at, probe=HttpProbe(url="u", status=200, body=(SAMPLES / "metrics" / name).read_text()))


def activity(u: UnitRaw, state: str = "ready", progress: LoadProgress | None = None) -> ServiceState:
    st = ServiceState.model_validate({"service": "kimi", "node": "n", "unit": KIMI_UNIT, "state": state})
    add_activity(st, u, u.journal or "", progress or LoadProgress(), parse_cache.show(u, "+0000"), NodeFacts(NODE),
                 Redactor([]))
    return st


def test_requests_running_and_no_tokens_is_possibly_hung() -> None:
    still = activity(READY.model_copy(update={"metrics": [scrape("new_single_t0.prom", 0.0),
                                                          scrape("new_single_t0.prom", 2.0)]}))
    assert still.throughput is not None and still.throughput.generation_tps == 0 and still.throughput.running == 4
    assert still.metrics is not None and still.metrics.generation_tokens_total == 90000.0
    assert ("possibly hung: 4 request(s) running but no tokens generated during the sample window"
            in still.warnings)
    moving = activity(READY.model_copy(update={"metrics": [scrape("new_single_t0.prom", 0.0),
                                                           scrape("new_single_t1.prom", 2.0)]}))
    assert not any(w.startswith("possibly hung") for w in moving.warnings)
    loading = activity(READY.model_copy(update={"metrics": [scrape("new_single_t0.prom", 0.0),
                                                            scrape("new_single_t0.prom", 2.0)]}), state="loading")
    assert not any(w.startswith("possibly hung") for w in loading.warnings)  # /health not 200 says more


def test_the_recording_keyless_models_answer_is_not_a_warning_but_a_keyed_one_is() -> None:
    assert activity(READY).served_models is None and activity(READY).warnings == []  # asked without the key
    keyed = activity(READY.model_copy(update={"models_keyed": True}))
    assert keyed.models_error is not None and keyed.models_error.startswith("/v1/models refused the API key")
    assert keyed.warnings == [keyed.models_error]


def test_a_loads_progress_and_tqdms_estimate() -> None:
    progress = LoadProgress(phase="loading_weights", done=30, total=119, fraction=30 / 119, weights_remaining_s=420.0)
    st = activity(READY, state="loading", progress=progress)
    assert st.progress == {"done": 30, "total": 119, "fraction": 0.252}
    assert (st.eta_seconds, st.eta_basis) == (420.0, "shard_rate")
    assert activity(READY, state="ready", progress=progress).progress is None
