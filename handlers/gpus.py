"""GPUs per node: memory, utilisation, temperature, power, the processes holding them, and leftovers."""

from __future__ import annotations

from handlers.context import Context, Request
from handlers.down_nodes import DownNodes
from handlers.live import answered, failure, node_error_sections, snapshot_data
from handlers.reply import Reply, Section, Status
from services.node.probe import ProbeOptions

GPU_PROBE = ProbeOptions(journal_lines=0)


def _na(v: object, unit: str = "") -> str:
    return "n/a" if v is None else f"{v}{unit}"


async def handle(ctx: Context, req: Request) -> Reply:
    """GPU status of the targeted nodes."""
    snap = await ctx.cluster.snapshot(req.services, req.nodes, GPU_PROBE)
    sections: list[Section] = []
    statuses: list[Status] = []
    owners: dict[tuple[str, int], str] = {}
    for st in snap.services:
        for g in st.gpus:
            for p in g.processes:
                if p.pid is not None and not any(p.pid == lo.pid for lo in st.leftovers):
                    owners[(st.node, p.pid)] = st.service
    down = DownNodes(snap.nodes, ((st.service, st.node) for st in snap.services))
    for n in snap.nodes:
        if not n.ok:  # the reason once, and the services it took with it
            sections += down.card(n.node)
            continue
        status: Status = "warn" if n.leftovers else "ok"
        statuses.append(status)
        sections.append(Section(kind="header", title=f"GPUs on {n.node}", status=status))
        if not n.gpus:
            sections.append(Section(kind="text", text="no GPUs reported (nvidia-smi missing or failed)"))
            continue
        rows = [[str(g.index), g.name,
                 f"{_na(g.memory_used_mib)} / {_na(g.memory_total_mib)} MiB",
                 _na(g.utilization_pct, " %"), _na(g.temperature_c, " °C"), _na(g.power_w, " W")]
                for g in n.gpus]
        sections.append(Section(kind="table", headers=["#", "name", "memory", "util", "temp", "power"], rows=rows))
        leftover_pids = {p.pid for p in n.leftovers}
        prow = [[_na(p.pid), p.name, _na(p.gpu_index), _na(p.memory_mib, " MiB"),
                 "LEFTOVER" if p.pid in leftover_pids else owners.get((n.node, p.pid or -1), "")]
                for p in n.processes]
        if prow:
            sections.append(Section(kind="table", title="Processes holding GPU memory",
                                    headers=["pid", "name", "gpu", "memory", "service"], rows=prow))
        else:
            sections.append(Section(kind="text", text="no processes hold GPU memory"))
        if n.leftovers:
            total = sum(p.memory_mib or 0 for p in n.leftovers)
            sections.append(Section(kind="context", text=(
                f"⚠ {len(n.leftovers)} process(es) hold {total:,} MiB but belong to no running service "
                "(leftovers after a stop or crash?). Check with `pgrep -af 'VLLM::'` on the node and stop "
                "them before the next start, or the load will wait for memory or run out of it.")))
    sections += node_error_sections(snap, set(down.reports))  # discovery nodes with no vLLM unit
    statuses += ["error" for n in snap.nodes if not n.ok]
    data = snapshot_data(snap)
    data["nodes"] = [
        {**d, "gpus": [g.model_dump(mode="json") for g in n.gpus],
         "processes": [p.model_dump(mode="json") for p in n.processes],
         "leftovers": [p.model_dump(mode="json") for p in n.leftovers]}
        for d, n in zip(data["nodes"], snap.nodes, strict=True)
    ]
    order: list[Status] = ["error", "warn", "ok"]
    worst_status = next((s for s in order if s in statuses), "info")
    ok = answered(snap)
    return Reply(intent="gpus", ok=ok, title="GPU status", status=worst_status, sections=sections, data=data,
                 error=None if ok else failure(snap))
