"""Issue 26's goals 1-4 (push, not poll), judged from what ``bench.push_latency`` and ``bench.watch_scale`` measured."""

from __future__ import annotations

from typing import Any

from bench.report import WATCH_AT_N, goal_row, kib_mb, verdict

READY_MEDIAN_S, READY_WORST_S = 1.0, 2.0  # the ✅ after "Application startup complete." in the journal
DEATH_S = 2.0  # crash / unplanned restart / exit-0 notice after systemd's line
IDLE_CPU_PERCENT = 1.0  # the leader with the journal streams of 512 services, nothing happening
NODE_PROCESSES = 1  # per node, for all its services
DEATH_KINDS = {"crash": "crash (main process killed, RestartSec=10): the ⚠️ after \"Main process exited\"",
               "unplanned": "unplanned restart (`systemctl restart` on the node): the ⚠️ after \"Stopped …\"",
               "exit_0": "engine death, vLLM exits 0: the ❌ after \"Deactivated successfully.\""}


def _int(x: object) -> int | None:
    return int(x) if isinstance(x, int | float) else None


def _lat(summary: dict[str, Any] | None) -> str:
    if not summary or not summary.get("n"):
        return "— (no sample)" if summary is None else f"— ({summary.get('failed', 0)} samples failed)"
    failed = f", {summary['failed']} failed" if summary.get("failed") else ""
    return (f"median {summary['median_s']:.2f} s, worst {summary['worst_s']:.2f} s, best {summary['best_s']:.2f} s "
            f"({summary['n']} samples{failed})")


def push_goals(push: dict[str, Any], watch_push: dict[str, Any], watch: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 26's goals 1-3: the notices' latency from the node's journal line with the journal streams (push)
    and today's polls beside it (``bench.push_latency``), and the idle leader with the streams of 512 services
    (``bench.watch_scale``, cheap nodes; the polls alone beside it)."""
    return [_readiness_push_goal(push), *(_death_goal(push, kind, what) for kind, what in DEATH_KINDS.items()),
            _idle_goal(watch_push, watch), _node_side_goal(watch_push)]


def _beside(push: dict[str, Any], kind: str) -> str:
    polled = push.get("poll") or {}
    return f"; today's poll: {_lat(polled.get(f'{kind}_summary'))}" if polled else ""


def _readiness_push_goal(push: dict[str, Any]) -> dict[str, Any]:
    """The ✅ after "Application startup complete." with the streams, today's poll beside it."""
    pushed = push.get("push") or {}
    ready = pushed.get("readiness_summary")
    loads = ", ".join(f"{x:g}" for x in push.get("loads_s", []))
    ok = bool(ready and ready.get("n") and not ready.get("failed"))
    return goal_row(f"readiness: the ✅ after the journal's \"Application startup complete.\" (simulated node, "
                 f"loads of ~{loads} s; the smoke completion before it)",
                 f"median ≤ {READY_MEDIAN_S:g} s, worst ≤ {READY_WORST_S:g} s",
                 f"push: {_lat(ready)}{_beside(push, 'readiness')}" if pushed else
                 f"— ({push.get('status', 'not run')})",
                 "NOT MEASURED" if not pushed or not ready or not ready.get("n") else
                 ("PASS" if ok and ready["median_s"] <= READY_MEDIAN_S and ready["worst_s"] <= READY_WORST_S
                  else "MISS"))


def _death_goal(push: dict[str, Any], kind: str, what: str) -> dict[str, Any]:
    """One kind of death's notice after systemd's line, with the streams; today's poll beside it."""
    pushed = push.get("push") or {}
    got = pushed.get(f"{kind}_summary")
    ok = bool(got and got.get("n") and not got.get("failed"))
    return goal_row(f"deaths: {what}", f"≤ {DEATH_S:g} s (worst)",
                 f"push: {_lat(got)}{_beside(push, kind)}" if pushed else f"— ({push.get('status', 'not run')})",
                 "NOT MEASURED" if not pushed or not got or not got.get("n") else
                 ("PASS" if ok and got["worst_s"] <= DEATH_S else "MISS"))


def _idle_goal(watch_push: dict[str, Any], watch: dict[str, Any]) -> dict[str, Any]:
    """The leader's CPU with the journal streams of ``WATCH_AT_N`` services and nothing happening."""
    pct = watch_push.get("cpu_percent_of_one_core")
    n_watch = watch_push.get("services")
    if pct is None:
        measured = f"— ({watch_push.get('status', 'not run')})"
    else:
        measured = (f"{pct:.2f} % ({watch_push.get('window_cpu_s', 0):.2f} s CPU in {watch_push.get('window_s', 0):.0f}"
                    f" s: {watch_push.get('streams_open_at_end', 0)} streams open, "
                    f"{watch_push.get('window_stream_opens', 0)} opened again, the safety poll every "
                    f"{watch_push.get('interval_s', 0):g} s)")
        if watch.get("cpu_percent_of_one_core") is not None:
            measured += (f"; today's polls every {watch.get('interval_s', 0):g} s: "
                         f"{watch['cpu_percent_of_one_core']:.2f} %")
        if watch_push.get("errors"):
            measured += f"; errors: {'; '.join(watch_push['errors'])[:200]}"
    clean = pct is not None and n_watch == WATCH_AT_N and not watch_push.get("errors")
    return goal_row(f"idle cost: the leader watching {WATCH_AT_N} services with the journal streams, nothing "
                 "happening (cheap nodes)", f"≤ {IDLE_CPU_PERCENT:g} % of one core", measured,
                 "NOT MEASURED" if pct is None or n_watch != WATCH_AT_N else
                 verdict([pct if clean else None], IDLE_CPU_PERCENT))


def _node_side_goal(watch_push: dict[str, Any]) -> dict[str, Any]:
    """The ``journalctl --follow`` processes per node for all its services, and their memory."""
    side = watch_push.get("node_side") or {}
    procs, nodes = side.get("journalctl_processes"), watch_push.get("nodes")
    if procs is None or not nodes:
        measured, v = f"— ({watch_push.get('status', 'not run')})", "NOT MEASURED"
    else:
        rss, pss = side.get("rss_kib", {}), side.get("pss_kib", {})
        measured = (f"{procs} `journalctl --follow` for {nodes} nodes ({procs / nodes:.2f} per node, every unit of "
                    f"a node in one); RSS {kib_mb(_int(rss.get('median')))} each "
                    f"(PSS {kib_mb(_int(pss.get('median')))}): "
                    "the real journalctl of systemd 252 on an empty journal")
        v = "PASS" if procs <= NODE_PROCESSES * nodes and procs == watch_push.get("streams_open_at_end") else "MISS"
    return goal_row("the node side: processes per node for all its services (and their memory)",
                 f"≤ {NODE_PROCESSES} per node", measured, v)
