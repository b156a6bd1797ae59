"""Push against poll (issue 26): how long after the node's journal line each notice reaches Slack.

    python -m bench.push_latency --samples 4 [--skip-poll]

One simulated Kimi node behind a real sshd, the fake Slack Web API on loopback, and the bot's own pieces:
``runtime(config)``, ``slack_runtime`` (its ``Poster``), ``BotScheduler`` (the scheduler leader, its journal
stream), the restart as a confirmed one records it (``handlers.follow.start_follow``). Each contender is a fresh bot:

- **push**: ``[watch] push = true`` and every poll an hour apart after its first look (``poll``,
  ``interval``, ``safety_interval``), so only the journal stream can explain a notice;
- **poll** (today): ``push = false``, the default ``[watch] poll`` (15 s) and ``interval`` (60 s).

What is timed, from the moment journald took the line (the simulated journal's own timestamp) to the moment
the fake Slack got ``chat.postMessage``:

- **readiness**: "Application startup complete." → "✅ … is ready", over loads of different lengths (the smoke
  completion runs first, as always; its own time, the "first token in" of the notice, is given apart);
- **crash**: systemd's "Main process exited" → "⚠️ … restarted (not by inferbot)", the unit with
  ``RestartSec=10`` (systemd starts it again only after that);
- **unplanned restart**: someone runs ``systemctl restart`` on the node, systemd's "Stopped …" → "⚠️ …
  restarted (not by inferbot)";
- **exit 0**: the engine dies and vLLM exits 0, systemd's "Deactivated successfully." → "❌ … stopped
  unexpectedly".

Prints one JSON object (``python -m bench`` runs it in a process of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.cluster import PR_SET_CHILD_SUBREAPER, reap_all
from bench.readiness import FAKE_SLACK, NOTIFY, _load_fake_slack, run_measurement

LOADS_S = (2.0, 5.0, 9.0, 14.0)
"""The loads (about, plus the fake server's start-up) the readiness samples take turns with."""
RESTART_SEC = 10
PUSH_ONLY = {"push": True, "poll": "1h", "interval": "1h", "safety_interval": "1h"}
TODAY = {"push": False}
DEATHS = ("crash", "unplanned", "exit_0")
FIRST_TOKEN = re.compile(r"first token in ([\d.]+) s")


@dataclass
class Bench:
    """The node, its sshd, the fake Slack and the config (for one contender)."""

    sim: Any
    sshd: Any
    slack: Any
    config: Any
    tmp: Path


def set_profile(sim: Any, **changes: object) -> None:
    """How the fake vLLM's *next* load behaves (it reads its profile at each start)."""
    from services.sim.scenarios import KIMI_UNIT

    path = sim.root / "var/lib/inferbot-sim" / f"{KIMI_UNIT}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def journal_time(sim: Any, text: str, after: float) -> float | None:
    """When (epoch seconds) the simulated journal took the first line containing ``text`` after ``after``."""
    for path in [*sorted(sim.state_dir.glob("journal@*.tsv")), sim.journal_path()]:
        for line in path.read_bytes().decode(errors="replace").split("\n"):
            f = line.split("\t")
            if len(f) >= 5 and text in f[4] and int(f[0]) / 1e6 > after:
                return int(f[0]) / 1e6
    return None


async def posted(slack: Any, word: str, after: int, limit_s: float) -> tuple[float, str] | None:
    """When (epoch seconds) the fake Slack got a post containing ``word`` (among calls after ``after``)."""
    epoch = time.time() - time.monotonic()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for call in slack.calls[after:]:
            text = str(call.body.get("text", ""))
            if call.method == "chat.postMessage" and word in text:
                return epoch + float(call.at), text
        await asyncio.sleep(0.01)
    return None


@contextlib.asynccontextmanager
async def node(watch: dict[str, Any]) -> AsyncIterator[Bench]:
    """A fresh simulated node (RestartSec=10, the bot holds its API key), sshd and fake Slack."""
    from config.models import BotConfig
    from services.sim.node import SimNode
    from services.sim.scenarios import KIMI_API_KEY, KIMI_UNIT, fast_profile, kimi_node, kimi_unit
    from tests.sshd import ClientKey, free_port, login_user, start_sshd

    tmp = Path(tempfile.mkdtemp(prefix="ibench-push-", dir="/tmp"))
    os.chmod(tmp, 0o755)
    user = login_user()
    port = free_port()
    scenario = kimi_node(fast=True, port=port)
    scenario.units[0] = kimi_unit(fast=True, port=port, restart_sec=RESTART_SEC, profile=fast_profile())
    (tmp / "node").mkdir()
    os.chmod(tmp / "node", 0o755)
    sim = SimNode(tmp / "node", scenario, run_as=user if os.geteuid() == 0 else None)
    sshd = slack = None
    os.environ["KIMI_API_KEY"] = KIMI_API_KEY  # the smoke completion runs, as in production
    try:
        await sim.start()
        await sim.wait_for(KIMI_UNIT, "ready", 60)
        key = ClientKey(tmp)
        sshd = await asyncio.to_thread(start_sshd, key, sim.shell_env(), "127.0.0.2", user)
        (tmp / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
        slack = await _load_fake_slack()().start()
        config = BotConfig.model_validate({
            "nodes": [{"name": "gpu-a", "host": sshd.host, "port": sshd.port, "user": user,
                       "key_file": str(key.private), "known_hosts": str(tmp / "known_hosts")}],
            "services": [{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT, "api_key_env": "KIMI_API_KEY"}],
            "notify": {"channel": NOTIFY}, "state": {"dir": str(tmp / "state")}, "watch": watch,
        })
        yield Bench(sim=sim, sshd=sshd, slack=slack, config=config, tmp=tmp)
    finally:
        if slack is not None:
            await slack.stop()
        if sshd is not None:
            sshd.stop()
        await sim.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.asynccontextmanager
async def serving(b: Bench) -> AsyncIterator[Any]:
    """The bot as ``inferbot serve`` runs it: the Slack runtime (its Poster posts the notices), the scheduler
    leading (and watching)."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.app import runtime
    from bot.scheduler import BotScheduler
    from bot.slack.runtime import slack_runtime

    client = AsyncWebClient(token="xoxb-bench", base_url=b.slack.api_url)
    async with runtime(b.config) as core:
        sched = BotScheduler()
        rt = slack_runtime(core, client, jobs=sched)
        await sched.start(rt, watch=True)
        try:
            await asyncio.sleep(3.0)  # the watcher's first look (its baselines) and the journal stream
            yield rt
        finally:
            await sched.shutdown()
            if client.session is not None:
                await client.session.close()


async def readiness(b: Bench, rt: Any, samples: int, limit_s: float) -> list[dict[str, Any]]:
    """Restart the unit (as a confirmed restart does) with loads of different lengths; time each ✅."""
    from handlers.follow import start_follow
    from services.sim.scenarios import KIMI_UNIT

    out: list[dict[str, Any]] = []
    for i in range(samples):
        load = LOADS_S[i % len(LOADS_S)]
        set_profile(b.sim, seconds_per_shard=load / 119)
        before, t0 = len(b.slack.calls), time.time()
        started = datetime.now(UTC)
        res = await b.sim.restart_unit(KIMI_UNIT)
        if res.rc != 0:
            out.append({"error": f"restart failed: {res.message}"})
            continue
        await start_follow(rt.context(), b.config.services[0], "restart", started,
                           invocation_id=b.sim.state(KIMI_UNIT).invocation_id or None)
        got = await posted(b.slack, "is ready", before, load + limit_s)
        line = journal_time(b.sim, "Application startup complete.", t0)
        if got is None or line is None:
            out.append({"load_s": load, "error": "no ✅" if got is None else "no journal line"})
            continue
        smoke = FIRST_TOKEN.search(got[1])
        out.append({"load_s": load, "latency_s": round(got[0] - line, 3),
                    "smoke_s": float(smoke.group(1)) if smoke else None})
        await asyncio.sleep(1.0)  # the follow's job ends; the next restart is a new load
    return out


async def crash(b: Bench, limit_s: float) -> dict[str, Any]:
    """Kill the main process (systemd restarts it after RESTART_SEC); time the ⚠️ from the exit line."""
    from services.sim.scenarios import KIMI_UNIT

    before, t0 = len(b.slack.calls), time.time()
    await b.sim.crash(KIMI_UNIT)
    got = await posted(b.slack, "restarted (not by inferbot)", before, limit_s)
    line = journal_time(b.sim, "Main process exited", t0)
    await b.sim.wait_for(KIMI_UNIT, "ready", RESTART_SEC + 60)
    await posted(b.slack, "is ready", before, 60)  # its load's ✅, before the next sample
    if got is None or line is None:
        return {"error": "no ⚠️" if got is None else "no journal line"}
    return {"latency_s": round(got[0] - line, 3)}


async def unplanned(b: Bench, limit_s: float) -> dict[str, Any]:
    """``systemctl restart`` by someone else: time the ⚠️ from systemd's "Stopped" line (the old run is gone)."""
    from services.sim.scenarios import KIMI_UNIT

    before, t0 = len(b.slack.calls), time.time()
    await b.sim.restart_unit(KIMI_UNIT)
    got = await posted(b.slack, "restarted (not by inferbot)", before, limit_s)
    line = journal_time(b.sim, "Stopped ", t0)
    await b.sim.wait_for(KIMI_UNIT, "ready", 60)
    await posted(b.slack, "is ready", before, 60)
    if got is None or line is None:
        return {"error": "no ⚠️" if got is None else "no journal line"}
    return {"latency_s": round(got[0] - line, 3)}


async def exit_0(b: Bench, limit_s: float) -> dict[str, Any]:
    """The engine dies and vLLM exits 0 (Restart=on-failure does nothing): time the ❌ from systemd's line."""
    from services.sim.scenarios import KIMI_UNIT

    set_profile(b.sim, engine_death_exit=0)
    await b.sim.restart_unit(KIMI_UNIT)
    await b.sim.wait_for(KIMI_UNIT, "ready", 60)
    await asyncio.sleep(2.0)  # seen ready by the watcher
    before, t0 = len(b.slack.calls), time.time()
    b.sim.set_live(KIMI_UNIT, die=True)
    got = await posted(b.slack, "stopped unexpectedly", before, limit_s)
    line = journal_time(b.sim, "Deactivated successfully.", t0)
    set_profile(b.sim, engine_death_exit=None)
    await b.sim.start_unit(KIMI_UNIT)
    await b.sim.wait_for(KIMI_UNIT, "ready", 60)
    if got is None or line is None:
        return {"error": "no ❌" if got is None else "no journal line"}
    return {"latency_s": round(got[0] - line, 3)}


async def contender(watch: dict[str, Any], samples: int, deaths: int, limit_s: float) -> dict[str, Any]:
    """One bot configuration: its readiness, crash and exit-0 samples (a fresh node and bot for each kind)."""
    out: dict[str, Any] = {"watch": watch}
    async with node(watch) as b, serving(b) as rt:
        out["readiness"] = await readiness(b, rt, samples, limit_s)
    for kind, fn in (("crash", crash), ("unplanned", unplanned), ("exit_0", exit_0)):
        got: list[dict[str, Any]] = []
        async with node(watch) as b, serving(b):
            for _ in range(deaths):
                got.append(await fn(b, limit_s))
        out[kind] = got
    for kind in ("readiness", *DEATHS):
        out[f"{kind}_summary"] = summary(out[kind])
    return out


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and worst latency of the samples that completed, and how many did."""
    vals = [s["latency_s"] for s in samples if "latency_s" in s]
    if not vals:
        return {"n": 0, "failed": len(samples)}
    return {"n": len(vals), "failed": len(samples) - len(vals), "median_s": round(statistics.median(vals), 3),
            "worst_s": round(max(vals), 3), "best_s": round(min(vals), 3)}


async def run(samples: int, deaths: int, skip_poll: bool) -> dict[str, Any]:
    """Both contenders, push first."""
    out: dict[str, Any] = {"restart_sec": RESTART_SEC, "loads_s": list(LOADS_S)}
    out["push"] = await contender(PUSH_ONLY, samples, deaths, limit_s=30.0)
    if not skip_poll:
        out["poll"] = await contender(TODAY, samples, deaths, limit_s=RESTART_SEC + 90.0)
    return out


def measure_push(samples: int, deaths: int, skip_poll: bool = False, timeout_s: float = 1500.0) -> dict[str, Any]:
    """Run ``python -m bench.push_latency`` in its own process (as ``bench.readiness`` is) and return its JSON."""
    argv = ["bench.push_latency", "--samples", str(samples), "--deaths", str(deaths)]
    return run_measurement([*argv, *(["--skip-poll"] if skip_poll else [])], timeout_s)


def main() -> int:
    """Entry point of ``python -m bench.push_latency``."""
    p = argparse.ArgumentParser(prog="python -m bench.push_latency", description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=len(LOADS_S), help="readiness samples per contender")
    p.add_argument("--deaths", type=int, default=2, help="crash and exit-0 samples per contender")
    p.add_argument("--skip-poll", action="store_true", help="measure push only (not today's polls)")
    args = p.parse_args()
    if not FAKE_SLACK.exists():
        print(json.dumps({"status": "not measured (tests/slack/fake_slack.py missing)"}))
        return 0

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        result = asyncio.run(run(args.samples, args.deaths, args.skip_poll))
        result["status"] = "measured"
        print(json.dumps(result, ensure_ascii=False))
    finally:
        reap_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
