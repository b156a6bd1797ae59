"""Charts: throughput over time, the last loads split by phase, benchmark results over their dates.

Each handler returns a :class:`~handlers.reply.Chart` (the numbers, not a picture) with a text summary;
``bot/`` draws it. The numbers come from the store (samples the watcher took, loads the follows
recorded) or, for benchmarks, from the node's ``vllm bench serve --save-result`` files.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from statistics import median
from typing import Any

from config.models import Service
from handlers.common import PHASE_WORDS, fmt_duration
from handlers.context import Context, Request
from handlers.reply import Chart, ChartMarker, ChartPanel, ChartSeries, Reply, Section, Status
from services.node.probe import ProbeOptions
from services.parse import bench as bench_parse
from services.store.ports import StateStore
from services.store.records import AuditEntry, LoadRecord, MetricPoint

DEFAULT_WINDOW_S = 24 * 3600
MAX_WINDOW_S = 7 * 24 * 3600  # what the store keeps
MIN_WINDOW_S = 10 * 60
RESTART_EVENTS = ("restart.executed", "restart.unplanned")
LOAD_PHASES = ("waiting_for_gpu", "loading_weights", "kv_cache", "compiling", "starting_api")
LOADS_SHOWN = 10
BENCH_PROBE = ProbeOptions(gpus=False, journal_lines=0, bench=True, http_timeout_s=2.0)


def _one_service(ctx: Context, req: Request, what: str) -> Service | Reply:
    """The one service a chart is about, or a friendly reply asking which."""
    if len(req.services) == 1:
        return req.services[0]
    names = sorted({s.name for s in (req.services or ctx.config.services)})
    if not names:
        return _note(what, "No services are configured, so there is nothing to chart.")
    if len(names) == 1:  # one name on several nodes
        nodes = sorted(s.node for s in req.services)
        return _note(what, f"{names[0]} runs on {' and '.join(nodes)}: name the node, e.g. "
                     f"`chart {what} {names[0]} on {nodes[0]}`.")
    example = f"chart {what} {names[0]}"
    return _note(what, f"Which service? A chart shows one: e.g. `{example}` (services: {', '.join(names)}).")


def _note(what: str, text: str, status: Status = "info") -> Reply:
    return Reply(intent=f"chart_{what}", title=f"Chart of {what}", status=status,
                 sections=[Section(kind="text", text=text)], data={"chart": None})


def _store(ctx: Context, what: str) -> StateStore | Reply:
    if ctx.store is None:
        return _note(what, "Charts need the bot's state database ([state] in the config); there is none here.",
                     "warn")
    return ctx.store


def _window(req: Request) -> tuple[int, str | None]:
    """The window asked for (``last 6h``, ``24h``, ``7d``), clamped to what the store keeps."""
    window = req.args.window_s or DEFAULT_WINDOW_S
    if window > MAX_WINDOW_S:
        return MAX_WINDOW_S, "samples are kept for 7 days, so this shows the last 7 days"
    if window < MIN_WINDOW_S:
        return MIN_WINDOW_S, "the shortest window is 10 minutes"
    return window, None


def _window_words(seconds: int) -> str:
    if seconds % 86400 == 0 and seconds > 2 * 86400:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def _stats(values: list[float | None]) -> tuple[float, float] | None:
    known = [v for v in values if v is not None]
    return (sum(known) / len(known), max(known)) if known else None


def _point_json(p: MetricPoint) -> dict[str, Any]:
    return {"at": p.at.isoformat(), "resolution_s": p.resolution_s, "generation_tps": p.generation_tps,
            "prompt_tps": p.prompt_tps, "running": p.running, "waiting": p.waiting,
            "kv_cache_usage": p.kv_cache_usage}


async def throughput(ctx: Context, req: Request) -> Reply:
    """``chart throughput kimi [last 6h|24h|7d]``: tok/s and requests over time, restarts marked."""
    service = _one_service(ctx, req, "throughput")
    if isinstance(service, Reply):
        return service
    store = _store(ctx, "throughput")
    if isinstance(store, Reply):
        return store
    window, clamped = _window(req)
    now = ctx.now()
    since = now - timedelta(seconds=window)
    points = await store.samples.between(service.name, service.node, since, now)
    audit = await store.audit.recent(service.name, limit=500)
    restarts = [e for e in audit if e.event in RESTART_EVENTS and e.node == service.node and since <= e.at <= now]
    restarts.sort(key=lambda e: e.at)
    who = f"{service.name} on {service.node}"
    span = _window_words(window)
    data: dict[str, Any] = {
        "chart": "throughput", "service": service.name, "node": service.node, "window_s": window,
        "since": since.isoformat(), "until": now.isoformat(), "points": [_point_json(p) for p in points],
        "restarts": [{"at": e.at.isoformat(), "event": e.event, "who": e.who} for e in restarts],
    }
    if not points:
        text = (f"No throughput samples of {who} in the last {span} yet. The watcher takes one from the "
                f"server's /metrics every {fmt_duration(ctx.config.watch.interval)} while it is ready.")
        return Reply(intent="chart_throughput", title=f"Throughput of {who}", status="info",
                     sections=[Section(kind="text", text=text)], data=data)
    chart = _throughput_chart(ctx, service, points, restarts, f"Throughput of {who} — last {span}")
    summary = _throughput_summary(points, restarts)
    chart.alt_text = f"Line chart of {who}'s generation and prompt tokens per second and requests running and " \
                     f"waiting over the last {span} (UTC): {summary}."
    older = "; older than 24 h as 5-minute means" if any(p.resolution_s for p in points) else ""
    sections = [Section(kind="text", text=summary),
                Section(kind="context", text=f"{len(points)} samples from {points[0].at:%Y-%m-%d %H:%M} to "
                        f"{points[-1].at:%Y-%m-%d %H:%M} UTC{older}")]
    if clamped:
        sections.append(Section(kind="context", text=clamped))
    return Reply(intent="chart_throughput", title=f"Throughput of {who} — last {span}", status="ok",
                 sections=sections, chart=chart, data=data)


def _throughput_chart(ctx: Context, service: Service, points: list[MetricPoint], restarts: list[AuditEntry],
                      title: str) -> Chart:
    """Tokens per second and requests over time, restarts marked (``alt_text`` is the caller's)."""
    xs = [p.at for p in points]
    return Chart(
        filename=f"throughput-{service.name}-{service.node}.png",
        title=title,
        subtitle=f"{len(points)} samples of /metrics; restarts marked",
        alt_text="",
        xlabel="time (UTC)",
        gap_s=max(3 * ctx.config.watch.interval, 900.0),
        panels=[
            ChartPanel(ylabel="tokens/s", series=[
                ChartSeries(name="generation tok/s", x=xs, y=[p.generation_tps for p in points]),
                ChartSeries(name="prompt tok/s", x=xs, y=[p.prompt_tps for p in points]),
            ]),
            ChartPanel(ylabel="requests", series=[
                ChartSeries(name="running", x=xs, y=[p.running for p in points], style="step"),
                ChartSeries(name="waiting", x=xs, y=[p.waiting for p in points], style="step"),
            ]),
        ],
        markers=[ChartMarker(at=e.at, label="restart" if e.event == "restart.executed" else "unplanned restart")
                 for e in restarts],
    )


def _throughput_summary(points: list[MetricPoint], restarts: list[AuditEntry]) -> str:
    """The chart in one line: average and peak tok/s, the most requests running and waiting, the restarts."""
    lines = []
    for label, values in (("generation", [p.generation_tps for p in points]),
                          ("prompt", [p.prompt_tps for p in points])):
        s = _stats(values)
        if s is not None:
            lines.append(f"{label} {s[0]:,.1f} tok/s on average, peak {s[1]:,.1f}")
    run, wait = _stats([p.running for p in points]), _stats([p.waiting for p in points])
    if run is not None:
        lines.append(f"requests running up to {run[1]:.0f}" + (f", waiting up to {wait[1]:.0f}" if wait else ""))
    lines.append(f"{len(restarts)} restart{'s' if len(restarts) != 1 else ''} in the window"
                 + (": " + ", ".join(f"{e.at:%m-%d %H:%M} UTC" for e in restarts[-5:]) if restarts else ""))
    return "; ".join(lines)


def _phase_split(load: LoadRecord, seen: dict[str, datetime]) -> dict[str, float]:
    """Seconds per phase: a phase lasts from its first sighting to the next phase's (the load's end for
    the last). The time before the first sighting counts to the first phase seen; a load whose phases were
    never seen is all "unknown"."""
    end = load.ready_at or (load.started_at + timedelta(seconds=load.duration_s))
    order = sorted(((at, phase) for phase, at in seen.items() if phase in LOAD_PHASES), key=lambda x: x[0])
    if not order:
        return {"unknown": load.duration_s}
    out: dict[str, float] = {}
    for i, (at, phase) in enumerate(order):
        begin = load.started_at if i == 0 else at
        stop = order[i + 1][0] if i + 1 < len(order) else end
        out[phase] = out.get(phase, 0.0) + max(0.0, (stop - begin).total_seconds())
    return out


async def loads(ctx: Context, req: Request) -> Reply:
    """``chart loads kimi``: the last loads as bars split by phase, with today's ETA basis."""
    service = _one_service(ctx, req, "loads")
    if isinstance(service, Reply):
        return service
    store = _store(ctx, "loads")
    if isinstance(store, Reply):
        return store
    who = f"{service.name} on {service.node}"
    history = await store.loads.recent(service.name, service.node, limit=LOADS_SHOWN)
    ready = [r.duration_s for r, _ in history if r.outcome == "ready"]
    basis = await store.loads.durations(service.name, service.node)  # what an ETA uses now (handlers/live.py)
    typical = sorted(basis)[len(basis) // 2] if basis else None
    splits = [{k: round(v, 1) for k, v in _phase_split(r, seen).items()} for r, seen in history]
    rows = [{"started_at": r.started_at.isoformat(), "outcome": r.outcome, "duration_s": r.duration_s,
             "phases_s": split} for (r, _), split in zip(history, splits, strict=True)]
    data: dict[str, Any] = {"chart": "loads", "service": service.name, "node": service.node, "loads": rows,
                            "eta_basis_s": typical, "eta_basis_loads": len(basis)}
    if not history:
        return Reply(intent="chart_loads", title=f"Loads of {who}", status="info", data=data,
                     sections=[Section(kind="text", text=f"No loads of {who} recorded yet: I record each load I "
                                       "follow (a restart, or one the watcher noticed) when it ends.")])
    categories = [f"{r.started_at:%m-%d %H:%M}" + ("" if r.outcome == "ready" else f"\n{r.outcome}")
                  for r, _ in history]
    kinds = [p for p in (*LOAD_PHASES, "unknown") if any(p in split for split in splits)]
    series = [ChartSeries(name=PHASE_WORDS.get(p, "phase not seen"), style="bar", muted=p == "unknown",
                          y=[round(split.get(p, 0.0) / 60, 2) for split in splits]) for p in kinds]
    hlines = [(round(typical / 60, 2), f"ETA basis today: median of {len(basis)} ready loads, "
               f"{fmt_duration(typical)}")] if typical is not None else []
    chart = Chart(filename=f"loads-{service.name}-{service.node}.png",
                  title=f"Last {len(history)} loads of {who}, by phase",
                  subtitle="start time (UTC) of each load; phases as the follow saw them",
                  alt_text="", xlabel="load started (UTC)", categories=categories,
                  panels=[ChartPanel(ylabel="minutes", series=series, hlines=hlines)])
    parts = [f"{len(history)} loads, {len(ready)} ready"]
    if ready:
        parts.append(f"ready loads took {fmt_duration(min(ready))} to {fmt_duration(max(ready))} "
                     f"(median {fmt_duration(median(ready))})")
    last_split = splits[-1]
    parts.append("last load: " + ", ".join(f"{PHASE_WORDS.get(k, 'phase not seen')} {fmt_duration(v)}"
                                           for k, v in last_split.items()))
    parts.append(f"today's ETA basis: {fmt_duration(typical)} (median of the last {len(basis)} ready loads)"
                 if typical is not None else "no ready load yet, so ETAs come from the shard rate only")
    summary = "; ".join(parts)
    chart.alt_text = f"Stacked bar chart of the last {len(history)} loads of {who} in minutes, split by phase: " \
                     f"{summary}."
    return Reply(intent="chart_loads", title=f"Loads of {who}", status="ok", chart=chart, data=data,
                 sections=[Section(kind="text", text=summary)])


async def bench(ctx: Context, req: Request) -> Reply:
    """``chart bench kimi``: single-stream and peak output throughput over the benchmark files' dates."""
    service = _one_service(ctx, req, "bench")
    if isinstance(service, Reply):
        return service
    who = f"{service.name} on {service.node}"
    if not service.bench_dir:
        return _note("bench", f"{who} has no bench_dir in the config, so I know of no benchmark files.")
    node = ctx.config.node(service.node)
    report, _states, raw = await ctx.cluster.probe_node(node, [service], BENCH_PROBE)
    if not report.ok or raw is None:
        reason = report.error.reason if report.error else "no answer"
        return _note("bench", f"I could not read the benchmark files on {service.node}: {reason}", "warn")
    unit = next((u for u in raw.units if u.unit == service.unit), None)
    records: list[dict[str, Any]] = []
    for path, text in (unit.bench_files if unit else {}).items():
        records += bench_parse.parse_bench_extract(path, text)
    by_date: dict[str, dict[str, float]] = {}
    for rec in records:
        tput = rec.get("output_throughput")
        stamp = str(rec.get("date") or "")
        if not isinstance(tput, int | float) or isinstance(tput, bool) or rec.get("completed") == 0 or len(stamp) < 8:
            continue
        day = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}"
        slot = by_date.setdefault(day, {})
        slot["peak"] = max(slot.get("peak", 0.0), float(tput))
        if rec.get("max_concurrency") == 1:
            slot["single"] = max(slot.get("single", 0.0), float(tput))
    days = sorted(by_date)
    data: dict[str, Any] = {"chart": "bench", "service": service.name, "node": service.node,
                            "dates": [{"date": d, "single_stream_tps": by_date[d].get("single"),
                                       "peak_tps": by_date[d].get("peak")} for d in days]}
    if not days:
        return Reply(intent="chart_bench", title=f"Benchmarks of {who}", status="info", data=data,
                     sections=[Section(kind="text", text=f"No `vllm bench serve --save-result` files with results "
                                       f"in {service.bench_dir} on {service.node}.")])
    chart = Chart(filename=f"bench-{service.name}-{service.node}.png",
                  title=f"Benchmarks of {who}: output throughput by date",
                  subtitle=f"vllm bench serve result files in the bench_dir on {service.node}",
                  alt_text="", xlabel="benchmark date (UTC)", categories=days,
                  # Two panels: single-stream is ~1/20 of peak and would lie flat on a shared axis.
                  panels=[
                      ChartPanel(ylabel="peak\noutput tok/s", series=[
                          ChartSeries(name="peak (best concurrency)", style="points",
                                      y=[by_date[d].get("peak") for d in days])]),
                      ChartPanel(ylabel="single stream\noutput tok/s", series=[
                          ChartSeries(name="single stream\n(concurrency 1)", style="points",
                                      y=[by_date[d].get("single") for d in days])]),
                  ])
    last = by_date[days[-1]]
    summary = (f"{len(days)} benchmark date{'s' if len(days) != 1 else ''} from {days[0]} to {days[-1]}; "
               f"latest ({days[-1]}): peak {last['peak']:,.0f} tok/s"
               + (f", single stream {last['single']:,.1f} tok/s" if "single" in last else ""))
    chart.alt_text = f"Chart of {who}'s benchmark output throughput by date: {summary}."
    return Reply(intent="chart_bench", title=f"Benchmarks of {who}", status="ok", chart=chart, data=data,
                 sections=[Section(kind="text", text=summary)])
