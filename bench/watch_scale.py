"""The watcher at scale: the bot's CPU while its scheduler polls N services every ``[watch] interval``.

    python -m bench.watch_scale --config FILE --intervals 3 [--profile FILE]

Runs the real job path in its own process: ``runtime(config)`` (pool, cluster, SQLite store), the Slack front
end's modules imported (as in ``inferbot serve``), and ``bot.scheduler.BotScheduler`` with its job store in
the bot's database, which adds one ``watch:<node>`` job per node (``bot.jobs.watch_node_job`` →
``handlers.health_watch.watch`` → ``handlers.watcher.watch_node``) plus its ``reconcile`` job. Notices go to
a ``RecordingNotifier`` (there should be none: the nodes' answers do not change).

The leader asks each node on one persistent session (``NodePool.ask``; the cheap nodes of ``bench.cheap``
serve it): opened in the first round, then a newline and an answer per poll; ``window_session_opens`` says
how many were opened in the window (0 when none failed). The first round (connections and sessions opened,
baselines written) is not counted. Then this process's CPU
(``getrusage``: every thread) is read at the start and the end of a window of exactly ``--intervals``
intervals, so the window holds that many rounds whatever their phase: CPU % of one core = CPU ÷ window.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import logging
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from bench.common import raise_nofile, read_vm_hwm_kib, summarize
from bench.warm_client import _import_front_end
from bot import jobs
from bot.app import runtime
from bot.push import Push
from bot.scheduler import BotScheduler
from config.loader import load_config
from config.models import Node, Service
from handlers.notify import RecordingNotifier
from services.cluster import NodeReport
from services.models import ServiceState
from services.node.probe import NodeRaw, ProbeOptions


class ProbeNode(Protocol):
    """``Cluster.probe_node`` as the watcher calls it."""

    def __call__(self, node: Node, services: Sequence[Service], options: ProbeOptions, keep_raw: bool = True
                 ) -> Awaitable[tuple[NodeReport, list[ServiceState], NodeRaw | None]]: ...


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _sys_s() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


class _PollCounter:
    """Counts the watcher's polls (ok / failed, the first few failures) and marks the end of the first round."""

    def __init__(self, n: int, real_probe: ProbeNode) -> None:
        self.n = n
        self.real_probe = real_probe
        self.polls = {"ok": 0, "failed": 0}
        self.failures: list[str] = []
        self.first_round = asyncio.Event()

    @property
    def total(self) -> int:
        """Polls counted so far, answered or not."""
        return self.polls["ok"] + self.polls["failed"]

    async def probe(self, node: Node, services: Sequence[Service], options: ProbeOptions,
                    keep_raw: bool = True) -> tuple[NodeReport, list[ServiceState], NodeRaw | None]:
        """The cluster's own probe, counted."""
        report, states, raw = await self.real_probe(node, services, options, keep_raw=keep_raw)
        if report.ok and all(s.state != "unreachable" for s in states):
            self.polls["ok"] += 1
        else:
            self.polls["failed"] += 1
            if report.error is not None and len(self.failures) < 5:
                self.failures.append(f"{node.name}: {report.error.reason}")
        if self.total >= self.n:
            self.first_round.set()
        return report, states, raw


def _stream_opens(streams: Push | None) -> int:
    return 0 if streams is None else sum(j.opens for j in streams.journals.values())


def _streams_open(streams: Push | None) -> int:
    return 0 if streams is None else sum(j.connected for j in streams.journals.values())


async def _first_round(sched: BotScheduler, counter: _PollCounter, limit_s: float, push: bool,
                       out: dict[str, Any]) -> int:
    """Wait out the first round (connections, sessions and, with push, the journal streams opened); the
    stream opens so far."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(counter.first_round.wait(), limit_s)
    live = jobs.current()
    if live is not None:
        # The first round's jobs go on after their probe answered (the watcher's first reads of its
        # baselines, memos and last samples from the database, once per service): they end before the
        # window opens, so it holds steady polls only.
        await live.drain(limit_s)
    if not push:
        return 0
    streams = sched.push
    await _until(lambda: streams is not None and all(j.connected for j in streams.journals.values()), limit_s)
    out["streams_open"] = _streams_open(streams)
    return _stream_opens(streams)


async def _window(seconds: float, profile_path: str | None) -> tuple[float, float, float]:
    """Sleep through the measured window (profiled when asked): its wall, CPU and system CPU seconds."""
    prof = cProfile.Profile() if profile_path else None
    c1, t1, k1 = _cpu_s(), time.monotonic(), _sys_s()
    if prof is not None:
        prof.enable()
    await asyncio.sleep(seconds)
    if prof is not None:
        prof.disable()
    c2, t2, k2 = _cpu_s(), time.monotonic(), _sys_s()
    if prof is not None and profile_path is not None:
        prof.dump_stats(profile_path)
    return t2 - t1, c2 - c1, k2 - k1


async def _push_figures(streams: Push | None, opens_before: int, config_path: str) -> dict[str, Any]:
    """The journal streams over the window, and the nodes' side of them."""
    return {"window_stream_opens": _stream_opens(streams) - opens_before,
            "streams_open_at_end": _streams_open(streams),
            "silent_restarts": 0 if streams is None else streams.silent_restarts,
            "node_side": await asyncio.to_thread(node_streams, config_path)}


