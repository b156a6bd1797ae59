"""nvidia-smi CSV parsing: GPUs, compute apps joined to GPU index, vLLM worker detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.models import GpuInfo, GpuProcess
from services.parse.gpu import is_vllm_worker, parse_gpu_processes, parse_gpus

GPU = Path(__file__).parent / "samples" / "gpu"
NAME = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


def uuid(i: int) -> str:
    return f"GPU-{i}a1b2c3d-{i}e5f-6a7b-8c9d-0e1f2a3b4c{i:02d}"


GPUS = parse_gpus((GPU / "query_gpu_8x_noheader_nounits.csv").read_text())


def test_eight_blackwell_gpus() -> None:
    assert [g.index for g in GPUS] == list(range(8))
    assert {g.name for g in GPUS} == {NAME}
    assert {g.memory_total_mib for g in GPUS} == {97887}
    assert GPUS[0] == GpuInfo(
        index=0,
        name=NAME,
        uuid=uuid(0),
        memory_used_mib=92150,
        memory_total_mib=97887,
        utilization_pct=100,
        temperature_c=60,
        power_w=540.12,
    )
    assert [g.uuid for g in GPUS] == [uuid(i) for i in range(8)]


def test_na_fields_become_none() -> None:
    assert GPUS[5].utilization_pct is None
    assert GPUS[5].power_w == 545.12
    assert GPUS[7].power_w is None
    assert GPUS[7].memory_used_mib == 92157


def test_header_and_units() -> None:
    gpus = parse_gpus((GPU / "query_gpu_header_units.csv").read_text())
    assert gpus == [
        GpuInfo(
            index=0,
            name=NAME,
            uuid=uuid(0),
            memory_used_mib=3,
            memory_total_mib=97887,
            utilization_pct=0,
            temperature_c=31,
            power_w=22.84,
        ),
        GpuInfo(
            index=1,
            name=NAME,
            uuid=uuid(1),
            memory_used_mib=None,
            memory_total_mib=97887,
            utilization_pct=None,
            temperature_c=33,
            power_w=None,
        ),
    ]


def test_reference_query_without_uuid_column() -> None:
    with_header = (
        "index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], "
        "temperature.gpu, power.draw [W]\n"
        "0, NVIDIA H200, 130004 MiB, 143771 MiB, 100 %, 45, 432.51 W\n"
    )
    bare = "0, NVIDIA H200, 130004, 143771, 100, 45, 432.51\n"
    expected = [
        GpuInfo(
            index=0,
            name="NVIDIA H200",
            memory_used_mib=130004,
            memory_total_mib=143771,
            utilization_pct=100,
            temperature_c=45,
            power_w=432.51,
        )
    ]
    assert parse_gpus(with_header) == expected
    assert parse_gpus(bare) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "index, name, uuid, memory.used [MiB], memory.total [MiB]\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    ],
)
def test_no_gpus(text: str) -> None:
    assert parse_gpus(text) == []


# --- compute apps -----------------------------------------------------------------------------------


def test_compute_apps_joined_to_gpu_index() -> None:
    procs = parse_gpu_processes((GPU / "compute_apps_vllm.csv").read_text(), GPUS)
    assert len(procs) == 11
    assert procs[0] == GpuProcess(
        pid=48211, name="/opt/vllm/venv/bin/python3", memory_mib=1024, gpu_uuid=uuid(0), gpu_index=0
    )
    workers = [p for p in procs if p.name.startswith("VLLM::Worker_TP")]
    assert [(p.pid, p.gpu_index, p.memory_mib) for p in workers] == [(48412 + i, i, 91126) for i in range(8)]


def test_compute_apps_na_pid_and_memory() -> None:
    procs = parse_gpu_processes((GPU / "compute_apps_vllm.csv").read_text(), GPUS)
    assert procs[9] == GpuProcess(
        pid=None, name="VLLM::EngineCor", memory_mib=None, gpu_uuid=uuid(3), gpu_index=3
    )


def test_compute_apps_name_with_comma_and_unknown_gpu() -> None:
    procs = parse_gpu_processes((GPU / "compute_apps_vllm.csv").read_text(), GPUS)
    assert procs[10] == GpuProcess(
        pid=51000,
        name="/usr/bin/python3 /home/ops/scratch, test.py",
        memory_mib=512,
        gpu_uuid="GPU-ffffffff-ffff-ffff-ffff-ffffffffffff",
        gpu_index=None,
    )


def test_compute_apps_without_uuid_column() -> None:
    text = "pid, process_name, used_gpu_memory [MiB]\n3858903, VLLM::EngineCore, 6265 MiB\n"
    assert parse_gpu_processes(text, GPUS) == [
        GpuProcess(pid=3858903, name="VLLM::EngineCore", memory_mib=6265, gpu_uuid="", gpu_index=None)
    ]


@pytest.mark.parametrize("sample", ["compute_apps_header_only.csv", "compute_apps_none.txt"])
def test_no_compute_apps(sample: str) -> None:
    assert parse_gpu_processes((GPU / sample).read_text(), GPUS) == []
    assert parse_gpu_processes("", []) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("VLLM::EngineCore", True),
        ("VLLM::EngineCor", True),
        ("VLLM::EngineCore_DP0", True),
        ("VLLM::Worker_TP0", True),
        ("VLLM::Worker_PP1_TP3", True),
        ("MYLLM::EngineCore", True),
        ("INFER::Worker", True),
        ("/opt/vllm/venv/bin/python3", False),
        ("vllm serve /models/x", False),
        ("VLLM::DPCoordinator", False),
        ("", False),
    ],
)
def test_is_vllm_worker(name: str, expected: bool) -> None:
    assert is_vllm_worker(name) is expected
