"""``python -m bench``: inferbot against OpenSSH and Ansible, on simulated nodes and on cheap nodes up to 1,024.

1. **Simulated nodes** (``bench.cluster``): for each N of ``--nodes`` it starts N simulated vLLM nodes, each
   behind its own sshd on 127.0.0.2, 127.0.0.3, …, measures every contender asking the settings question
   with the same remote command, stops the cluster, and moves on. The nodes' own work (the probe's ~50–100
   forks) shares the cores with the client.
2. **Start-up**: ``inferbot --help`` and the Python interpreter's own start-up.
3. **Cheap nodes** (``bench.cheap``): sshd that answer with a recorded answer of the simulated Kimi node,
   so the client's own cost shows; one cluster with the largest N, inferbot warm and OpenSSH parallel mux
   at each N of ``--cheap-nodes`` (and the node side's cost), then the watcher at scale
   (``bench.watch_scale``: the scheduler's watch jobs polling ``--watch-nodes`` services every 15 s). The
   recording also measures the probe's CPU and forks on the simulated node (``bench.nodecost``).
4. The readiness-notice latency (when the restart/readiness feature is present).
5. Push against poll (issue 26, ``bench.push_latency``): the ✅, crash, unplanned-restart and exit-0 notices
   timed from the node's journal line, with the journal streams and with today's polls, one fresh bot each;
   and (with the watcher at scale) the idle leader with one journal stream per cheap node.

Then it judges the goals (issue 15's, and the earlier ones on simulated nodes), prints a table and writes
``bench/results/latest.{json,md,png}`` (plus timestamped copies; the PNG is the chart of wall time against N).

    python -m bench                            # the full run (~15–20 minutes on 2 cores)
    python -m bench --quick --skip-ansible     # smoke run (< 2 minutes): fewer N, fewer runs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import contenders as c
from bench import push_report, report, slack_report
from bench.common import QUESTION, REPO_ROOT, Manifest, command_digest, raise_nofile, summarize
from bench.machine import machine_info
from bench.push_latency import measure_push
from bench.readiness import measure_readiness

SEQ_BUDGET_S = 45.0  # OpenSSH sequential: runs stop once this much time is spent at one N (at least one run)
ANSIBLE_BUDGET_S = 90.0  # Ansible: likewise, after its first (connection-opening) run


def log(msg: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def cluster(n: int, start_timeout_s: float) -> Iterator[Manifest]:
    """A ``bench.cluster`` process with ``n`` nodes; stopped (and its workdir removed) on the way out."""
    with _cluster_process("bench.cluster", ["--nodes", str(n), "--configs", str(n)], start_timeout_s) as m:
        yield m


@contextlib.contextmanager
def cheap_cluster(n: int, config_ns: list[int], watch_ns: list[int], node_cost: bool,
                  start_timeout_s: float) -> Iterator[Manifest]:
    """A ``bench.cheap`` process with ``n`` cheap nodes and configs for ``config_ns`` (and ``watch_ns``)."""
    argv = ["--nodes", str(n), "--configs", ",".join(map(str, config_ns)),
            "--watch-configs", ",".join(map(str, watch_ns))] + (["--node-cost"] if node_cost else [])
    with _cluster_process("bench.cheap", argv, start_timeout_s) as m:
        yield m


@contextlib.contextmanager
def _cluster_process(module: str, argv: list[str], start_timeout_s: float) -> Iterator[Manifest]:
    """``python -m module … --workdir D --manifest D/manifest.json``; stopped (workdir removed) on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix="ibench-", dir="/tmp"))
    manifest_path = workdir / "manifest.json"
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    errlog = open(workdir.parent / f"{workdir.name}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *argv, "--workdir", str(workdir), "--manifest", str(manifest_path),
         "--start-timeout", str(start_timeout_s)],
        stdin=subprocess.PIPE, stdout=errlog, stderr=errlog, cwd=REPO_ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout_s + 30
        while not manifest_path.exists():
            if proc.poll() is not None:
                raise RuntimeError(f"the cluster process exited ({proc.returncode}): {_tail(errlog.name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not start within {start_timeout_s:g}s")
            time.sleep(0.1)
        yield Manifest.load(manifest_path)
    finally:
        _stop_cluster(proc)
        errlog.close()
        with contextlib.suppress(OSError):
            os.unlink(errlog.name)
        shutil.rmtree(workdir, ignore_errors=True)


