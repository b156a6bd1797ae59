"""Launchers of the simulated node that are not vLLM's own, as real programs with real process trees.

Each is started through a small script the node writes (``opt/launch.py``, ``usr/bin/numactl``, …) so that
``/proc/PID/cmdline`` shows what a real deployment shows: a wrapper that execs leaves only the server's
argv, one that stays as the parent leaves its own argv on the main process and the server as its child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

_VALUE_OPTS = {
    "numactl": {"-N", "-m", "-i", "-C", "-p", "--cpunodebind", "--membind", "--interleave", "--physcpubind",
                "--preferred"},
    "uv": {"--project", "--directory", "--python", "-p", "--with", "--env-file"},
    "conda": {"-n", "--name", "-p", "--prefix", "--cwd"},
}  # fmt: skip


def _after_options(args: list[str], value_opts: set[str], positionals: int = 0) -> list[str]:
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return args[i + 1 :]
        if tok.startswith("-") and len(tok) > 1:
            i += 2 if tok in value_opts else 1
            continue
        if positionals:
            positionals -= 1
            i += 1
            continue
        break
    return args[i:]


def _exec(argv: list[str]) -> int:
    if not argv:
        print("usage: missing command", file=sys.stderr)
        return 1
    os.execv(argv[0], argv)


def _child(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``argv`` as a child and wait (forwarding SIGTERM/SIGINT), like sudo, uv run and conda run do."""
    if not argv:
        print("usage: missing command", file=sys.stderr)
        return 1
    child = subprocess.Popen(argv, env=env)

    def forward(sig: int, _frame: object) -> None:
        child.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return child.wait()


def numactl() -> int:
    """``numactl --cpunodebind=0 --membind=0 CMD…``: binds, then execs CMD (here: only execs)."""
    return _exec(_after_options(sys.argv[1:], _VALUE_OPTS["numactl"]))


def taskset() -> int:
    """``taskset [-c] MASK CMD…``: sets the affinity (here: nothing), then execs CMD."""
    return _exec(_after_options(sys.argv[1:], set(), positionals=1))


def uv() -> int:
    """``uv run [opts] CMD…``: runs CMD as its child in the project's environment."""
    args = sys.argv[1:]
    if args[:1] != ["run"]:
        print("error: only `uv run` is simulated", file=sys.stderr)
        return 2
    return _child(_after_options(args[1:], _VALUE_OPTS["uv"]))


def conda() -> int:
    """``conda run -n ENV [--no-capture-output] CMD…``: runs CMD as its child in the environment."""
    args = sys.argv[1:]
    if args[:1] != ["run"]:
        print("error: only `conda run` is simulated", file=sys.stderr)
        return 2
    return _child(_after_options(args[1:], _VALUE_OPTS["conda"]))


def launch() -> int:
    """``python launch.py CONFIG.json``: a site's own launcher that builds the vLLM command from a file
    and runs it as a child (no exec), so the unit's main process names no vLLM argument."""
    cfg = json.loads(Path(sys.argv[1]).read_text())
    return _child([cfg["python"], cfg["vllm"], "serve", cfg["model"], *cfg["args"]])


def model_server() -> int:
    """``python model_server.py --settings FILE``: runs the server in-process with arguments from FILE,
    so no process of the unit shows them (only vLLM's own log and API tell the settings)."""
    from services.sim.fake_vllm import main

    args = sys.argv[1:]
    path = args[args.index("--settings") + 1]
    cfg = json.loads(Path(path).read_text())
    sys.argv = [sys.argv[0], "serve", cfg["model"], *cfg["args"]]
    return main()
