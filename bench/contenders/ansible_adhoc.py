"""Ansible as a contender: ``ansible all -m shell`` from a benchmark-only venv, pipelining on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO_ROOT, Manifest
from bench.contenders.openssh import close_masters
from bench.contenders.processes import child_env, last_line, reap, spawn
from bench.contenders.runs import END_MARK, Result, Run

ANSIBLE_VENV = REPO_ROOT / "bench" / ".venv-ansible"


def ensure_ansible(install: bool = True) -> tuple[str | None, str]:
    """Path of ``ansible`` in the benchmark-only venv (created on demand) and its version, or None and why."""
    exe = ANSIBLE_VENV / "bin" / "ansible"
    if not exe.exists() and install:
        try:
            if not (ANSIBLE_VENV / "bin" / "pip").exists():
                subprocess.run([_base_python(), "-m", "venv", str(ANSIBLE_VENV)], check=True,
                               capture_output=True, timeout=120)
            subprocess.run([str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True,
                           capture_output=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            detail = getattr(e, "stderr", b"") or b""
            text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
            return None, f"installing ansible-core into {ANSIBLE_VENV} failed: {last_line(text) or e}"
    if not exe.exists():
        return None, f"ansible-core is not installed in {ANSIBLE_VENV}"
    try:
        with tempfile.TemporaryDirectory(prefix="ibm-ah-") as home:
            out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                                 env=child_env({"ANSIBLE_HOME": home}))
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"ansible --version failed: {e}"
    m = re.search(r"core ([\d.]+\w*)", out.stdout)
    return str(exe), m.group(1) if m else last_line(out.stdout)


def _base_python() -> str:
    """The interpreter the project's venv was made from (``sys._base_executable`` when available)."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def write_ansible_files(d: Path, manifest: Manifest, n: int, commands: dict[str, str]) -> tuple[Path, Path]:
    """An inventory copy with ``host_vars`` carrying each node's probe command (``!unsafe``: no templating)."""
    inv = d / "inventory.ini"
    shutil.copy(manifest.inventories[n], inv)
    hv = d / "host_vars"
    hv.mkdir(exist_ok=True)
    for node in manifest.nodes[:n]:
        (hv / f"{node.name}.yml").write_text(f"probe_cmd: !unsafe {json.dumps(commands[node.name])}\n")
    cfg = d / "ansible.cfg"
    cfg.write_text("\n".join([
        "[defaults]", "host_key_checking = True", "interpreter_python = /usr/bin/python3",
        "deprecation_warnings = False", "retry_files_enabled = False", "nocolor = True",
        "[ssh_connection]", "pipelining = True", f"control_path_dir = {d}/cp",
        # Ansible's own default ssh_args plus the same key, known_hosts and strict checking as the others.
        f"ssh_args = -F {manifest.ssh_config} -C -o ControlMaster=auto -o ControlPersist=60s", "",
    ]))
    return inv, cfg


def ansible_adhoc(manifest: Manifest, n: int, runs: int, commands: dict[str, str], exe: str,
                  budget_s: float = 1e9, timeout_s: float = 300.0) -> Result:
    """``ansible all -i INV -m shell -a '{"cmd": "{{ probe_cmd }}"}' -f N`` (pipelining on, host keys checked).

    The first run opens the SSH connections and is reported apart; then up to ``runs`` measured runs, fewer
    when the next one would end past ``budget_s`` (at least one).
    """
    res = Result("Ansible ad-hoc", n, cluster=manifest.kind)
    d = Path(tempfile.mkdtemp(prefix="ibm-a-", dir="/tmp"))
    try:
        inv, cfg = write_ansible_files(d, manifest, n, commands)
        env = child_env({"ANSIBLE_CONFIG": str(cfg), "ANSIBLE_HOME": str(d / "home"),
                    "ANSIBLE_LOCAL_TEMP": str(d / "tmp")})
        args = json.dumps({"cmd": "{{ probe_cmd }}"})  # per-node command from host_vars
        argv = [exe, "all", "-i", str(inv), "-m", "shell", "-a", args, "-f", str(n)]
        started = time.monotonic()
        for i in range(runs + 1):
            dn = reap(spawn(argv, env=env, new_session=True), timeout_s)
            found = dn.stdout.count(END_MARK)
            err = None if dn.rc == 0 and found == n else (
                f"exit {dn.rc}, {found}/{n} complete: " + last_line(dn.stderr or dn.stdout))
            run = Run(dn.wall_s, dn.cpu_s, dn.maxrss_kib, dn.maxrss_kib, err)
            if i == 0:
                # The first run opens the SSH connections; later ones reuse Ansible's ControlPersist masters.
                res.extra.update(first_run_wall_s=run.wall_s, first_run_cpu_s=run.cpu_s, first_run_error=run.error)
                continue
            res.runs.append(run)
            spent = time.monotonic() - started
            if i < runs and spent + spent / (i + 1) > budget_s:
                res.notes.append(f"{i} measured runs instead of {runs}: each takes {spent / (i + 1):.1f}s here "
                                 f"and Ansible's time budget per N is {budget_s:g}s")
                break
        res.notes.append("medians exclude the first run, which opens the connections (first_run_wall_s); later "
                         "runs reuse Ansible's default ControlPersist=60s masters, whose own CPU is not counted")
    finally:
        close_masters(d / "cp")
        shutil.rmtree(d, ignore_errors=True)
    return res
