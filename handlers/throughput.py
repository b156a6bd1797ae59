"""Throughput: live tokens/s, requests, latency percentiles, and the latest benchmark results."""

from __future__ import annotations

from handlers.common import STATE_STATUS, state_line, warnings_section
from handlers.context import Context, Request
from handlers.live import cards_reply, service_cards
from handlers.reply import Reply, Section
from services.models import ServiceState
from services.node.probe import ProbeOptions
from services.parse import bench as bench_fmt

THROUGHPUT_PROBE = ProbeOptions(metrics_samples=2, metrics_interval_s=2.0, bench=True, gpus=False,
                                metrics_read=True)


def _ms(v: float | None) -> str:
    return f"{v:,.0f} ms" if v is not None else "n/a"


def throughput_sections(st: ServiceState, ctx: Context) -> list[Section]:
    """The throughput card of one service."""
    out = [Section(kind="header", title=f"{st.service} on {st.node}", status=STATE_STATUS[st.state])]
    if st.state != "ready":
        out.append(Section(kind="text", text=state_line(st, ctx.now()) + "\nno live throughput while not ready"))
    t = st.throughput
    fields: list[tuple[str, str]] = []
    if t is not None and t.generation_tps is not None:
        src = "/metrics (two samples)" if t.source == "metrics" else "vLLM's periodic stats log line"
        age = f", {int(t.age_seconds)} s old" if t.age_seconds else ", just now"
        fields += [
            ("generation", f"{t.generation_tps:,.1f} tok/s"),
            ("prompt", f"{t.prompt_tps or 0:,.1f} tok/s"),
            ("requests", f"{t.running or 0} running, {t.waiting or 0} waiting"),
            ("source", f"{src}{age}"),
        ]
        if t.kv_cache_usage is not None:
            fields.append(("KV cache", f"{t.kv_cache_usage * 100:.1f} % used"))
        if t.ttft_p50_ms is not None or t.itl_p50_ms is not None:
            fields.append(("TTFT p50 / p99", f"{_ms(t.ttft_p50_ms)} / {_ms(t.ttft_p99_ms)}"))
            fields.append(("ITL p50 / p99", f"{_ms(t.itl_p50_ms)} / {_ms(t.itl_p99_ms)}"))
    elif st.state == "ready":
        fields.append(("live", "idle — no requests, so vLLM logs no stats lines (that is not a problem)"))
    if st.bench is not None and (st.bench.single_stream or st.bench.peak):
        fields.append(("latest benchmark", bench_fmt.format_bench(st.bench)))
        files = {r.file for r in (st.bench.single_stream, st.bench.peak) if r is not None}
        fields.append(("from", ", ".join(sorted(files))))
    elif st.bench is not None:
        fields.append(("latest benchmark", "no `vllm bench serve --save-result` files in the bench_dir"))
    if fields:
        out.append(Section(kind="fields", fields=fields))
    w = warnings_section(st)
    if w:
        out.append(w)
    return out


async def handle(ctx: Context, req: Request) -> Reply:
    """Throughput of the targets."""
    return cards_reply("throughput", "Throughput", await service_cards(ctx, req, THROUGHPUT_PROBE, throughput_sections))