def _tail(path: str) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text(errors="replace")[-1500:]
    return ""


def _stop_cluster(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the cluster tears down at EOF ...
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGTERM)  # ... or on SIGTERM
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _timed(what: str, fn: Callable[[], c.Result]) -> c.Result:
    log(f"  {what} …")
    t0 = time.monotonic()
    r = fn()
    ok = sum(1 for x in r.runs if x.error is None)
    state = r.unavailable or f"{ok}/{len(r.runs)} runs ok"
    log(f"  {what}: {state} ({time.monotonic() - t0:.1f}s)")
    return r


def budgeted(run_once: Callable[[], c.Result], max_runs: int, budget_s: float) -> c.Result:
    """Repeat a one-run contender until ``max_runs`` or until the next run would exceed ``budget_s``."""
    t0 = time.monotonic()
    first = run_once()
    while len(first.runs) < max_runs and not first.unavailable:
        spent = time.monotonic() - t0
        if spent + spent / len(first.runs) > budget_s:
            break
        first.runs.extend(run_once().runs)
    if len(first.runs) < max_runs:
        first.notes.append(f"{len(first.runs)} runs instead of {max_runs}: each takes "
                           f"{(time.monotonic() - t0) / max(1, len(first.runs)):.1f}s here, "
                           f"and this contender's time budget per N is {budget_s:g}s")
    return first


def run_n(n: int, args: argparse.Namespace, ansible: str | None, ansible_why: str,
          out: dict[str, Any]) -> list[c.Result]:
    """Every contender at one N."""
    log(f"N={n}: starting {n} simulated nodes behind {n} sshd …")
    results: list[c.Result] = []
    try:
        with cluster(n, args.start_timeout or 60 + 3 * n) as m:
            _measure_n(m, n, args, ansible, ansible_why, out, results)
    except RuntimeError as e:
        if results:
            raise
        log(f"N={n}: {e}")
        why = f"no cluster at N={n}: {str(e)[:200]}"
        return [c.Result(name, n, unavailable=why) for name in (report.WARM, report.COLD, report.MUX, report.SEQ,
                                                                   report.ANSIBLE)]
    return results


def _measure_n(m: Manifest, n: int, args: argparse.Namespace, ansible: str | None, ansible_why: str,
               out: dict[str, Any], results: list[c.Result]) -> None:
    """Every contender against the running cluster ``m`` (appends to ``results``)."""
    log(f"N={n}: cluster ready in {m.start_s:.1f}s")
    out["cluster_start_s"][n] = round(m.start_s, 1)
    cmds = c.settings_commands(m.configs[n])
    if not out.get("kex"):
        out["kex"] = c.key_exchanges(m)
    out["digests"][n] = command_digest(cmds)
    out["command_bytes"] = max(len(x) for x in cmds.values())
    sim = _timed("simulator cost", lambda: c.simulator_cost(m, cmds, runs=3))
    out["simulator"][n] = {"wall_ms": summarize([x.wall_s * 1000 for x in sim.runs]),
                           "cpu_ms": summarize([x.cpu_s * 1000 for x in sim.runs]), "runs": len(sim.runs),
                           "errors": [x.error for x in sim.runs if x.error][:2]}
    warm_runs = max(args.runs, 10) if n <= 8 and not args.quick else args.runs
    warm = _timed(f"inferbot warm ({warm_runs} questions)", lambda: c.inferbot_warm(m, n, warm_runs))
    results.append(warm)
    out["bot_digests"][n] = warm.extra.get("command_digest")
    results.append(_timed("inferbot cold", lambda: c.inferbot_cold(m, n, args.runs)))
    results.append(_timed("OpenSSH parallel mux", lambda: c.openssh_multiplexed(m, n, args.runs, cmds)))
    results.append(_timed("OpenSSH sequential", lambda: budgeted(
        lambda: c.openssh_sequential(m, n, 1, cmds), args.runs, SEQ_BUDGET_S)))
    if ansible is not None:
        results.append(_timed("Ansible ad-hoc", lambda: c.ansible_adhoc(m, n, args.runs, cmds, ansible,
                                                                   budget_s=ANSIBLE_BUDGET_S)))
    else:
        results.append(c.Result(report.ANSIBLE, n, unavailable=ansible_why))