async def measure(config_path: str, intervals: int, first_round_limit_s: float,
                  profile_path: str | None = None) -> dict[str, Any]:
    """Start the scheduler's watchers, let one round pass, then measure ``intervals`` intervals."""
    config = load_config(config_path)
    n = len({s.node for s in config.services})
    push = config.watch.push
    # With the journal streams the poll of a node whose stream is up runs every safety_interval: the window
    # holds whole rounds of those (and the 15 s jobs that find nothing due in between).
    interval = float(config.watch.safety_interval if push else config.watch.interval)
    out: dict[str, Any] = {"nodes": n, "services": len(config.services), "interval_s": interval,
                           "intervals": intervals, "push": push, "errors": []}
    out["slack_front_end_imported"] = _import_front_end()
    async with runtime(config) as rt:
        counter = _PollCounter(n, rt.cluster.probe_node)
        rt.cluster.probe_node = counter.probe  # type: ignore[method-assign,assignment]  # counts, then does the real work
        notifier = RecordingNotifier()
        sched = BotScheduler()
        c0, t0 = _cpu_s(), time.monotonic()
        await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=True)
        opens_before = await _first_round(sched, counter, first_round_limit_s, push, out)
        out["first_round_s"] = round(time.monotonic() - t0, 2)
        out["first_round_cpu_s"] = round(_cpu_s() - c0, 2)
        out["first_round_polls"] = dict(counter.polls)
        if counter.total < n:
            out["errors"].append(f"the first round did not finish within {first_round_limit_s:g}s")
        before = dict(counter.polls)
        opens0 = rt.pool.session_opens
        wall, cpu, sys_cpu = await _window(intervals * interval, profile_path)
        window_opens = rt.pool.session_opens - opens0
        window_polls = {k: counter.polls[k] - before[k] for k in counter.polls}
        if push:
            out.update(await _push_figures(sched.push, opens_before, config_path))
        await sched.shutdown()
        out.update(
            window_s=round(wall, 2), window_cpu_s=round(cpu, 3), window_sys_s=round(sys_cpu, 3),
            cpu_percent_of_one_core=round(100 * cpu / wall, 2),
            window_polls=window_polls, expected_polls=intervals * n,
            cpu_ms_per_poll=round(1000 * cpu / max(1, sum(window_polls.values())), 2),
            notices=len(notifier.posts),
            connects=rt.pool.connects, failures=counter.failures,
            # The leader polls on one persistent session per node: opened in the first round, then one
            # newline and one answer per poll (no channel opened in the window).
            session_opens=rt.pool.session_opens, window_session_opens=window_opens,
        )
        out["errors"].extend(_window_errors(window_polls, intervals * n, counter.failures))
    out["peak_rss_kib"] = read_vm_hwm_kib()
    return out


def _window_errors(window_polls: dict[str, int], expected: int, failures: list[str]) -> list[str]:
    """Failed polls in the window, and fewer polls than its rounds hold."""
    errors = []
    if window_polls["failed"]:
        errors.append(f"{window_polls['failed']} polls failed: {failures[:2]}")
    if sum(window_polls.values()) < expected:
        errors.append(f"{sum(window_polls.values())} polls in the window, {expected} expected")
    return errors


async def _until(ok: Callable[[], bool], limit_s: float) -> None:
    for _ in range(int(limit_s / 0.2)):
        if ok():
            return
        await asyncio.sleep(0.2)


def _under(pid: str, marker: bytes) -> bool:
    """Whether an ancestor of ``pid`` has ``marker`` on its command line (the cheap nodes' sshd name their
    config, in the cluster's workdir)."""
    for _ in range(32):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = stat.rpartition(")")[2].split()[1]
            if pid in ("0", "1"):
                return False
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except (OSError, IndexError):
            return False
    return False


def node_streams(config_path: str) -> dict[str, Any]:
    """The nodes' side of the streams: the ``journalctl --follow`` processes under the cheap nodes' sshd (of the
    cluster whose workdir holds ``config_path``), their count and memory (RSS, and PSS: what each costs beyond
    the pages they share)."""
    workdir = str(Path(config_path).resolve().parent)
    rss: list[int] = []
    pss: list[int] = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() != "journalctl" or b"--follow" not in (d / "cmdline").read_bytes():
                continue
            if not _under(d.name, workdir.encode()):
                continue
            rollup = (d / "smaps_rollup").read_text()
        except OSError:
            continue
        fields = {k: int(v.split()[0]) for k, _, v in (x.partition(":") for x in rollup.splitlines()[1:]) if v}
        rss.append(fields.get("Rss", 0))
        pss.append(fields.get("Pss", 0))
    return {"journalctl_processes": len(rss), "rss_kib": summarize([float(x) for x in rss]),
            "pss_kib": summarize([float(x) for x in pss])}


def main() -> int:
    """Entry point of ``python -m bench.watch_scale``."""
    p = argparse.ArgumentParser(prog="python -m bench.watch_scale", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--intervals", type=int, default=3)
    p.add_argument("--first-round-limit", type=float, default=240.0)
    p.add_argument("--profile", help="write a cProfile of the measured window (its CPU figures then include "
                                      "the profiler's own)")
    args = p.parse_args()
    raise_nofile()
    logging.getLogger("inferbot").setLevel(logging.WARNING)
    result = asyncio.run(measure(args.config, args.intervals, args.first_round_limit, args.profile))
    json.dump(result, sys.stdout)
    print()
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
