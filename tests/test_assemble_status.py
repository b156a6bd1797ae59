"""An answer without settings (the watcher's probe) is read for the unit's state only, and that state is the
whole interpretation's: the same state, reason (redacted with the same secrets), times, PIDs, API facts,
throughput and warnings about them. Only the settings view (model, flags, env, command, the warnings about
them) is left out, which such an answer could only take from ``systemctl show``.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

import pytest

from services.models import HttpProbe, ServiceState
from services.node.assemble import NodeFacts, assemble
from services.node.probe import NodeRaw, UnitRaw, parse_output
from services.redact import REDACTED

SAMPLES = Path(__file__).parent / "samples" / "probe"
SETTINGS_VIEW = {"model", "flags", "redacted_flags", "env", "env_sources", "warnings", "warning_kinds",
                 "settings_source", "settings_pid", "settings_note", "settings_tried", "wrapper", "command",
                 "pending_changes"}
# Plain values (no token shape that redact_patterns would catch anyway): only the known secrets redact them.
SECRET_ENV = "statusOnlyEnvValue77a1b2"
SECRET_FLAG = "statusOnlyFlagValue99z8y7"
CONFIGURED = "statusOnlyConfigured55q4w3"


def _status_only(u: UnitRaw) -> UnitRaw:
    """What a probe without settings would have returned of the same unit at the same moment."""
    return UnitRaw(unit=u.unit, show_rc=u.show_rc, show=u.show, url=u.url, health=u.health, version=u.version,
                   metrics=u.metrics, models=u.models, models_keyed=u.models_keyed, journal=u.journal,
                   journal_src=u.journal_src, logs=u.logs, bench_dir=u.bench_dir, bench_files=u.bench_files)


def _set(show: str, **props: str) -> str:
    lines = show.splitlines()
    for key, value in props.items():
        lines = [x for x in lines if not x.startswith(f"{key}=")] + [f"{key}={value}"]
    return "\n".join(lines)


def _variants(node: NodeRaw, u: UnitRaw) -> list[tuple[str, NodeRaw, UnitRaw]]:
    """The recorded unit in the states the watcher must tell apart, secrets planted where a reason shows them."""
    assert node.now is not None
    recent = (node.now - timedelta(seconds=30)).strftime("%a %Y-%m-%d %H:%M:%S UTC")
    secret_show = _set(u.show, Environment=f"DB_PASSWORD={SECRET_ENV} NCCL_ALGO=Ring",
                       ExecStart="{ path=/opt/vllm/bin/vllm ; argv[]=/opt/vllm/bin/vllm serve /models/kimi "
                                 f"--api-key {SECRET_FLAG} --port 8000 ; ignore_errors=no ; start_time=[n/a] ; "
                                 "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")
    leaky = f"http://127.0.0.1:8000/{SECRET_ENV}/{SECRET_FLAG}/{CONFIGURED}"
    out = [
        ("as recorded", u),
        ("failed", u.model_copy(update={"show": _set(u.show, ActiveState="failed", SubState="failed",
                                                      Result="exit-code", ExecMainStatus="1")})),
        ("crash loop", u.model_copy(update={"show": _set(u.show, ActiveState="activating", SubState="auto-restart",
                                                          Result="exit-code", NRestarts="4")})),
        ("keeps restarting", u.model_copy(update={"show": _set(u.show, NRestarts="5", ActiveEnterTimestamp=recent,
                                                                ExecMainStartTimestamp=recent)})),
        ("stopped", u.model_copy(update={"show": _set(u.show, ActiveState="inactive", SubState="dead",
                                                       MainPID="0")})),
        ("not found", u.model_copy(update={"show": _set(u.show, LoadState="not-found", ActiveState="inactive",
                                                         SubState="dead")})),
        ("show failed", u.model_copy(update={"show_rc": 1, "show": "Failed to connect to bus: No such file"})),
        ("unhealthy", u.model_copy(update={"health": HttpProbe(url=f"{u.url}/health", status=503, curl_exit=0)})),
        ("no answer, secrets in the URL", u.model_copy(update={
            "show": secret_show, "url": leaky, "metrics": [],
            "health": HttpProbe(url=f"{leaky}/health", status=None, curl_exit=7)})),
        ("no URL", u.model_copy(update={"url": None, "health": None, "metrics": []})),
    ]
    return [(name, node, _status_only(x)) for name, x in out]


def _cases() -> list[tuple[str, NodeRaw, UnitRaw]]:
    cases = []
    for path in sorted(SAMPLES.glob("*.out")):
        node = parse_output(path.read_text())
        for u in node.units:
            cases += [(f"{path.stem}: {name}", n, x) for name, n, x in _variants(node, u)]
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "node", "unit"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("known", [[], [CONFIGURED]], ids=["no key", "a configured key"])
def test_the_state_without_settings_is_the_whole_interpretations(name: str, node: NodeRaw, unit: UnitRaw,
                                                                 known: list[str]) -> None:
    facts = NodeFacts(node)
    whole = assemble("kimi", "gpu-a", unit, facts, known)
    light = assemble("kimi", "gpu-a", unit, facts, known, settings=False)
    for field in ServiceState.model_fields:
        if field not in SETTINGS_VIEW:
            assert getattr(light, field) == getattr(whole, field), field
        elif field not in ("warnings", "warning_kinds"):
            assert getattr(light, field) == ServiceState.model_fields[field].get_default(call_default_factory=True)
    assert set(light.warnings) <= set(whole.warnings)  # those about the state (a hang, /v1/models, the GPUs)
    for reason in (light.reason or "", whole.reason or ""):
        assert SECRET_ENV not in reason and SECRET_FLAG not in reason and (CONFIGURED not in reason or not known)


def test_the_variants_cover_the_states_and_a_redacted_reason() -> None:
    facts = {id(n): NodeFacts(n) for _, n, _ in CASES}
    states = {assemble("kimi", "gpu-a", u, facts[id(n)], [CONFIGURED], settings=False).state for _, n, u in CASES}
    assert states >= {"ready", "failed", "stopped", "loading", "unhealthy"}
    leaky = next(u for name, _, u in CASES if "secrets in the URL" in name)
    reason = assemble("kimi", "gpu-a", leaky, facts[id(CASES[0][1])], [CONFIGURED], settings=False).reason
    assert reason is not None and reason.count(REDACTED) == 3, reason


def test_an_answer_with_settings_is_read_whole_whatever_was_asked() -> None:
    node = parse_output((SAMPLES / "settings-ready.out").read_text())
    facts = NodeFacts(node)
    for u in node.units:
        assert assemble("kimi", "gpu-a", u, facts, settings=False) == assemble("kimi", "gpu-a", u, facts)


def test_secrets_are_worked_out_once_per_unit_text() -> None:
    from services.node.state_only import status_inputs as _status_inputs

    node = parse_output((SAMPLES / "watch-ready.out").read_text())
    facts = NodeFacts(node)
    before = _status_inputs.cache_info()
    for _ in itertools.repeat(None, 5):
        assemble("kimi", "gpu-a", node.units[0].model_copy(), facts, [CONFIGURED], settings=False)
    after = _status_inputs.cache_info()
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 4
