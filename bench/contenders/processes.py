"""Running a contender's processes and measuring them: ``os.wait4`` gives each reaped child's user+sys time
(including its own waited-for children) and peak RSS; a detached process is read from ``/proc/PID/stat``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import REPO_ROOT

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """A started child whose output goes to temp files (so ``os.wait4`` can reap it with its rusage)."""

    popen: subprocess.Popen[bytes]
    out: Any
    err: Any
    started: float


def spawn(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None,
          new_session: bool = False) -> Proc:
    """Start ``argv`` with stdin from /dev/null and stdout/stderr into temp files."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    started = time.perf_counter()
    p = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd,
                         start_new_session=new_session)
    return Proc(popen=p, out=out, err=err, started=started)


@dataclass
class Done:
    """A reaped child: exit code, wall time, CPU, peak RSS and what it printed."""

    rc: int
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    stdout: str
    stderr: str


def reap(proc: Proc, timeout_s: float) -> Done:
    """Wait for ``proc`` (killing its process group past ``timeout_s``) and collect its rusage."""
    deadline = time.monotonic() + timeout_s
    pid = proc.popen.pid
    try:
        while True:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid == pid:
                break
            if time.monotonic() > deadline:
                _kill(pid)
                wpid, status, ru = os.wait4(pid, 0)
                break
            time.sleep(0.002)
    except BaseException:
        # Ctrl-C or any error while waiting: never leave the child (or its process group) behind.
        _kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.wait4(pid, 0)
        raise
    wall = time.perf_counter() - proc.started
    proc.popen.returncode = os.waitstatus_to_exitcode(status)
    texts = []
    for f in (proc.out, proc.err):
        f.seek(0)
        texts.append(f.read().decode("utf-8", "replace"))
        f.close()
    return Done(rc=proc.popen.returncode, wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, maxrss_kib=ru.ru_maxrss,
                stdout=texts[0], stderr=texts[1])


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        if _own_group(pid):
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def proc_cpu_s(pid: int) -> float:
    """user+sys of a live process (not its children) from /proc; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return 0.0


def logged_exception(stderr: str) -> str:
    """The last line of the last traceback in inferbot's JSON log lines on stderr ("" when none)."""
    found = ""
    for line in stderr.splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            exc = json.loads(line).get("exc")
            if exc:
                found = exc.strip().splitlines()[-1][:300]
    return found


def last_line(text: str) -> str:
    """The last non-blank line of ``text``, cut to 300 characters (what a failed child said last)."""
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment for a child run from the checkout: no Ansible, SSH agent or inferbot settings of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SSH_AUTH_SOCK", "INFERBOT_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.setdefault("LC_ALL", "C.UTF-8")
    return env | (extra or {})
