"""Replicas on PostgreSQL: how fast a standby takes over, and what the shared database costs per question.

    python -m bench.failover [--rounds 3] [--questions 200] [--json PATH]

Needs Debian's PostgreSQL binaries (``apt-get install postgresql``); a throw-away server is started in a
temporary directory on 127.0.0.1 (``tests/pg.py``; as root it runs as the ``inferbot-test`` user).

**Failover.** Two replica processes run the real scheduler (``bot.scheduler.BotScheduler``) with the real
leader election (``services.store.leader.PgLeader``) on one database. The leader is SIGKILLed; measured is the
time from the kill to the first scheduled job the new leader runs (``BotScheduler.first_job_at``, set by the
job wrapper itself), and to its election. The killed replica is started again as a standby, and the next
round kills the new leader. Goal: ≤ 15 s (issue 12).

**Per question.** What a replica adds to every question on the Slack path: the event de-dup claim and the
rate-limit check (``services.store.shared_state``), and one settings snapshot written (the store memoises unchanged
settings for 30 s, so this is the worst case), each timed over ``--questions`` rounds, on SQLite (one file,
WAL) and on the PostgreSQL server, both on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT

GOAL_S = 15.0


# -- one replica (a child process) --------------------------------------------------------------------------


async def _replica(url: str) -> None:
    from bot.app import runtime
    from bot.scheduler import BotScheduler
    from config.models import BotConfig, StateSettings
    from handlers.notify import RecordingNotifier
    from services.store.leader import PgLeader

    os.environ.setdefault("INFERBOT_DB_PASSWORD", os.environ.get("BENCH_DB_PASSWORD", ""))
    config = BotConfig(state=StateSettings(url=url))
    async with runtime(config) as rt:
        assert rt.store is not None
        await rt.store.prepare()
        sched = BotScheduler()
        leader = PgLeader(rt.store.sqlalchemy_url)
        await sched.start(rt.with_ports(notifier=RecordingNotifier(), jobs=sched), watch=False, leadership=leader)
        print(json.dumps({"event": "ready", "t": time.time()}), flush=True)
        said: set[str] = set()
        while True:
            if leader.elected_at is not None and "elected" not in said:
                said.add("elected")
                print(json.dumps({"event": "elected", "t": leader.elected_at}), flush=True)
            if sched.first_job_at is not None and "job" not in said:
                said.add("job")
                print(json.dumps({"event": "first_job", "t": sched.first_job_at}), flush=True)
            await asyncio.sleep(0.02)


class Replica:
    def __init__(self, url: str, password: str) -> None:
        env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "BENCH_DB_PASSWORD": password,
                            "INFERBOT_LOG_LEVEL": "WARNING"}
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.failover", "--replica", url], cwd=REPO_ROOT,
                                     env=env, stdout=subprocess.PIPE, text=True)
        self.events: dict[str, float] = {}

    async def wait(self, event: str, within: float) -> float:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + within
        while event not in self.events:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"replica did not report {event!r} within {within} s")
            line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), within)
            if line:
                msg = json.loads(line)
                self.events[msg["event"]] = float(msg["t"])
        return self.events[event]

    def kill(self) -> float:
        self.proc.send_signal(signal.SIGKILL)
        t = time.time()
        self.proc.wait(10)
        return t

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


async def measure_failover(url: str, password: str, rounds: int) -> dict[str, Any]:
    """Kill the leader ``rounds`` times; seconds from each kill to the new leader's election and first job."""
    replicas = [Replica(url, password)]
    await replicas[0].wait("first_job", 60)
    leader = replicas[0]
    standby = Replica(url, password)
    await standby.wait("ready", 60)
    to_job: list[float] = []
    to_elect: list[float] = []
    try:
        for _ in range(rounds):
            # The standby tries the lock once per poll: kill at a random point of its cycle.
            await asyncio.sleep(2.0 + random.uniform(0, 1))
            killed = leader.kill()
            job = await standby.wait("first_job", GOAL_S * 3)
            to_job.append(job - killed)
            to_elect.append(standby.events["elected"] - killed)
            leader, standby = standby, Replica(url, password)
            await standby.wait("ready", 60)
    finally:
        leader.stop()
        standby.stop()
    return {"rounds": rounds, "kill_to_first_job_s": to_job, "kill_to_elected_s": to_elect,
            "max_s": max(to_job), "median_s": statistics.median(to_job), "goal_s": GOAL_S,
            "met": max(to_job) <= GOAL_S}


