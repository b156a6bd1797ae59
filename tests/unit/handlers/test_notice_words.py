"""handlers/notice_words.py: the words of the load notices, a contract people's scripts and Slack searches match.

Each expected text is written out whole, as the issues that introduced it say it (``✅ kimi on gpu-a is ready —
loaded in 29m 14s (last time 30m 02s)``); a rewording fails here before it reaches anyone's channel.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from handlers.notice_words import (
    failed_notice,
    hhmm,
    progress_reply,
    progress_text,
    ready_notice,
    unplanned_notice,
)
from services.models import GpuProcess, ServiceState
from services.store.records import Follow

T0 = datetime(2026, 2, 21, 13, 26, 40, tzinfo=UTC)
FOLLOW = Follow(key="kimi@gpu-a", service="kimi", node="gpu-a", unit="vllm-kimi.service", invocation_id="inv-1",
                started_at=T0, reason="restart", updated_at=T0)


def st(**kw: Any) -> ServiceState:
    base: dict[str, Any] = {"service": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service", "state": "loading"}
    return ServiceState(**{**base, **kw})


def test_ready() -> None:
    reply = ready_notice(FOLLOW, 1754.4, 1802.0)
    assert reply.data["notice"] == "✅ kimi on gpu-a is ready — loaded in 29m 14s (last time 30m 02s)"
    assert (reply.title, reply.status) == ("kimi on gpu-a is ready — loaded in 29m 14s (last time 30m 02s)", "ok")
    assert {k: reply.data[k] for k in ("kind", "service", "node", "duration_s", "previous_s")} == {
        "kind": "ready", "service": "kimi", "node": "gpu-a", "duration_s": 1754.4, "previous_s": 1802.0}
    assert ready_notice(FOLLOW, 95, None).data["notice"] == "✅ kimi on gpu-a is ready — loaded in 1m 35s"


def test_failed_with_the_journal_and_what_to_try() -> None:
    logs = [f"line {i}" for i in range(30)]
    reply = failed_notice(FOLLOW, "the unit failed (exit-code)", st(state="failed", logs=logs))
    assert reply.data["notice"] == "❌ kimi on gpu-a failed — the unit failed (exit-code)"
    assert (reply.data["kind"], reply.data["reason"], reply.status) == ("failed", "the unit failed (exit-code)",
                                                                        "error")
    journal, tries = reply.sections
    assert journal.title == "Last journal lines" and journal.text == "\n".join(logs[-20:])
    assert tries.text == ("`logs kimi` for the whole story; `gpus on gpu-a` — leftover processes may hold memory; "
                          "`status kimi`; fix the cause, then `restart kimi`")


def test_a_timeout_may_still_be_loading() -> None:
    reply = failed_notice(FOLLOW, "not ready after 1h 00m", None, timed_out=True)
    assert reply.data["kind"] == "timeout"
    assert reply.data["notice"] == "❌ kimi on gpu-a failed — not ready after 1h 00m"
    [tries] = reply.sections
    assert tries.text is not None and tries.text.startswith(
        "it may still be loading: compare with earlier loads (`history kimi`); `logs kimi`")
    assert "then `restart kimi`" not in tries.text


def test_out_of_memory_names_the_leftovers_that_held_the_gpus() -> None:
    leftover = GpuProcess(pid=4242, name="VLLM::EngineCore", memory_mib=70000)
    state = st(state="failed", logs=["torch.OutOfMemoryError: CUDA out of memory."], leftovers=[leftover])
    reply = failed_notice(FOLLOW, "CUDA out of memory", state)
    titles = [s.title for s in reply.sections]
    assert titles == ["Last journal lines", "Leftover GPU processes", "What to try"]
    assert "4242" in (reply.sections[1].text or "") and "70,000 MiB" in (reply.sections[1].text or "")


def test_unplanned() -> None:
    reply = unplanned_notice(FOLLOW)
    assert reply.data["notice"] == "⚠️ kimi on gpu-a restarted (not by inferbot) at 13:26 UTC"
    assert (reply.data["kind"], reply.status) == ("unplanned", "warn")
    assert reply.sections[0].text == "I'll follow the load and say here when it is done."
    assert hhmm(T0.astimezone(UTC) + timedelta(hours=1)) == "14:26 UTC"


def test_the_progress_line() -> None:
    now = T0 + timedelta(minutes=13, seconds=5)
    loading = st(phase="loading_weights", progress={"fraction": 0.45, "done": 54, "total": 119}, eta_seconds=17 * 60)
    assert progress_text(FOLLOW, loading, now) == (
        "kimi on gpu-a: loading weights [█████████░░░░░░░░░░░] 45 % 54/119 shards — elapsed 13m 05s, "
        "~17 min remaining")
    assert progress_text(FOLLOW, None, now) == "kimi on gpu-a: waiting — elapsed 13m 05s"
    down = st(state="unreachable", reason="connection refused on 10.0.0.5:22")
    assert progress_text(FOLLOW, down, now) == (
        "kimi on gpu-a: node unreachable (connection refused on 10.0.0.5:22) — elapsed 13m 05s")
    busy = st(state="unreachable", reason="inferbot is busy", reason_kind="busy")
    assert progress_text(FOLLOW, busy, now) == "kimi on gpu-a: not asked (inferbot is busy) — elapsed 13m 05s"
    assert progress_text(FOLLOW, st(state="starting"), now) == "kimi on gpu-a: starting — elapsed 13m 05s"
    reply = progress_reply(FOLLOW, "kimi on gpu-a: loading weights")
    assert (reply.status, reply.data["kind"], reply.data["notice"]) == ("loading", "progress",
                                                                         "kimi on gpu-a: loading weights")
