"""The probe's reading of a unit's processes, run for real: cgroup.procs files, the /proc fallback, argv bytes.

The shell function is the probe's own (``services.node.probe.script.library``); only the cgroup root is pointed at a
directory laid out like ``/sys/fs/cgroup`` on cgroup v2 or v1/hybrid (systemd's named hierarchy), and the
processes are real ones with awkward argv (spaces, an empty word, a newline, JSON).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.node.probe import UnitRaw, parse_output
from services.node.probe.script import library

CHILD_CODE = "import time; time.sleep(60)"
SERVER_ARGV = [sys.executable, "-c", CHILD_CODE, "serve", "/models/q", "a b", "", "line1\nline2",
               '--compilation-config={"cudagraph_mode":"FULL", "x": [1, 2]}']


@pytest.fixture
def tree() -> Iterator[tuple[int, int, int]]:
    """(parent, server child, other child): a parent that does not exec, like a wrapper."""
    script = (
        "import subprocess, sys, time\n"
        f"a = subprocess.Popen({SERVER_ARGV!r})\n"
        f"b = subprocess.Popen([{sys.executable!r}, '-c', {CHILD_CODE!r}, 'VLLM::EngineCore'])\n"
        "print(a.pid, b.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    a, b = (int(x) for x in parent.stdout.readline().split())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{a}/cmdline").read_bytes().count(b"\0") < len(SERVER_ARGV) and time.monotonic() < deadline:
        time.sleep(0.02)
    yield parent.pid, a, b
    for pid in (a, b, parent.pid):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    parent.wait()


def run_procs(main_pid: int, cgroup: str, cgroot: Path) -> UnitRaw:
    script = (f"{library()}\nCGROUP_ROOT={cgroot}\necho \"$MARKER unit x.service\"\n"
              f"unit_processes {main_pid} '{cgroup}'\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20).stdout
    node = parse_output(out)
    assert len(node.units) == 1
    return node.units[0]


def check(unit: UnitRaw, parent: int, a: int, b: int) -> None:
    procs = {p.pid: p for p in unit.procs}
    assert {parent, a, b} <= set(procs)
    assert procs[a].ppid == parent and procs[b].ppid == parent
    assert procs[a].argv == SERVER_ARGV  # exactly, word for word
    assert procs[b].argv is not None and procs[b].argv[-1] == "VLLM::EngineCore"
    assert procs[parent].argv is None  # the main process's argv is read on its own (cmdline section)
    # The environment of the process that looks like the server is read too.
    assert unit.child_environ is not None and unit.child_environ.path == f"/proc/{a}/environ"
    assert unit.child_environ.data is not None and b"PATH=" in unit.child_environ.data


@pytest.mark.parametrize("layout", ["v2", "v1-systemd", "hybrid-unified"])
def test_cgroup_procs_file(tree: tuple[int, int, int], tmp_path: Path, layout: str) -> None:
    parent, a, b = tree
    sub = {"v2": "", "v1-systemd": "systemd", "hybrid-unified": "unified"}[layout]
    d = tmp_path / sub / "system.slice" / "x.service"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text(f"{b}\n{parent}\n{a}\n")  # cgroup v2 lists pids in no order
    unit = run_procs(parent, "/system.slice/x.service", tmp_path)
    assert unit.procs_src == str(d / "cgroup.procs")
    assert [p.pid for p in unit.procs] == sorted([parent, a, b])
    check(unit, parent, a, b)


def test_no_cgroup_file_falls_back_to_the_main_process_children(tree: tuple[int, int, int], tmp_path: Path) -> None:
    parent, a, b = tree
    unit = run_procs(parent, "/system.slice/x.service", tmp_path)
    assert unit.procs_src == "ppid"
    assert unit.procs[0].pid == parent  # the main process first, then its descendants
    check(unit, parent, a, b)


def test_a_cgroup_path_that_climbs_out_is_not_followed(tree: tuple[int, int, int], tmp_path: Path) -> None:
    parent, a, b = tree
    (tmp_path / "cgroup.procs").write_text("1\n")
    inner = tmp_path / "inner"
    inner.mkdir()
    unit = run_procs(parent, "/inner/..", tmp_path)
    assert unit.procs_src == "ppid"
    check(unit, parent, a, b)


def test_process_count_is_bounded(tmp_path: Path) -> None:
    d = tmp_path / "system.slice" / "x.service"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text("".join(f"{p}\n" for p in range(1, 400)))
    unit = run_procs(1, "/system.slice/x.service", tmp_path)
    assert len(unit.procs) <= 64


def test_descendants_from_children_files_and_from_every_stat_agree(tree: tuple[int, int, int]) -> None:
    """/proc/PID/task/*/children (where the kernel has it) and the scan of every /proc/PID/stat (where it
    does not) give the same rows in the same order."""
    parent, a, b = tree
    assert Path(f"/proc/{parent}/task/{parent}/children").exists()
    script = (f"{library()}\n"
              f"awk -v mode=scan -v root={parent} -v max=$MAX_PROCS \"$PROCESSES_AWK\" /proc/[0-9]*\necho ---\n"
              f"echo \"$MARKER unit x.service\"; unit_processes {parent} ''\n")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=20).stdout
    scanned, _, walked = out.partition("---\n")
    unit = parse_output(walked).units[0]
    assert unit.procs_src == "ppid"
    rows = scanned.splitlines()
    assert rows[0] == "ppid" and [r.split(" ", 2) for r in rows[1:]] == [[str(p.pid), str(p.ppid), p.comm]
                                                                        for p in unit.procs]
    assert {parent, a, b} <= {p.pid for p in unit.procs}
