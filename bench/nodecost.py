"""What a remote command costs the node: CPU of everything it spawns, and how many processes it forks.

The exact remote command is run by ``/bin/sh -c`` locally, as the login user, in the simulated node's
environment (its fake ``systemctl``/``journalctl``/``nvidia-smi`` first in PATH), with no SSH at all:

- CPU = ``os.wait4``'s rusage of that ``sh``: user+sys of the shell and of every descendant it waited
  for (all of the probe's tools are waited for; nothing is left running in the background). Work done
  by *other* processes on the node's behalf — the (fake) vLLM server answering curl — is not in it, as
  on a real node the server's own work would not be.
- forks = the ``fork``/``vfork``/``clone``/``clone3`` calls that made a new process (not a thread), from
  one extra run under ``strace -f`` (not timed: tracing slows it down). Without strace, the
  ``processes`` line of ``/proc/stat`` (forks since boot, system-wide) is read before and after instead,
  which other work on the machine inflates; the result says which was used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import Any

from bench.common import summarize

END_MARK = "@@inferbot@@ end"
_FORK_CALL = re.compile(r"^\s*\d+\s+(?:clone3?|v?fork)\(")


def node_env(user: str, env: dict[str, str]) -> dict[str, str]:
    """The environment an SSH login of ``user`` gets on the simulated node (sshd's ``SetEnv`` puts ``env``)."""
    return {"HOME": os.path.expanduser(f"~{user}"), "USER": user, "LOGNAME": user, "SHELL": "/bin/sh", **env}


def _procs_since_boot() -> int:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def run_once(command: str, env: dict[str, str], user: str | None, stdin: str | None = None
             ) -> tuple[float, float, bytes, int]:
    """Run ``sh -c command`` once: (wall s, CPU s of it and its waited-for descendants, stdout, exit code)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as inp:
        if stdin:
            inp.write(stdin.encode())
            inp.seek(0)
        started = time.perf_counter()
        p = subprocess.Popen(["/bin/sh", "-c", command], stdin=inp if stdin else subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.DEVNULL, env=env, user=user, cwd="/")
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - started
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return wall, ru.ru_utime + ru.ru_stime, out.read(), p.returncode


def count_forks_strace(command: str, env: dict[str, str], user: str | None, stdin: str | None = None
                       ) -> int | None:
    """Processes forked by one run of ``sh -c command`` (threads not counted), from ``strace -f``; None without it."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ibench-strace-") as d:
        os.chmod(d, 0o777)  # strace runs as the login user and writes its log here
        log = os.path.join(d, "trace")
        with tempfile.TemporaryFile() as inp:
            if stdin:
                inp.write(stdin.encode())
                inp.seek(0)
            # -qq: no attach/exit chatter; the result of an interrupted call comes on a "resumed" line,
            # but the flags (CLONE_THREAD or not) are on the line that starts the call, which is counted.
            r = subprocess.run([strace, "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", log,
                                "/bin/sh", "-c", command], stdin=inp if stdin else subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, user=user, cwd="/",
                               check=False, timeout=120)
            if r.returncode != 0 and not os.path.exists(log):
                return None
        forks = 0
        with open(log, errors="replace") as f:
            for line in f:
                if _FORK_CALL.match(line) and "CLONE_THREAD" not in line:
                    forks += 1
        return forks


def measure(command: str, env: dict[str, str], user: str | None, runs: int = 5, stdin: str | None = None,
            forks: bool = True) -> dict[str, Any]:
    """CPU and wall per run of ``command`` (``runs`` runs after one untimed warm-up), and its fork count."""
    run_once(command, env, user, stdin)  # page cache, the fake tools' state files: as on a node asked before
    walls: list[float] = []
    cpus: list[float] = []
    errors: list[str] = []
    out_bytes = 0
    for _ in range(runs):
        wall, cpu, out, rc = run_once(command, env, user, stdin)
        walls.append(wall * 1000)
        cpus.append(cpu * 1000)
        out_bytes = len(out)
        if END_MARK.encode() not in out:
            errors.append(f"exit {rc}: probe output incomplete")
    result: dict[str, Any] = {"cpu_ms": summarize(cpus), "wall_ms": summarize(walls), "runs": runs,
                              "output_bytes": out_bytes, "errors": errors[:2]}
    if forks:
        n = count_forks_strace(command, env, user, stdin)
        if n is not None:
            result.update(forks=n, forks_method="strace -f (fork, vfork, clone, clone3; threads not counted)")
        else:
            before = _procs_since_boot()
            run_once(command, env, user, stdin)
            result.update(forks=_procs_since_boot() - before - 1,  # less the sh itself, forked by us
                          forks_method="/proc/stat processes delta (system-wide: other work inflates it)")
    return result