def run_cheap(args: argparse.Namespace, out: dict[str, Any]) -> list[c.Result]:
    """inferbot warm and OpenSSH parallel mux at each N of ``--cheap-nodes``, then the watcher at scale."""
    ns = args.cheap_ns
    watch_ns = [args.watch_nodes] if not args.skip_watch else []
    biggest = max([*ns, *watch_ns])
    log(f"cheap nodes: recording the simulated node's answers, then {biggest} cheap nodes "
        f"({(biggest + 15) // 16} sshd) …")
    results: list[c.Result] = []
    try:
        with cheap_cluster(biggest, ns, watch_ns, node_cost=True, start_timeout_s=args.start_timeout or 240) as m:
            log(f"cheap nodes ready in {m.start_s:.1f}s (recording {m.recording.get('record_s')}s)")
            out["cheap"] = {"recording": m.recording, "node_side": m.node_side, "start_s": round(m.start_s, 1),
                            "per_n": {}}
            for n in ns:
                if not _cheap_n(m, n, args, out, results):
                    break
            if watch_ns:
                n = watch_ns[0]
                log(f"watcher at scale: {n} services every 15 s, {args.watch_intervals} intervals measured …")
                t0 = time.monotonic()
                out["watch"] = c.watcher_at_scale(m, n, args.watch_intervals)
                log(f"watcher: {out['watch'].get('cpu_percent_of_one_core')} % of one core "
                    f"({out['watch'].get('status')}, {time.monotonic() - t0:.0f}s)")
                if args.push != "skip":
                    _watch_push(args, m, n, out)
    except RuntimeError as e:
        log(f"cheap nodes: {e}")
        out.setdefault("cheap", {})["stopped"] = f"no cheap cluster: {str(e)[:300]}"
        done = {(r.contender, r.nodes) for r in results}
        results += [c.Result(name, n, unavailable=out["cheap"]["stopped"], cluster=report.CHEAP)
                    for n in ns for name in (report.WARM, report.MUX) if (name, n) not in done]
    return results


def _cheap_n(m: Manifest, n: int, args: argparse.Namespace, out: dict[str, Any], results: list[c.Result]) -> bool:
    """Both contenders at one N on cheap nodes; False when the machine cannot hold this N (stop here)."""
    free = _mem_available_mib()
    need = n * MIB_PER_CHEAP_NODE
    if free is not None and free < need:
        why = (f"stopped before N={n}: {free} MiB available, about {need} MiB needed "
               f"({MIB_PER_CHEAP_NODE} MiB per node: 2 sshd per connection, an OpenSSH master per node)")
        log(f"cheap nodes: {why}")
        out["cheap"]["stopped"] = why
        for name in (report.WARM, report.MUX):
            results.append(c.Result(name, n, unavailable=why, cluster=report.CHEAP))
        return False
    log(f"N={n} on cheap nodes:")
    cmds = c.settings_commands(m.configs[n])
    out["cheap_digests"][n] = command_digest(cmds)
    warm = _timed(f"inferbot warm ({args.cheap_runs} questions)",
                  lambda: c.inferbot_warm(m, n, args.cheap_runs, first_start=n == report.RSS_AT_N))
    results.append(warm)
    out["cheap_bot_digests"][n] = warm.extra.get("command_digest")
    mux = _timed("OpenSSH parallel mux", lambda: c.openssh_multiplexed(m, n, args.cheap_runs, cmds))
    results.append(mux)
    out["cheap"]["per_n"][n] = {"node_side": mux.extra.get("node_side"),
                                "masters": mux.extra.get("client_side_masters")}
    return True


# Measured PSS per node: ~2 MiB for its 2 sshd, ~1.4 MiB for its ssh master, ~0.4 MiB of the bot; twice that.
MIB_PER_CHEAP_NODE = 8


def _mem_available_mib() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def run_slack_path(args: argparse.Namespace) -> dict[str, Any]:
    """Issue 26's goals 5 and 6: the serving bot through a Slack stand-in on real-systemd answers (bench.slack_path)."""
    import asyncio

    from bench import slack_path

    log(f"Slack path: inferbot serve through a Slack stand-in, N = {args.slack_ns} (client CPU), "
        f"bursts of {args.people} at N = {args.burst_ns} …")
    t0 = time.monotonic()
    try:
        result = asyncio.run(slack_path.measure(args.slack_ns, args.burst_ns, args.slack_runs, args.people))
    except (RuntimeError, OSError, TimeoutError) as e:
        log(f"Slack path: {e}")
        return {"status": f"not measured: {str(e)[:300]}"}
    log(f"Slack path: done ({time.monotonic() - t0:.0f}s)")
    return result


