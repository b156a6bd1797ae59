"""inferbot as a contender: cold (a fresh ``inferbot ask`` process), warm (``bench.warm_client``), its start-up,
and the scheduler's watchers at scale (``bench.watch_scale``)."""

from __future__ import annotations

import compileall
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import QUESTION, REPO_ROOT, Manifest, summarize
from bench.contenders.processes import child_env, last_line, logged_exception, reap, spawn
from bench.contenders.runs import Result, Run

PROJECT_PACKAGES = ("bot", "config", "handlers", "services")
"""The project's own packages: compiled before the cold runs (see :func:`compile_project`)."""


def compile_project() -> None:
    """Byte-compile the project's modules in place, as ``pip install`` does for an installed inferbot.

    The benchmark runs inferbot from this checkout, where nothing compiles them when PYTHONDONTWRITEBYTECODE
    is set (as in the Dockerfile and on the benchmark machine): every cold run would then compile them
    again — a cost no installed copy has, since pip compiles a wheel's modules on install
    (whatever PYTHONDONTWRITEBYTECODE says). Third-party packages were compiled by pip already.
    """
    for package in PROJECT_PACKAGES:
        compileall.compile_dir(str(REPO_ROOT / package), quiet=1)


def inferbot_cold(manifest: Manifest, n: int, runs: int, timeout_s: float = 120.0) -> Result:
    """``inferbot ask "…" --json --config FILE`` as a fresh process: whole-process wall, CPU and peak RSS.

    The project's modules are compiled first (:func:`compile_project`): a cold start of an installed inferbot.
    """
    res = Result("inferbot cold", n, cluster=manifest.kind)
    compile_project()
    exe = str(Path(sys.executable).with_name("inferbot"))
    argv = [exe, "ask", QUESTION, "--json", "--config", manifest.configs[n]]
    for _ in range(runs):
        d = reap(spawn(argv, env=child_env(), new_session=True), timeout_s)
        err = None
        try:
            reply = json.loads(d.stdout)
            bad = [x["node"] for x in reply["data"]["nodes"] if not x["ok"]]
            if not reply["ok"] or len(reply["data"]["nodes"]) != n or bad:
                err = f"nodes not ok: {bad[:5]}"
        except (ValueError, KeyError, TypeError):
            err = f"exit {d.rc}: {last_line(d.stderr or d.stdout)}"
        if err is not None and (tb := logged_exception(d.stderr)):
            err += f" ({tb})"
        res.runs.append(Run(d.wall_s, d.cpu_s, d.maxrss_kib, d.maxrss_kib, err))
    return res


def inferbot_warm(manifest: Manifest, n: int, runs: int, timeout_s: float | None = None,
                  first_start: bool = False) -> Result:
    """The long-lived bot path in its own process (``bench.warm_client``); see that module. ``first_start``:
    also the peak RSS of one more run on a new state database (``--new-store``)."""
    res = Result("inferbot warm", n, cluster=manifest.kind)
    timeout_s = timeout_s if timeout_s is not None else 300.0 + n * (0.5 + 0.1 * runs)
    argv = [sys.executable, "-m", "bench.warm_client", "--config", manifest.configs[n], "--runs", str(runs)]
    d = reap(spawn(argv, env=child_env(), cwd=str(REPO_ROOT), new_session=True), timeout_s)
    try:
        data = json.loads(d.stdout)
    except ValueError:
        res.unavailable = f"warm client failed (exit {d.rc}): {last_line(d.stderr)}"
        return res
    for i, wall in enumerate(data["wall_s"]):
        cpu = data["cpu_ms_per_node"][i] * n / 1000
        res.runs.append(Run(wall, cpu, data["peak_rss_kib"], data["peak_rss_kib"], data["run_errors"][i]))
    if data.get("warmup_error"):
        res.notes.append(f"the warm-up question failed: {data['warmup_error']}")
    res.extra = {k: data[k] for k in ("round_trips_per_node", "run_errors", "connects", "connects_after_warmup",
                                       "warmup_wall_s", "warmup_cpu_ms_per_node", "command_digest",
                                       "slack_front_end_imported", "rss_before_first_question_kib", "messages",
                                       "render_s", "render_cpu_ms_per_node", "alembic_imported")
                 if k in data}
    res.extra["process_cpu_s_total"] = d.cpu_s
    if first_start:
        # The same bot starting on a new state database: serve's start has a helper process create the schema.
        d = reap(spawn([*argv[:-1], "1", "--new-store"], env=child_env(), cwd=str(REPO_ROOT), new_session=True),
                 timeout_s)
        try:
            res.extra["first_start_peak_rss_kib"] = json.loads(d.stdout)["peak_rss_kib"]
        except ValueError:
            res.notes.append(f"the first-start run failed (exit {d.rc}): {last_line(d.stderr)}")
    return res


def startup(runs: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """``inferbot --help`` as a fresh process, and the interpreter's own start-up (``python -c pass``) beside it."""
    exe = str(Path(sys.executable).with_name("inferbot"))
    out: dict[str, Any] = {}
    for key, what, argv in (("help", "inferbot --help", [exe, "--help"]),
                            ("python", "python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"])):
        reap(spawn(argv, env=child_env()), timeout_s)  # page cache and .pyc files, as on a machine in use
        done = [reap(spawn(argv, env=child_env()), timeout_s) for _ in range(runs)]
        bad = [d for d in done if d.rc != 0]
        out[key] = {"what": what, "wall_s": summarize([d.wall_s for d in done]),
                    "cpu_s": summarize([d.cpu_s for d in done]), "runs": runs,
                    "errors": [f"exit {d.rc}: {last_line(d.stderr)}" for d in bad][:2]}
    return out


def watcher_at_scale(manifest: Manifest, n: int, intervals: int, push: bool = False) -> dict[str, Any]:
    """``python -m bench.watch_scale`` against the first ``n`` cheap nodes (see that module): the polls alone,
    or with the leader's journal streams (``push``: its intervals are ``[watch] safety_interval``)."""
    config = (manifest.push_watch_configs if push else manifest.watch_configs)[n]
    argv = [sys.executable, "-m", "bench.watch_scale", "--config", config, "--intervals", str(intervals)]
    d = reap(spawn(argv, env=child_env({"INFERBOT_LOG_LEVEL": "ERROR"}), cwd=str(REPO_ROOT), new_session=True),
             300.0 + intervals * (150.0 if push else 30.0))
    try:
        data: dict[str, Any] = json.loads(d.stdout)
    except ValueError:
        return {"status": f"not measured (the watcher process failed, exit {d.rc}: {last_line(d.stderr)})"}
    data["status"] = "measured" if not data.get("errors") else "measured, with errors"
    data["process_cpu_s_total"] = round(d.cpu_s, 2)
    return data
