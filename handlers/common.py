"""Words and pieces several handlers share: durations, state lines, per-service sections."""

from __future__ import annotations

import sys
from datetime import datetime

from handlers.reply import Section, Status
from services.models import NodeError, ServiceState
from services.parse import bench as bench_fmt
from services.parse.vllm_args import format_flag_value, group_flags

STATE_STATUS: dict[str, Status] = {
    "ready": "ok", "loading": "loading", "starting": "loading", "stopped": "info",
    "unhealthy": "warn", "failed": "error", "unreachable": "error",
}
PHASE_WORDS = {
    "waiting_for_gpu": "waiting for GPU memory",
    "loading_weights": "loading weights",
    "kv_cache": "profiling / allocating KV cache",
    "compiling": "compiling / capturing CUDA graphs",
    "starting_api": "starting the API server",
    "ready": "ready",
}


def fmt_duration(seconds: float) -> str:
    """``29m 14s``, ``2h 05m``, ``45s``."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


def ago(then: datetime | None, now: datetime) -> str:
    """``13 min ago``, ``2 h 5 min ago``, ``just now``."""
    if then is None:
        return "at an unknown time"
    s = (now - then).total_seconds()
    if s < 0:
        return "just now (node clock ahead)"
    if s < 60:
        return f"{int(s)} s ago"
    m = int(s // 60)
    if m < 60:
        return f"{m} min ago"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m} min ago" if m else f"{h} h ago"
    return f"{h // 24} days ago"


def remaining(seconds: float) -> str:
    """``~17 min remaining``."""
    m = round(seconds / 60)
    if seconds < 90:
        return f"~{int(seconds)} s remaining"
    if m < 120:
        return f"~{m} min remaining"
    return f"~{m // 60} h {m % 60} min remaining"


def not_reached(st: ServiceState) -> str:
    """Why a service has no facts: ``unreachable — why``, or, when the bot itself was too busy to ask its node,
    the bot's own reason (``inferbot is busy: …``), which does not blame the node."""
    return (st.reason or "inferbot is busy") if st.reason_kind == "busy" else f"unreachable — {st.reason}"


def node_not_reached(node: str, error: NodeError | None) -> str:
    """``node gpu-a is unreachable — why``, or the bot's own busy reason (see :func:`not_reached`)."""
    if error is not None and error.kind == "busy":
        return error.reason
    return f"node {node} is unreachable — {error.reason if error else 'no answer'}"


def state_line(st: ServiceState, now: datetime) -> str:
    """``active, loading — started 13 min ago, ~17 min remaining`` (what a person wants first)."""
    systemd_word = st.active.split(" ")[0] if st.active else ""
    if st.state == "unreachable":
        return not_reached(st)
    head = f"{systemd_word}, {st.state}" if systemd_word and systemd_word != st.state else st.state
    when = {"loading": "started", "starting": "starting since", "ready": "up since", "unhealthy": "up since",
            "stopped": "stopped", "failed": "failed"}.get(st.state, "since")
    line = f"{head} — {when} {ago(st.since, now)}" if st.since else head
    if st.state in ("loading", "starting"):
        if st.phase and st.phase != "ready":
            line += f" ({PHASE_WORDS[st.phase]})"
        if st.eta_seconds is not None:
            line += f", {remaining(st.eta_seconds)}"
    if st.reason and st.state != "ready":
        line += f"\nreason: {st.reason}"
    return line


def throughput_line(st: ServiceState) -> str | None:
    """One line: live tok/s (and how fresh) plus the latest benchmark."""
    parts: list[str] = []
    t = st.throughput
    if t is not None and t.generation_tps is not None:
        age = f", {int(t.age_seconds)} s old" if t.age_seconds else ""
        parts.append(
            f"live {t.generation_tps:,.1f} tok/s generation, {t.prompt_tps or 0:,.1f} tok/s prompt "
            f"(from {'/metrics' if t.source == 'metrics' else 'the stats log line'}{age})"
        )
    elif st.state == "ready":
        parts.append("live: idle (no recent stats line)")
    if st.bench is not None and (st.bench.single_stream or st.bench.peak):
        parts.append("benchmark: " + bench_fmt.format_bench(st.bench))
    return "; ".join(parts) if parts else None


def flag_rows(st: ServiceState, only: str | None = None) -> list[Section]:
    """One table per flag group (model, parallelism, memory & capacity, …); nothing is cut.

    Flag and environment cells are interned (here and in :func:`env_section`): a fleet runs the same
    settings on most nodes, and an answer about 512 services held 512 copies of each cell. Interned strings
    still go when the last card holding them does (CPython's interned table does not keep them alive).
    """
    out: list[Section] = []
    for group, items in group_flags(st.flags):
        if only and group != only:
            continue
        rows = [[sys.intern(f"--{k}"), sys.intern(format_flag_value(v))] for k, v in items]
        out.append(Section(kind="table", title=f"Flags — {group}", headers=["flag", "value"], rows=rows))
    return out


def env_section(st: ServiceState, prefix: str | None = None) -> Section | None:
    """The environment as a table (redacted already)."""
    items = [(k, v) for k, v in st.env.items() if prefix is None or k.startswith(prefix)]
    if not items:
        return None
    title = "Environment" + (f" ({prefix}*)" if prefix else "")
    return Section(kind="table", title=title, headers=["variable", "value"],
                   rows=[[sys.intern(k), sys.intern(v)] for k, v in items])


def gpu_section(st: ServiceState) -> Section | None:
    """GPUs: name, memory used/total, utilisation."""
    if not st.gpus:
        return None
    rows = []
    for g in st.gpus:
        mem = (
            f"{g.memory_used_mib:,} / {g.memory_total_mib:,} MiB"
            if g.memory_used_mib is not None and g.memory_total_mib is not None else "n/a"
        )
        util = f"{g.utilization_pct} %" if g.utilization_pct is not None else "n/a"
        rows.append([str(g.index), g.name, mem, util])
    return Section(kind="table", title=f"GPUs on {st.node}", headers=["#", "name", "memory", "util"], rows=rows)


def warnings_section(st: ServiceState) -> Section | None:
    """Warnings (and the fix, when the state has one) as a context block."""
    if not st.warnings:
        return Section(kind="context", title="Fix", text=st.fix) if st.fix else None
    lines = ([f"Fix: {st.fix}"] if st.fix else []) + [f"⚠ {w}" for w in st.warnings]
    return Section(kind="context", title="Warnings", text="\n".join(lines))


def worst(statuses: list[Status]) -> Status:
    """The most urgent status among ``statuses``."""
    order: list[Status] = ["error", "warn", "loading", "info", "ok"]
    for s in order:
        if s in statuses:
            return s
    return "info"