QUICK = {"nodes": "1", "runs": 3, "cheap_nodes": "1,64,256", "cheap_runs": 2, "watch_intervals": 1,
         "slack_nodes": "1,64", "burst_nodes": "8", "slack_runs": 3, "push_samples": 2, "push_deaths": 1}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The benchmark's options."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="1,8,32,64", help="simulated nodes: comma-separated N (default 1,8,32,64)")
    p.add_argument("--runs", type=int, default=5, help="runs per contender per N (default 5)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: simulated N = 1, cheap N = 1,64,256, 3 / 2 runs, the watcher for one interval")
    p.add_argument("--skip-ansible", action="store_true", help="do not install or run Ansible")
    p.add_argument("--readiness", choices=["auto", "only", "skip"], default="auto",
                   help="readiness-notice latency: measure when the feature exists (auto), only that, or skip")
    p.add_argument("--start-timeout", type=float, default=0.0,
                   help="seconds allowed for a cluster to start (default 60 + 3 per node)")
    p.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/")
    p.add_argument("--cheap-nodes", default="1,64,256,512,1024",
                   help="cheap nodes (recorded answers): comma-separated N (default 1,64,256,512,1024)")
    p.add_argument("--cheap-runs", type=int, default=0, help="runs per contender per N on cheap nodes (default --runs)")
    p.add_argument("--skip-cheap", action="store_true", help="no cheap nodes (and no watcher at scale)")
    p.add_argument("--watch-nodes", type=int, default=512, help="services the watcher polls at scale (default 512)")
    p.add_argument("--watch-intervals", type=int, default=3, help="15 s intervals measured (default 3)")
    p.add_argument("--skip-watch", action="store_true", help="no watcher at scale")
    p.add_argument("--skip-slack", action="store_true", help="no Slack path (issue 26's goals 5 and 6)")
    p.add_argument("--slack-nodes", default="1,64,512", help="N for the Slack path's client CPU (default 1,64,512)")
    p.add_argument("--burst-nodes", default="8,64", help="N for the bursts through Slack (default 8,64)")
    p.add_argument("--slack-runs", type=int, default=6, help="questions per N and question on the Slack path")
    p.add_argument("--people", type=int, default=50, help="people asking at once in a burst (default 50)")
    p.add_argument("--push", choices=["auto", "only", "skip"], default="auto",
                   help="issue 26: push against poll (notice latencies; the idle leader with the journal streams "
                        "when the watcher runs): measure (auto), only the latencies, or skip")
    p.add_argument("--push-samples", type=int, default=4, help="readiness samples per contender (default 4)")
    p.add_argument("--push-deaths", type=int, default=2,
                   help="crash, unplanned-restart and exit-0 samples per contender (default 2)")
    p.add_argument("--push-watch-intervals", type=int, default=1,
                   help="safety intervals (2 min) the idle leader with the streams is measured (default 1)")
    p.add_argument("--name", default="latest", help="write bench/results/NAME.{json,md,png} (default latest)")
    p.add_argument("--banner", default="", help="words atop the report and the chart (e.g. why it is provisional)")
    args = p.parse_args(argv)
    if args.quick:
        defaults = {a.dest: a.default for a in p._actions}
        for k, v in QUICK.items():
            if getattr(args, k) == defaults[k]:  # what was given explicitly wins
                setattr(args, k, v)
    args.ns = sorted({int(x) for x in args.nodes.split(",") if x.strip()})
    if not args.ns or min(args.ns) < 1 or max(args.ns) > 250:
        p.error("--nodes must be between 1 and 250")
    args.cheap_ns = [] if args.skip_cheap else sorted({int(x) for x in args.cheap_nodes.split(",") if x.strip()})
    if args.cheap_ns and (min(args.cheap_ns) < 1 or max(args.cheap_ns) > 4096):
        p.error("--cheap-nodes must be between 1 and 4096")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    args.cheap_runs = args.cheap_runs or args.runs
    args.slack_ns = sorted({int(x) for x in args.slack_nodes.split(",") if x.strip()})
    args.burst_ns = sorted({int(x) for x in args.burst_nodes.split(",") if x.strip()})
    args.skip_watch = args.skip_watch or args.skip_cheap
    if not args.skip_watch and not 1 <= args.watch_nodes <= 4096:
        p.error("--watch-nodes must be between 1 and 4096")
    return args


