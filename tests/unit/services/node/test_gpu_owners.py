"""services/node/gpu_owners.py on the recorded Kimi node: eight vLLM workers (``VLLM::Worker_TP0``…7, children
of MainPID 23798), one on each of the eight GPUs, 92,993 MiB each (nvidia-smi's lines in the recording)."""

from __future__ import annotations

from services.models import ServiceState
from services.node.gpu_owners import attach_gpu_owners, visible_gpus
from services.node.node_facts import NodeFacts
from tests.unit.services.node.recorded import KIMI_MAIN_PID, KIMI_UNIT, node

FACTS = NodeFacts(node("settings-ready"))


def kimi(state: str = "ready", main_pid: int = KIMI_MAIN_PID) -> ServiceState:
    return ServiceState.model_validate({"service": "kimi", "node": "n", "unit": KIMI_UNIT, "state": state,
                                        "main_pid": main_pid, "gpus": FACTS.gpus})


def test_the_running_service_owns_its_workers() -> None:
    st = kimi()
    assert attach_gpu_owners([st], FACTS) == [] and st.leftovers == []
    assert [[(p.pid, p.name, p.memory_mib) for p in g.processes] for g in st.gpus] == [
        [(23804 + i, f"VLLM::Worker_TP{i}", 92993)] for i in range(8)]
    assert all(g.processes == [] for g in FACTS.gpus)  # the node's own list is left as it was


def test_workers_of_a_stopped_service_are_leftovers() -> None:
    st = kimi("stopped", main_pid=0)
    leftovers = attach_gpu_owners([st], FACTS)
    assert sorted(p.pid for p in leftovers if p.pid is not None) == list(range(23804, 23812))
    assert st.warnings == [
        "8 GPU process(es) (VLLM::Worker_TP0, VLLM::Worker_TP1, VLLM::Worker_TP2, VLLM::Worker_TP3, "
        "VLLM::Worker_TP4, VLLM::Worker_TP5, VLLM::Worker_TP6, VLLM::Worker_TP7) hold 743,944 MiB but belong to "
        "no running service — leftovers of a crash? Check with `pgrep -af 'VLLM::'` on the node and stop them "
        "before starting again"]


def test_a_container_hides_its_processes_from_the_tree() -> None:
    st = kimi("stopped", main_pid=0)
    docker = kimi().model_copy(update={"service": "other", "wrapper": "docker", "main_pid": 999})
    assert attach_gpu_owners([st, docker], FACTS) == [] and st.warnings == []


def test_cuda_visible_devices_by_index_or_uuid() -> None:
    assert [g.index for g in visible_gpus(FACTS.gpus, "2,3")] == [2, 3]
    assert [g.index for g in visible_gpus(FACTS.gpus, "GPU-89636c1e-bd52-cc80-5a68-2e6430a1dcc0")] == [7]
    assert len(visible_gpus(FACTS.gpus, None)) == 8 and len(visible_gpus(FACTS.gpus, "9")) == 8  # names none


def test_node_facts_say_why_there_are_no_gpus() -> None:
    missing = NodeFacts(node("settings-ready").model_copy(update={"gpus_rc": 127, "gpus": ""}))
    assert missing.gpus == [] and missing.gpu_error == "nvidia-smi not found on the node"
    broken = NodeFacts(node("settings-ready").model_copy(update={
        "gpus_rc": 9, "gpus": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"}))
    assert broken.gpu_error == ("nvidia-smi failed: NVIDIA-SMI has failed because it couldn't communicate with "
                                "the NVIDIA driver.")
    assert len(FACTS.gpus) == 8 and FACTS.gpu_error is None
