"""The words of the load notices: ✅ ready, ❌ failed, ⚠️ unplanned restart, and the progress line.

The notice texts are a contract (people's scripts and Slack searches match them): extend, never reword.
"""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.common import PHASE_WORDS, fmt_duration, not_reached, remaining
from handlers.reply import Reply, Section, Status
from handlers.restart_diff import oom_leftover_sections
from handlers.status import progress_bar
from services.models import ServiceState
from services.store.records import Follow

AUTO_RESTART = "activating (auto-restart)"
"""systemd's state of a unit whose main process exited and that it starts again after ``RestartSec=``."""


def hhmm(at: datetime) -> str:
    """``13:22 UTC``."""
    return f"{at.astimezone(UTC):%H:%M} UTC"


def ready_notice(f: Follow, duration_s: float, previous_s: float | None) -> Reply:
    """``✅ kimi on gpu-a is ready — loaded in 29m 14s (last time 30m 02s)``."""
    body = f"{f.service} on {f.node} is ready — loaded in {fmt_duration(duration_s)}"
    if previous_s is not None:
        body += f" (last time {fmt_duration(previous_s)})"
    return Reply(intent="notice", title=body, status="ok",
                 data={"notice": f"✅ {body}", "kind": "ready", "service": f.service, "node": f.node,
                       "duration_s": round(duration_s, 1), "previous_s": previous_s})


def failed_notice(f: Follow, reason: str, st: ServiceState | None, timed_out: bool = False) -> Reply:
    """``❌ kimi on gpu-a failed — <reason>``, with the last journal lines and what to try."""
    body = f"{f.service} on {f.node} failed — {reason}"
    sections = []
    if st is not None and st.logs:
        sections.append(Section(kind="code", title="Last journal lines", text="\n".join(st.logs[-20:])))
    sections += oom_leftover_sections(reason, st)
    tries = [f"`logs {f.service}` for the whole story", f"`gpus on {f.node}` — leftover processes may hold memory",
             f"`status {f.service}`"]
    if timed_out:
        tries.insert(0, "it may still be loading: compare with earlier loads (`history " + f.service + "`)")
    else:
        tries.append(f"fix the cause, then `restart {f.service}`")
    sections.append(Section(kind="text", title="What to try", text="; ".join(tries)))
    return Reply(intent="notice", title=body, status="error", sections=sections,
                 data={"notice": f"❌ {body}", "kind": "timeout" if timed_out else "failed",
                       "service": f.service, "node": f.node, "reason": reason})


def unplanned_notice(f: Follow) -> Reply:
    """``⚠️ kimi on gpu-a restarted (not by inferbot) at 13:26``."""
    body = f"{f.service} on {f.node} restarted (not by inferbot) at {hhmm(f.started_at)}"
    return Reply(intent="notice", title=body, status="warn",
                 sections=[Section(kind="context", text="I'll follow the load and say here when it is done.")],
                 data={"notice": f"⚠️ {body}", "kind": "unplanned", "service": f.service, "node": f.node})


def progress_text(f: Follow, st: ServiceState | None, now: datetime) -> str:
    """One line: phase, shard bar, elapsed, ETA."""
    elapsed = fmt_duration((now - f.started_at).total_seconds())
    if st is None:
        return f"{f.service} on {f.node}: waiting — elapsed {elapsed}"
    parts = [f"{f.service} on {f.node}: "]
    if st.state == "unreachable" and st.reason_kind == "busy":
        parts.append(f"not asked ({not_reached(st)})")
    elif st.state == "unreachable":
        parts.append(f"node unreachable ({st.reason})")
    elif st.active == AUTO_RESTART:
        parts.append("its main process exited; systemd starts it again")
    elif st.phase:
        parts.append(PHASE_WORDS.get(st.phase, st.phase))
    else:
        parts.append(st.state)
    if st.progress:
        parts.append(f" {progress_bar(float(st.progress['fraction']))} "
                     f"{int(st.progress['done'])}/{int(st.progress['total'])} shards")
    parts.append(f" — elapsed {elapsed}")
    if st.eta_seconds is not None:
        parts.append(f", {remaining(st.eta_seconds)}")
    return "".join(parts)


def progress_reply(f: Follow, text: str, status: Status = "loading") -> Reply:
    return Reply(intent="notice", title=text, status=status,
                 data={"notice": text, "kind": "progress", "service": f.service, "node": f.node})