@dataclass
class _Measured:
    """What one run measured, before it is judged."""

    out: dict[str, Any]  # digests, cluster start-up, the simulator's and the cheap nodes' cost, the watcher
    results: list[c.Result]
    startup: dict[str, Any]
    slack_path: dict[str, Any]
    readiness: dict[str, Any]
    push: dict[str, Any]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its report."""
    args = parse_args(argv)
    raise_nofile()  # OpenSSH's contender holds two files per ssh process, up to 1,024 at once
    started = time.monotonic()
    start_stamp = datetime.now(UTC).isoformat(timespec="seconds")
    ansible, ansible_version, ansible_why = _ansible(args)
    machine = machine_info(ansible_version)
    measured = _measure(args, ansible, ansible_why)
    rep = _report(args, machine, measured, start_stamp, started)
    print(report.terminal(rep))
    _finish(args, rep)
    return 0


def _ansible(args: argparse.Namespace) -> tuple[str | None, str | None, str]:
    """Ansible's executable and version (installed on demand), or None, None and why it is not a contender."""
    if args.skip_ansible or _only(args):
        return None, None, "skipped (--skip-ansible)"
    log(f"Ansible: using {c.ANSIBLE_VENV} (created on demand) …")
    ansible, version = c.ensure_ansible()
    if ansible is None:
        log(f"Ansible unavailable: {version}")
        return None, None, version
    return ansible, version, "skipped (--skip-ansible)"


def _measure(args: argparse.Namespace, ansible: str | None, ansible_why: str) -> _Measured:
    """Every measurement the options ask for: the contenders, the Slack path, the readiness notice."""
    out: dict[str, Any] = {"cluster_start_s": {}, "digests": {}, "bot_digests": {}, "simulator": {},
                           "command_bytes": 0, "cheap_digests": {}, "cheap_bot_digests": {}}
    results: list[c.Result] = []
    startup: dict[str, Any] = {}
    if not _only(args):
        results, startup = _contenders(args, ansible, ansible_why, out)
    slack = _slack_path_if_asked(args)
    readiness = _readiness_if_asked(args)
    return _Measured(out, results, startup, slack, readiness, _push_if_asked(args))


def _only(args: argparse.Namespace) -> bool:
    """Only the readiness latency, or only push against poll, was asked for."""
    return bool(args.readiness == "only" or args.push == "only")


def _watch_push(args: argparse.Namespace, m: Manifest, n: int, out: dict[str, Any]) -> None:
    """The idle leader with a journal stream per cheap node (issue 26), beside the polls just measured."""
    log(f"watcher with the journal streams: {n} services, idle, {args.push_watch_intervals} "
        "safety interval(s) measured …")
    t0 = time.monotonic()
    out["watch_push"] = c.watcher_at_scale(m, n, args.push_watch_intervals, push=True)
    log(f"watcher with push: {out['watch_push'].get('cpu_percent_of_one_core')} % of one core "
        f"({out['watch_push'].get('status')}, {time.monotonic() - t0:.0f}s)")


def _push_if_asked(args: argparse.Namespace) -> dict[str, Any]:
    """Push against poll: the notices' latencies (issue 26), or why they were skipped."""
    if args.push == "skip" or args.readiness == "only":
        return {"status": "skipped (--push skip)"}
    log("push against poll: notice latencies (issue 26) …")
    push = measure_push(args.push_samples, args.push_deaths)
    log(f"push: {push.get('status')}")
    return push


def _contenders(args: argparse.Namespace, ansible: str | None, ansible_why: str,
                out: dict[str, Any]) -> tuple[list[c.Result], dict[str, Any]]:
    """Every contender at each simulated N, the start-up, then the cheap nodes and the watcher at scale."""
    results: list[c.Result] = []
    for n in args.ns:
        results += run_n(n, args, ansible, ansible_why, out)
    log("start-up: inferbot --help …")
    startup = c.startup(args.runs)
    if args.cheap_ns or not args.skip_watch:
        results += run_cheap(args, out)
    return results, startup


