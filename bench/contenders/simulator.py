"""The simulator's own cost: the probe run by a local ``/bin/sh``, no SSH at all."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from bench.common import Manifest
from bench.contenders.runs import END_MARK, Result, Run


def simulator_cost(manifest: Manifest, commands: dict[str, str], runs: int, max_nodes: int = 4) -> Result:
    """The probe run locally by ``/bin/sh -c`` as the login user with the node's environment: no SSH at all."""
    res = Result("simulator (local sh, no SSH)", 1)
    for node in manifest.nodes[:max_nodes]:
        env = {"HOME": os.path.expanduser(f"~{node.user}"), "USER": node.user, "LOGNAME": node.user,
               "SHELL": "/bin/sh", **node.env}
        user = node.user if os.geteuid() == 0 else None
        for _ in range(runs):
            out = tempfile.TemporaryFile()
            started = time.perf_counter()
            p = subprocess.Popen(["/bin/sh", "-c", commands[node.name]], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.DEVNULL, env=env, user=user, cwd="/")
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - started
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
            out.close()
            err = None if END_MARK in text else f"exit {p.returncode}: probe output incomplete"
            res.runs.append(Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, ru.ru_maxrss, err))
    res.notes.append(f"{min(max_nodes, len(manifest.nodes))} nodes x {runs} runs; CPU includes every "
                     "command the script ran (fake systemctl/journalctl/nvidia-smi, curl, base64, awk)")
    return res
