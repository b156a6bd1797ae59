"""services/node/classify.py: the state systemd's properties and /health give, on the recorded Kimi unit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.models import HttpProbe, LoadProgress, State, UnitShow
from services.node import parse_cache
from services.node.classify import classify, since, unit_missing
from services.node.probe import UnitRaw
from tests.unit.services.node.recorded import KIMI_UNIT, node, unit, with_show

READY = node("settings-ready")
assert READY.now is not None
NOW = READY.now


def state_of(u: UnitRaw, progress: LoadProgress | None = None) -> tuple[State, str | None]:
    return classify(parse_cache.show(u, READY.tz), u, progress or LoadProgress(), NOW)


def test_the_recorded_ready_server_is_ready() -> None:
    assert state_of(unit("settings-ready")) == ("ready", None)  # active (running), /health answered 200


@pytest.mark.parametrize(("props", "state", "words"), [
    ({"ActiveState": "failed", "SubState": "failed", "Result": "exit-code", "ExecMainStatus": "1"},
     "failed", "Result=exit-code, exit status 1"),
    ({"ActiveState": "failed", "SubState": "failed", "Result": "start-limit-hit"},
     "failed", "systemctl reset-failed"),
    ({"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code", "NRestarts": "4"},
     "failed", "crash loop: restarting after Result=exit-code (restarts: 4)"),
    ({"ActiveState": "activating", "SubState": "start-pre"}, "starting", "ExecStartPre still running"),
    ({"ActiveState": "inactive", "SubState": "dead", "MainPID": "0"}, "stopped", "inactive (dead)"),
    ({"ActiveState": "deactivating", "SubState": "stop-sigterm"}, "stopped", "deactivating (stop-sigterm)"),
    ({"ActiveState": "maintenance", "SubState": "x"}, "failed", "maintenance (x)"),
    ({"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead"},
     "failed", f"unit {KIMI_UNIT} not found on the node"),
])
def test_what_systemd_says(props: dict[str, str], state: State, words: str) -> None:
    got, reason = state_of(with_show(unit("settings-ready"), **props))
    assert got == state and reason is not None and words in reason


def test_restarting_too_often_counts_only_a_recent_start() -> None:
    def started(ago: timedelta) -> str:
        return (NOW - ago).strftime("%a %Y-%m-%d %H:%M:%S UTC")

    recent = with_show(unit("settings-ready"), NRestarts="5", ActiveEnterTimestamp=started(timedelta(seconds=30)))
    assert state_of(recent) == ("failed", "keeps restarting: 5 restarts, current start 30s ago")
    settled = with_show(unit("settings-ready"), NRestarts="5", ActiveEnterTimestamp=started(timedelta(minutes=10)),
                        ExecMainStartTimestamp=started(timedelta(minutes=10)))
    assert state_of(settled) == ("ready", None)  # it restarted often, but has run for ten minutes since
    few = with_show(unit("settings-ready"), NRestarts="2", ActiveEnterTimestamp=started(timedelta(seconds=30)))
    assert state_of(few) == ("ready", None)


def test_health_decides_between_ready_loading_and_unhealthy() -> None:
    u = unit("settings-ready")
    url = u.url
    assert state_of(u.model_copy(update={"health": HttpProbe(url=f"{url}/health", status=503)})) == (
        "unhealthy", f"/health answered 503 on {url}")
    refused = u.model_copy(update={"health": HttpProbe(url=f"{url}/health", curl_exit=7)})
    assert state_of(refused) == ("loading", f"connection refused on {url}")
    assert state_of(refused, LoadProgress(phase="ready")) == (
        "unhealthy", f"connection refused on {url} (it was ready earlier in this start)")
    assert state_of(u.model_copy(update={"health": None})) == ("loading", "no API URL known for this service")
    assert state_of(u, LoadProgress(failed="CUDA out of memory")) == ("failed", "the load failed: CUDA out of memory")


def test_a_failed_systemctl_show_is_said_with_its_first_line() -> None:
    u = unit("settings-ready").model_copy(update={"show_rc": 1, "show": "Failed to connect to bus: No such file\n"})
    assert state_of(u) == ("failed", "systemctl show failed: Failed to connect to bus: No such file")


def test_since_and_missing_units() -> None:
    show = parse_cache.show(unit("settings-ready"), READY.tz)
    assert show.active_enter is not None and since(show, "ready") == show.active_enter
    assert since(show, "stopped") == show.state_change  # InactiveEnterTimestamp= is empty in the recording
    assert not unit_missing(show, unit("settings-ready"))
    assert unit_missing(UnitShow(id="x.service"), UnitRaw(unit="x.service"))  # systemctl show said nothing