def _slack_path_if_asked(args: argparse.Namespace) -> dict[str, Any]:
    """The Slack path's measurements, or why they were skipped."""
    if args.skip_slack or _only(args):
        return {"status": "skipped (--skip-slack)"}
    return run_slack_path(args)


def _readiness_if_asked(args: argparse.Namespace) -> dict[str, Any]:
    """The readiness-notice latency, or why it was skipped."""
    if args.readiness == "skip" or args.push == "only":
        return {"status": "skipped (--readiness skip)"}
    log("readiness-notice latency …")
    readiness = measure_readiness(samples=1 if args.quick else 3)
    log(f"readiness: {readiness.get('status')}")
    return readiness


def _report(args: argparse.Namespace, machine: dict[str, Any], m: _Measured, start_stamp: str,
            started: float) -> dict[str, Any]:
    """The run's report: options, machine, the goals judged, the results and the notes to read them by."""
    rows = [report.result_row(r) for r in m.results]
    report.add_ratios(rows)
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    cheap = m.out.get("cheap", {})
    watch = m.out.get("watch", {"status": "skipped"})
    rep: dict[str, Any] = {
        "schema": 2, "started_at": start_stamp, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1), "question": QUESTION,
        "banner": _banner(args, machine),
        "options": _options(args),
        "machine": machine,
        "key_exchange": m.out.get("kex", {}),
        "remote_command": _remote_command(m.out),
        "cluster_start_s": m.out["cluster_start_s"],
        "goals": report.goals(rows, args.cheap_ns, m.startup, cheap.get("recording", {}).get("node_cost", {}), watch),
        "goals_26": slack_report.goals(m.slack_path),
        "slack_path": m.slack_path,
        "earlier_goals": report.earlier_goals(rows, args.ns, m.readiness),
        "results": rows,
        "inferbot": _inferbot_connections(m.results),
        "simulator": m.out["simulator"],
        "cheap": cheap,
        "watch": watch,
        "startup": m.startup,
        "readiness": m.readiness,
        "push_goals": push_report.push_goals(m.push, m.out.get("watch_push", {"status": "skipped"}), watch),
        "push": m.push,
        "watch_push": m.out.get("watch_push", {"status": "skipped"}),
        "notes": _notes(machine),
    }
    rep["table"] = report.table_rows(rows)
    return rep


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The options the run was made with, as the report records them."""
    return {"nodes": args.ns, "runs": args.runs, "quick": args.quick, "skip_ansible": args.skip_ansible,
            "readiness": args.readiness, "cheap_nodes": args.cheap_ns, "cheap_runs": args.cheap_runs,
            "watch_nodes": None if args.skip_watch else args.watch_nodes, "watch_intervals": args.watch_intervals,
            "push": args.push, "push_samples": args.push_samples, "push_deaths": args.push_deaths,
            "push_watch_intervals": args.push_watch_intervals}


def _remote_command(out: dict[str, Any]) -> dict[str, Any]:
    """The remote command's size and digests, and whether the bot sent the same at every N, on both kinds of nodes."""
    same = all(out["digests"].get(n) == out["bot_digests"].get(n) for n in out["digests"])
    same_cheap = all(out["cheap_digests"].get(n) == out["cheap_bot_digests"].get(n) for n in out["cheap_digests"])
    return {"bytes": out["command_bytes"], "digests": out["digests"], "same_as_bot": same and same_cheap,
            "cheap_digests": out["cheap_digests"]}


def _inferbot_connections(results: list[c.Result]) -> dict[str, Any]:
    """inferbot warm's SSH round trips per node per question and connections opened, per nodes kind and N."""
    inferbot = {}
    for r in results:
        if r.contender == report.WARM and r.runs:
            rtn = r.extra.get("round_trips_per_node", [])
            inferbot[f"{r.cluster}-{r.nodes}"] = {
                "round_trips_per_node": max(rtn) if rtn else None,
                "all_questions_exactly_1": bool(rtn) and all(x == 1.0 for x in rtn),
                "connects": r.extra.get("connects"), "nodes": r.nodes, "cluster": r.cluster}
    return inferbot