# -- what the shared store costs per question ---------------------------------------------------------------------


async def _timed(n: int, step: Callable[[int], Awaitable[object]]) -> dict[str, float]:
    times: list[float] = []
    for i in range(n):
        t = time.perf_counter()
        await step(i)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * 0.95) - 1], 3)}


async def measure_per_question(url: str, questions: int) -> dict[str, dict[str, float]]:
    """Median and p95 milliseconds of each store step a replica does per question."""
    from services.models import ServiceState
    from services.store.store import Store

    store = Store(url)
    await store.prepare()
    now = datetime.now(UTC)
    base = {"service": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service", "state": "ready", "model": "m",
            "env": {}, "version": "0.11.0", "settings_source": "process"}
    try:
        out = {
            "event_dedupe": await _timed(questions, lambda i: store.shared.claim_event(f"Ev{i}", now)),
            "rate_limit": await _timed(questions, lambda i: store.shared.rate_check(f"U{i % 20}", 10)),
            "snapshot_write": await _timed(questions, lambda i: store.snapshots.record(
                ServiceState(**base, flags={"max-model-len": str(i)}), now)),
        }
        out["replica_total"] = {k: round(out["event_dedupe"][k] + out["rate_limit"][k], 3)
                                for k in ("median_ms", "p95_ms")}
        return out
    finally:
        await store.close()


async def run(rounds: int, questions: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO_ROOT))
    from tests.pg import PASSWORD, running_server
    from tests.pg import unavailable as pg_unavailable

    why = pg_unavailable()
    if why is not None:
        raise SystemExit(f"bench.failover: {why}")
    with running_server() as server, tempfile.TemporaryDirectory() as tmp:
        failover_db, pq_db = server.database(), server.database()
        failover = await measure_failover(server.config_url(failover_db), PASSWORD, rounds)
        per_q = {"sqlite": await measure_per_question(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", questions),
                 "postgresql": await measure_per_question(server.url(pq_db), questions)}
    return {"failover": failover, "per_question": per_q, "questions": questions}


def report(result: dict[str, Any]) -> str:
    f = result["failover"]
    lines = [f"failover (SIGKILL of the leader → first job run by the new leader), {f['rounds']} rounds:",
             "  " + ", ".join(f"{s:.2f} s" for s in f["kill_to_first_job_s"])
             + f"  (median {f['median_s']:.2f} s, max {f['max_s']:.2f} s; goal ≤ {f['goal_s']:.0f} s: "
             + ("met" if f["met"] else "NOT met") + ")",
             "  elected after: " + ", ".join(f"{s:.2f} s" for s in f["kill_to_elected_s"]),
             f"per question, median / p95 over {result['questions']} rounds (ms):",
             f"  {'step':<16}{'SQLite':>18}{'PostgreSQL':>18}"]
    for step in ("event_dedupe", "rate_limit", "replica_total", "snapshot_write"):
        s, p = result["per_question"]["sqlite"][step], result["per_question"]["postgresql"][step]
        lines.append(f"  {step:<16}{s['median_ms']:>9.2f} / {s['p95_ms']:<6.2f}{p['median_ms']:>9.2f} / "
                     f"{p['p95_ms']:<6.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--replica", help=argparse.SUPPRESS)  # internal: run one replica on this URL
    args = parser.parse_args(argv)
    if args.replica:
        asyncio.run(_replica(args.replica))
        return 0
    result = asyncio.run(run(args.rounds, args.questions))
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
