"""Which GPUs a service uses, which processes on them are its own, and which belong to no running service."""

from __future__ import annotations

from services.models import GpuInfo, GpuProcess, GpuProcessBrief, ServiceState
from services.node.node_facts import NodeFacts

# A GPU record of a service has every field set, and pydantic keeps a set of the names set per record, one per
# GPU per service and hundreds of services per answer. They share one set each: an assignment only ever adds a
# name already in it.
_GPU_FIELDS = set(GpuInfo.model_fields)
_BRIEF_FIELDS = set(GpuProcessBrief.model_fields)


def visible_gpus(gpus: list[GpuInfo], visible: str | None) -> list[GpuInfo]:
    """The node's GPUs that ``CUDA_VISIBLE_DEVICES`` (indexes or UUIDs) lets the service see; all of them when
    it names none of them."""
    if not visible:
        return gpus
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    picked = [g for g in gpus if str(g.index) in wanted or g.uuid in wanted]
    return picked or gpus


def attach_gpu_owners(states: list[ServiceState], facts: NodeFacts) -> list[GpuProcess]:
    """Fill ``gpus[].processes`` and return the GPU processes that belong to no running service."""
    leftovers = _leftovers(states, facts)
    by_index: dict[int, list[GpuProcessBrief]] = {}
    for p in facts.processes:
        if p.gpu_index is not None:
            by_index.setdefault(p.gpu_index, []).append(
                GpuProcessBrief.model_construct(_BRIEF_FIELDS, pid=p.pid, name=p.name, memory_mib=p.memory_mib)
            )
    for st in states:
        # Each service its own records (the node's list, its report's, stays without processes); built from
        # validated records, so constructed, not validated again, as model_copy did.
        st.gpus = [GpuInfo.model_construct(_GPU_FIELDS, **{**dict(g), "processes": by_index.get(g.index, [])})
                   for g in st.gpus]
        st.leftovers = list(leftovers)
        if leftovers and st.state in ("stopped", "failed", "starting"):
            total = sum(p.memory_mib or 0 for p in leftovers)
            st.warnings.append(
                f"{len(leftovers)} GPU process(es) ({', '.join(sorted({p.name for p in leftovers}))}) hold "
                f"{total:,} MiB but belong to no running service — leftovers of a crash? Check with "
                "`pgrep -af 'VLLM::'` on the node and stop them before starting again"
            )
    return leftovers


def _leftovers(states: list[ServiceState], facts: NodeFacts) -> list[GpuProcess]:
    """GPU processes holding memory that are no running service's main process or one of its descendants."""
    children: dict[int, list[int]] = {}
    for pid, ppid in facts.raw.parents.items():
        children.setdefault(ppid, []).append(pid)
    owned: set[int] = set()
    for st in states:
        if st.main_pid and st.state not in ("stopped", "failed", "unreachable"):
            stack = [st.main_pid]
            while stack:
                pid = stack.pop()
                if pid not in owned:
                    owned.add(pid)
                    stack += children.get(pid, [])
    # A container's processes are not descendants of the docker CLI that the unit runs.
    if any(st.wrapper == "docker" and st.main_pid for st in states):
        return []
    return [p for p in facts.processes if p.pid is not None and p.pid not in owned and (p.memory_mib or 0) > 0]