def _busy(machine: dict[str, Any]) -> bool:
    """Whether the machine's load average at the start was above its core count."""
    return bool(machine["load_average_at_start"][0] > (machine["cores"] or 1))


def _banner(args: argparse.Namespace, machine: dict[str, Any]) -> str | None:
    """The words atop the report and the chart: ``--banner``, a smoke run, a busy machine; None when none apply."""
    banner = [args.banner] if args.banner else []
    if args.quick:
        banner.append("smoke run (--quick): fewer N and runs, not for comparisons")
    if _busy(machine):
        banner.append(f"noisy machine: load average {machine['load_average_at_start'][0]} at the start on "
                      f"{machine['cores']} cores")
    return "; ".join(banner) or None


def _notes(machine: dict[str, Any]) -> list[str]:
    """How to read the results: what each number is and how each contender was run (and a busy machine)."""
    notes = [
        "wall = one question, from the start of the contender's first process (or answer() call) to the last "
        "byte of every node's answer; ×warm / ×cold = this median ÷ inferbot warm's / cold's median at the same N "
        "on the same kind of nodes",
        "client CPU = user+sys of every client-side process per question (wait4 rusage; OpenSSH mux masters "
        "from /proc), divided by N; the warm client's is its own getrusage delta around answer()",
        report.RSS_CAVEAT,
        "inferbot warm: one long-lived process (bench/warm_client.py) with runtime(config); one warm-up question "
        "opens the connections and is not counted; each question is answered as the Slack front end answers it "
        "(the Slack surface, then rendered into the messages it posts: its wall is reported apart, as render_s); "
        "peak RSS is its VmHWM with every module `inferbot serve` imports imported and started as serve starts "
        "(bot.replicas.open_leadership), its state database created beforehand by a child process, as a "
        "restarted bot finds it (at the RSS goal's N, one more run on a new database gives the first start's "
        "peak: a helper process creates the schema); its client CPU is that of answer(), the render's is "
        "reported apart",
        "inferbot cold: `inferbot ask \"…\" --json --config FILE`, whole process (Python start-up, imports, "
        "new SSH connections, SQLite store), the project's modules byte-compiled first as an installed copy has "
        "them (pip compiles on install); peak RSS from wait4; the one-shot `ssh` it is compared with is "
        "OpenSSH sequential at N = 1 (a new connection, the same remote command)",
        "each client uses its default key exchange with the simulated nodes' sshd (see key_exchange: OpenSSH "
        "9.2's sntrup761x25519 costs about 0.1 s of CPU per handshake on this machine; it weighs on every new "
        "connection: OpenSSH sequential, inferbot cold, Ansible's first run) — this is part of what is compared",
        "simulated nodes: all nodes, their sshd and the client share this machine's cores, so at large N the "
        "nodes' own work (see the simulator's cost) competes with the client and bounds every contender's wall",
        "cheap nodes (bench/cheap.py) replay one recorded answer of the simulated Kimi node through real sshd, "
        "so the client's own cost shows; their sshd offer curve25519 only (connection set-up is not measured "
        "there: every contender is warm). Every cheap node gives the same bytes every time: the client's caches "
        "keyed on text (parsed argv, unit file, bench files) hit as they would on a homogeneous fleet whose "
        "settings did not change; a cache keyed on a whole answer would be flattered here, not on the "
        "simulated nodes, whose answers differ per node and over time",
        f"OpenSSH sequential and Ansible stop repeating at a time budget per N ({SEQ_BUDGET_S:g}s / "
        f"{ANSIBLE_BUDGET_S:g}s); where that meant fewer runs than asked, the contender's notes say so",
    ]
    if _busy(machine):
        notes.append(f"the machine was busy with other work when the run started (load average "
                     f"{machine['load_average_at_start']}): wall times are noisier and higher than on an idle box")
    return notes


def _finish(args: argparse.Namespace, rep: dict[str, Any]) -> None:
    """Write ``bench/results/NAME.*`` unless ``--no-write``, and say how long the run took."""
    if not args.no_write:
        js, md = report.write(rep, args.name)
        log(f"wrote {js.relative_to(REPO_ROOT)} and {md.relative_to(REPO_ROOT)} ({rep['duration_s']:.0f}s in all)")
    else:
        log(f"done in {rep['duration_s']:.0f}s")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench: interrupted (the cluster was stopped)", file=sys.stderr)
        sys.exit(130)
