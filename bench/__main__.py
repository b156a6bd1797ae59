"""``python -m bench``: inferbot against OpenSSH and Ansible on 1, 8, 32 and 64 simulated nodes.

For each N it starts a cluster process (``bench.cluster``: N simulated vLLM nodes, each behind its own
sshd on 127.0.0.2, 127.0.0.3, …), measures every contender asking the settings question with the same
remote command, stops the cluster, and moves on. Then it measures the readiness-notice latency (when the
restart/readiness feature is present), judges the issue's goals, prints a table and writes
``bench/results/latest.{json,md}`` (plus timestamped copies).

    python -m bench                      # the full run: N = 1,8,32,64, 5 runs
    python -m bench --quick --skip-ansible   # smoke run: N = 1,8, 3 runs
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import contenders as c
from bench import report
from bench.common import QUESTION, REPO_ROOT, Manifest, command_digest, summarize
from bench.machine import machine_info
from bench.readiness import measure_readiness

SEQ_BUDGET_S = 45.0  # OpenSSH sequential: runs stop once this much time is spent at one N (at least one run)
ANSIBLE_BUDGET_S = 90.0  # Ansible: likewise, after its first (connection-opening) run


def log(msg: str) -> None:
    """Progress on stderr (the table goes to stdout)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def cluster(n: int, start_timeout_s: float) -> Iterator[Manifest]:
    """A ``bench.cluster`` process with ``n`` nodes; stopped (and its workdir removed) on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix="ibench-", dir="/tmp"))
    manifest_path = workdir / "manifest.json"
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT)}
    errlog = open(workdir.parent / f"{workdir.name}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cluster", "--nodes", str(n), "--configs", str(n), "--workdir", str(workdir),
         "--manifest", str(manifest_path), "--start-timeout", str(start_timeout_s)],
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The benchmark's options."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", default="1,8,32,64", help="comma-separated N (default 1,8,32,64)")
    p.add_argument("--runs", type=int, default=5, help="runs per contender per N (default 5)")
    p.add_argument("--quick", action="store_true", help="smoke run: N = 1,8 and 3 runs")
    p.add_argument("--skip-ansible", action="store_true", help="do not install or run Ansible")
    p.add_argument("--readiness", choices=["auto", "only", "skip"], default="auto",
                   help="readiness-notice latency: measure when the feature exists (auto), only that, or skip")
    p.add_argument("--start-timeout", type=float, default=0.0,
                   help="seconds allowed for a cluster to start (default 60 + 3 per node)")
    p.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/")
    args = p.parse_args(argv)
    if args.quick:
        args.nodes, args.runs = "1,8", 3
    args.ns = sorted({int(x) for x in args.nodes.split(",") if x.strip()})
    if not args.ns or min(args.ns) < 1 or max(args.ns) > 250:
        p.error("--nodes must be between 1 and 250")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its report."""
    args = parse_args(argv)
    started = time.monotonic()
    start_stamp = datetime.now(UTC).isoformat(timespec="seconds")
    ansible: str | None = None
    ansible_version: str | None = None
    ansible_why = "skipped (--skip-ansible)"
    if not args.skip_ansible and args.readiness != "only":
        log(f"Ansible: using {c.ANSIBLE_VENV} (created on demand) …")
        ansible, ansible_version = c.ensure_ansible()
        if ansible is None:
            ansible_why, ansible_version = ansible_version, None
            log(f"Ansible unavailable: {ansible_why}")
    machine = machine_info(ansible_version)
    out: dict[str, Any] = {"cluster_start_s": {}, "digests": {}, "bot_digests": {}, "simulator": {},
                           "command_bytes": 0}
    results: list[c.Result] = []
    if args.readiness != "only":
        for n in args.ns:
            results += run_n(n, args, ansible, ansible_why, out)
    readiness: dict[str, Any] = {"status": "skipped (--readiness skip)"}
    if args.readiness != "skip":
        log("readiness-notice latency …")
        readiness = measure_readiness(samples=1 if args.quick else 3)
        log(f"readiness: {readiness.get('status')}")
    rows = [report.result_row(r) for r in results]
    report.add_ratios(rows)
    same = all(out["digests"].get(n) == out["bot_digests"].get(n) for n in out["digests"])
    inferbot = {}
    for r in results:
        if r.contender == report.WARM and r.runs:
            rtn = r.extra.get("round_trips_per_node", [])
            inferbot[r.nodes] = {"round_trips_per_node": max(rtn) if rtn else None,
                                 "all_questions_exactly_1": bool(rtn) and all(x == 1.0 for x in rtn),
                                 "connects": r.extra.get("connects"), "nodes": r.nodes}
    machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    notes = [
        "wall = one question, from the start of the contender's first process (or answer() call) to the last "
        "byte of every node's answer; ×warm / ×cold = this median ÷ inferbot warm's / cold's median at the same N",
        "client CPU = user+sys of every client-side process per question (wait4 rusage; OpenSSH mux masters "
        "from /proc), divided by N; the warm client's is its own getrusage delta around answer()",
        report.RSS_CAVEAT,
        "inferbot warm: one long-lived process (bench/warm_client.py) with runtime(config); one warm-up question "
        "opens the connections and is not counted; peak RSS is its VmHWM with the Slack front end imported",
        "inferbot cold: `inferbot ask \"…\" --json --config FILE`, whole process (Python start-up, imports, "
        "new SSH connections, SQLite store); peak RSS from wait4",
        "each client uses its default key exchange with these sshd (see key_exchange: OpenSSH 9.2's "
        "sntrup761x25519 costs about 0.1 s of CPU per handshake on this machine; it weighs on every new "
        "connection: OpenSSH sequential, inferbot cold, Ansible's first run) — this is part of what is compared",
        "all nodes, their sshd and the client share this machine's cores, so at large N the nodes' own work (see "
        "the simulator's cost) competes with the client and bounds every contender's wall time",
        f"OpenSSH sequential and Ansible stop repeating at a time budget per N ({SEQ_BUDGET_S:g}s / "
        f"{ANSIBLE_BUDGET_S:g}s); where that meant fewer runs than asked, the contender's notes say so",
    ]
    if machine["load_average_at_start"][0] > (machine["cores"] or 1):
        notes.append(f"the machine was busy with other work when the run started (load average "
                     f"{machine['load_average_at_start']}): wall times are noisier and higher than on an idle box")
    rep: dict[str, Any] = {
        "schema": 1, "started_at": start_stamp, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1), "question": QUESTION,
        "options": {"nodes": args.ns, "runs": args.runs, "quick": args.quick, "skip_ansible": args.skip_ansible,
                    "readiness": args.readiness},
        "machine": machine,
        "key_exchange": out.get("kex", {}),
        "remote_command": {"bytes": out["command_bytes"], "digests": out["digests"], "same_as_bot": same},
        "cluster_start_s": out["cluster_start_s"],
        "goals": report.goals(rows, args.ns, readiness),
        "results": rows,
        "inferbot": inferbot,
        "simulator": out["simulator"],
        "readiness": readiness,
        "notes": notes,
    }
    rep["table"] = report.table_rows(rows)
    print(report.terminal(rep))
    if not args.no_write:
        js, md = report.write(rep)
        log(f"wrote {js.relative_to(REPO_ROOT)} and {md.relative_to(REPO_ROOT)} ({rep['duration_s']:.0f}s in all)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench: interrupted (the cluster was stopped)", file=sys.stderr)
        sys.exit(130)
